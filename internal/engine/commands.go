package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
)

// apply runs one command against the core, staging its records.
func (e *Engine) apply(cmd *command, now time.Time) {
	switch cmd.kind {
	case cmdSubmit:
		cmd.ids = make([]string, len(cmd.tasks))
		cmd.errs = make([]error, len(cmd.tasks))
		for i := range cmd.tasks {
			if cmd.errs[i] = cmd.prepErr[i]; cmd.errs[i] == nil {
				cmd.ids[i], cmd.errs[i] = e.submit(cmd.tenant, &cmd.tasks[i], cmd.specs[i], now, "")
			}
		}
	case cmdCancel:
		cmd.err = e.c.Cancel(now, cmd.id, "cancelled by request")
	case cmdStarted:
		// The core reports the transition; commitStaged refreshes the record.
		cmd.err = e.c.TaskStarted(now, cmd.id)
	case cmdFinished:
		cmd.err = e.c.TaskFinished(now, cmd.id, cmd.result)
		if cmd.err == nil {
			r := *e.current(cmd.id)
			code := cmd.result.ExitCode
			r.ExitCode = &code
			e.staged[cmd.id] = &r // the state follows from the core's transition
		}
	case cmdRenew:
		cmd.err = e.c.Renew(now, cmd.id)
	case cmdSummary:
		cmd.summary = e.summarize()
	case cmdPutQueue:
		cmd.err = e.putQueue(cmd.tenant, cmd.queue)
	case cmdSubmitJob:
		id, err := e.submitJob(cmd.tenant, cmd.job, now)
		cmd.ids, cmd.errs = []string{id}, []error{err}
	case cmdCancelJob:
		cmd.err = e.cancelJob(cmd.id, now)
	case cmdUpsertNode:
		if cmd.err = e.mayUpsertStatic(cmd.node.Name); cmd.err != nil {
			break
		}
		cmd.err = e.c.UpsertNode(now, cmd.node)
		if cmd.err == nil {
			e.stNode[cmd.node.Name] = cmd.node
		}
	case cmdRegister:
		cmd.gen, cmd.err = e.register(cmd.reg, now)
	case cmdReleaseNode:
		cmd.state, cmd.err = e.releaseNode(cmd.id, now)
	case cmdHeartbeat:
		cmd.err = e.heartbeat(cmd.id, cmd.beats, now)
	case cmdAgentStatus:
		cmd.statusOut = e.agentStatus(cmd.id, cmd.updates, now)
	case cmdNodeViews:
		cmd.nodeViews = e.nodeViews()
	case cmdQueueViews:
		cmd.queueViews = e.queueViews(cmd.tenant)
	case cmdNodeState:
		cmd.err = e.c.SetNodeState(now, cmd.id, cmd.state)
		if cmd.err == nil {
			n := *e.currentNode(cmd.id)
			n.State = cmd.state
			e.stNode[cmd.id] = &n
		}
	}
}

func (e *Engine) currentNode(name string) *api.Node {
	if n, ok := e.stNode[name]; ok {
		return n
	}
	return e.nodes[name]
}

// submit admits one task: a new id, or the same spec again (idempotent),
// or a conflict. specJSON is the spec's encoding from prepare, or nil to
// validate and encode here.
func (e *Engine) submit(tenant string, spec *api.Task, specJSON []byte, now time.Time, job string) (string, error) {
	if spec.Queue == "" && tenant != "" && tenant != DefaultTenant && e.queueView()[tenant] != nil {
		// A tenant's task that names no queue goes to the tenant's own.
		spec.Queue = tenant
		specJSON = nil
	}
	if specJSON == nil {
		var err error
		if specJSON, err = prepare(spec); err != nil {
			return "", err
		}
	}
	if spec.Queue != "" {
		all := e.queueView()
		if all[spec.Queue] == nil {
			return "", errs.Invalid("queue", "no queue %q", spec.Queue)
		}
		if tenant != "" && tenant != DefaultTenant && api.QueueOwner(spec.Queue, all) != tenant {
			return "", errs.New(errs.PermissionDenied, "queue", "queue %q belongs to another tenant", spec.Queue)
		}
	}
	if spec.ID == "" {
		for {
			e.seq++
			id := QualifyID(tenant, "t"+strconv.FormatUint(e.seq, 36))
			if e.current(id) == nil {
				spec.ID = id
				break
			}
		}
	} else if old := e.current(spec.ID); old != nil {
		if old.Tenant != tenant {
			return "", errs.New(errs.Conflict, "id", "task id %q is in use", spec.ID)
		}
		a, _ := json.Marshal(old.Spec)
		b, _ := json.Marshal(spec)
		if bytes.Equal(a, b) {
			return spec.ID, nil
		}
		return "", errs.New(errs.Conflict, "id", "task %q exists with a different spec", spec.ID)
	}
	var err error
	if job != "" {
		err = e.c.SubmitJobTask(now, job, spec)
	} else {
		err = e.c.Submit(now, spec)
	}
	if err != nil {
		return "", err
	}
	e.seq++
	r := &TaskRecord{Spec: *spec, Tenant: tenant, Seq: e.seq, Chosen: -1, Submitted: now, spec: specJSON}
	e.stageState(r, spec.ID, now)
	return spec.ID, nil
}

// Submit admits tasks owned by tenant. It returns each task's id
// (generated when empty) and error; a nil error means the task is durable.
func (e *Engine) Submit(ctx context.Context, tenant string, tasks []api.Task) ([]string, []error, error) {
	if err := e.roomForWork(); err != nil {
		return nil, nil, err
	}
	cmd := &command{kind: cmdSubmit, tenant: tenant, tasks: tasks,
		specs: make([][]byte, len(tasks)), prepErr: make([]error, len(tasks))}
	// Validation and encoding run here, in the caller's goroutine, so that
	// concurrent submitters do them in parallel and the loop does not.
	for i := range tasks {
		e.defaultLease(&tasks[i])
		cmd.specs[i], cmd.prepErr[i] = prepareFor(tenant, &tasks[i])
	}
	if err := e.do(ctx, cmd); err != nil {
		return nil, nil, err
	}
	return cmd.ids, cmd.errs, nil
}

// defaultLease gives a lease (a task without a command) that names no
// lease and no timeout (which ends a lease too) the server's default, so that a forgotten lease does not hold its
// devices for ever; the task's view shows the lease it got.
func (e *Engine) defaultLease(t *api.Task) {
	if len(t.Command) == 0 && t.Lease == 0 && t.Timeout == 0 && e.cfg.DefaultLease > 0 {
		t.Lease = api.Duration(e.cfg.DefaultLease)
	}
}

// prepareFor validates a spec, qualifies its ids for tenant (tenancy.go)
// and returns its JSON encoding for the store.
func prepareFor(tenant string, spec *api.Task) ([]byte, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := qualifyTask(tenant, spec); err != nil {
		return nil, err
	}
	return encodeSpec(spec)
}

// prepare validates a spec (its ids already qualified) and returns its
// JSON encoding for the store.
func prepare(spec *api.Task) ([]byte, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return encodeSpec(spec)
}

func encodeSpec(spec *api.Task) ([]byte, error) {
	b, err := spec.AppendJSON(nil)
	if err != nil {
		return nil, errs.Invalid("", "encoding the task: %v", err)
	}
	return b, nil
}

// Cancel cancels a task.
func (e *Engine) Cancel(ctx context.Context, id string) error {
	return e.do(ctx, &command{kind: cmdCancel, id: id})
}

// Started records that a task's executor started it.
func (e *Engine) Started(ctx context.Context, id string) error {
	return e.do(ctx, &command{kind: cmdStarted, id: id})
}

// Finished records how a task ended.
func (e *Engine) Finished(ctx context.Context, id string, r core.Result) error {
	return e.do(ctx, &command{kind: cmdFinished, id: id, result: r})
}

// Renew extends a lease.
func (e *Engine) Renew(ctx context.Context, id string) error {
	return e.do(ctx, &command{kind: cmdRenew, id: id})
}

// UpsertNode adds or replaces a node.
func (e *Engine) UpsertNode(ctx context.Context, n api.Node) error {
	return e.do(ctx, &command{kind: cmdUpsertNode, node: &n})
}

// UpsertNodes adds or replaces nodes, applied in their order. They are all
// queued before any answer is awaited, so the loop's group commit writes
// them in as few steps as its step size allows (not one fsync each). Every
// node is tried; it returns the index of the first (by order) that failed
// with its error, or (-1, nil).
func (e *Engine) UpsertNodes(ctx context.Context, nodes []api.Node) (int, error) {
	cmds := make([]*command, 0, len(nodes))
	failed, firstErr := -1, error(nil)
	for i := range nodes {
		cmd := &command{kind: cmdUpsertNode, node: &nodes[i]}
		if err := e.send(ctx, cmd); err != nil {
			failed, firstErr = i, err
			break
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := e.wait(cmd); err != nil && (failed < 0 || i < failed) {
			failed, firstErr = i, err
		}
	}
	return failed, firstErr
}

// SetNodeState cordons, uncordons, drains or marks a node notready.
func (e *Engine) SetNodeState(ctx context.Context, name, state string) error {
	return e.do(ctx, &command{kind: cmdNodeState, id: name, state: state})
}

// DefaultTenant owns everything when authentication is off; it may use any
// queue.
const DefaultTenant = "default"

// queueView is the loop's latest queues (staged over published).
func (e *Engine) queueView() map[string]*api.Queue {
	if len(e.stQ) == 0 {
		return e.queues
	}
	all := make(map[string]*api.Queue, len(e.queues)+len(e.stQ))
	for k, v := range e.queues {
		all[k] = v
	}
	for k, v := range e.stQ {
		all[k] = v
	}
	return all
}

// putQueue validates q against the tree and stages it. A tenant other than
// the default may only put queues that descend from its own.
func (e *Engine) putQueue(tenant string, q *api.Queue) error {
	if err := q.Validate(); err != nil {
		return err
	}
	all := e.queueView()
	if err := api.ValidateQueueTree(q, all); err != nil {
		return err
	}
	if scoped(tenant) {
		if err := mayPutQueue(tenant, q, all); err != nil {
			return err
		}
	}
	if err := e.c.SetQueue(e.cfg.Now(), q); err != nil {
		return err
	}
	e.stQ[q.Name] = q
	return nil
}

// PutQueue creates or replaces a queue on behalf of tenant ("" or
// "default": no ownership check).
func (e *Engine) PutQueue(ctx context.Context, tenant string, q api.Queue) error {
	if err := e.roomForWork(); err != nil {
		return err
	}
	return e.ConfigureQueue(ctx, q, tenant)
}

// ConfigureQueue is PutQueue without the disk's reserve check: for the
// server's own configuration (--queues at start), which must not keep a
// server on a nearly full disk from starting.
func (e *Engine) ConfigureQueue(ctx context.Context, q api.Queue, tenant string) error {
	return e.do(ctx, &command{kind: cmdPutQueue, tenant: tenant, queue: &q})
}
