package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
)

// Task commands: submit, cancel, started, finished, renew.

// submitCmd admits tasks of one tenant. Validation and encoding ran in the
// caller's goroutine (specs, prepErr); the loop admits each task that
// passed.
type submitCmd struct {
	answer
	tenant  string
	tasks   []api.Task
	specs   [][]byte // per task: encoded spec from prepareFor (nil when volatile)
	prepErr []error  // per task: validation error from prepareFor
	ids     []string // per task: its id (result)
	errs    []error  // per task: its error (result)
	trace   string   // the sampled traceparent of the submission ("": none)
}

func (c *submitCmd) weight() int { return len(c.tasks) }

func (c *submitCmd) run(e *Engine, now time.Time) {
	c.ids = make([]string, len(c.tasks))
	c.errs = make([]error, len(c.tasks))
	e.submitTrace = c.trace
	defer func() { e.submitTrace = "" }()
	for i := range c.tasks {
		if c.errs[i] = c.prepErr[i]; c.errs[i] == nil {
			c.ids[i], c.errs[i] = e.submit(c.tenant, &c.tasks[i], c.specs[i], true, now, "")
		}
	}
}

// taskCommands are the tasks' commands (submit, cancel, started,
// finished, renew) and what admission needs (defaults, the encoded
// spec). The Engine embeds it; each command runs on the loop.
type taskCommands struct {
	e *Engine
}

// Submit admits tasks owned by tenant. It returns each task's id
// (generated when empty) and error; a nil error means the task is durable.
func (tc *taskCommands) Submit(ctx context.Context, tenant string, tasks []api.Task) ([]string, []error, error) {
	e := tc.e
	if err := e.roomForWork(0); err != nil {
		return nil, nil, err // below the reserve: not worth encoding
	}
	if e.tracing.on() {
		var span trace.Span
		ctx, span = e.tracing.tr.Start(ctx, "hetsched.submit", trace.WithAttributes(attribute.Int("hetsched.tasks", len(tasks))))
		defer span.End()
	}
	cmd := &submitCmd{tenant: tenant, tasks: tasks, trace: sampledTraceparent(ctx),
		specs: make([][]byte, len(tasks)), prepErr: make([]error, len(tasks))}
	// Validation and encoding run here, in the caller's goroutine, so that
	// concurrent submitters do them in parallel and the loop does not.
	size := int64(0)
	for i := range tasks {
		e.defaultLease(&tasks[i])
		if tasks[i].Service != "" {
			cmd.prepErr[i] = errNotReplica()
			continue
		}
		cmd.specs[i], cmd.prepErr[i] = e.prepareFor(tenant, &tasks[i])
		size += int64(len(cmd.specs[i])) + recordOverhead
	}
	if err := e.roomForWork(size); err != nil {
		return nil, nil, err
	}
	if err := e.do(ctx, cmd); err != nil {
		return nil, nil, err
	}
	return cmd.ids, cmd.errs, nil
}

// submit admits one task: a new id, or the same spec again (idempotent),
// or a conflict. prepared says spec went through prepare (validated, and
// specJSON is its encoding); else it is validated and encoded here.
func (tc *taskCommands) submit(tenant string, spec *api.Task, specJSON []byte, prepared bool, now time.Time, job string) (string, error) {
	e := tc.e
	if spec.Queue == "" && tenant != "" && tenant != DefaultTenant && e.staged.queueView()[tenant] != nil {
		// A tenant's task that names no queue goes to the tenant's own.
		spec.Queue = tenant
		specJSON, prepared = nil, false
	}
	if !prepared {
		var err error
		if specJSON, err = e.prepare(spec); err != nil {
			return "", err
		}
	}
	if spec.Queue != "" {
		all := e.staged.queueView()
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
			if e.staged.current(id) == nil {
				spec.ID = id
				break
			}
		}
	} else if old := e.staged.current(spec.ID); old != nil {
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
	r := &TaskRecord{Spec: *spec, Tenant: tenant, Seq: e.seq, Chosen: -1, Submitted: now, spec: specJSON, Trace: e.submitTrace}
	e.staged.stageState(r, spec.ID, now)
	return spec.ID, nil
}

// defaultLease gives a lease (a task without a command) that names no
// lease and no timeout (which ends a lease too) the server's default, so that a forgotten lease does not hold its
// devices for ever; the task's view shows the lease it got.
func (tc *taskCommands) defaultLease(t *api.Task) {
	e := tc.e
	if len(t.Command) == 0 && t.Lease == 0 && t.Timeout == 0 && e.cfg.DefaultLease > 0 {
		t.Lease = api.Duration(e.cfg.DefaultLease)
	}
}

// errNotReplica refuses a submitted task that names a service.
func errNotReplica() error {
	return errs.Invalid("service", "set by the server on a service's replicas: create a service (POST /api/v1/services) to run replicas")
}

// prepareFor validates a spec, qualifies its ids for tenant (tenancy.go)
// and returns its JSON encoding for the store (encodeSpec).
func (tc *taskCommands) prepareFor(tenant string, spec *api.Task) ([]byte, error) {
	e := tc.e
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := qualifyTask(tenant, spec); err != nil {
		return nil, err
	}
	return e.encodeSpec(spec)
}

// prepare validates a spec (its ids already qualified) and returns its
// JSON encoding for the store (encodeSpec).
func (tc *taskCommands) prepare(spec *api.Task) ([]byte, error) {
	e := tc.e
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return e.encodeSpec(spec)
}

// encodeSpec is a spec's JSON encoding for the store's task record, or
// nil where the store keeps nothing (volatile): no record is written
// there, and the record encodes its spec itself if it ever is
// (TaskRecord.appendJSON). For the Kubernetes front end that is one JSON
// encoding less per pod: 3.6 % of a --cpu-profile of `bench kube`'s
// window (0.08 of 2.20 s).
func (tc *taskCommands) encodeSpec(spec *api.Task) ([]byte, error) {
	e := tc.e
	if e.volatile {
		return nil, nil
	}
	b, err := spec.AppendJSON(nil)
	if err != nil {
		return nil, errs.Invalid("", "encoding the task: %v", err)
	}
	return b, nil
}

// cancelCmd cancels a task.
type cancelCmd struct {
	answer
	id string
}

func (c *cancelCmd) run(e *Engine, now time.Time) {
	c.err = e.c.Cancel(now, c.id, "cancelled by request")
}

// Cancel cancels a task.
func (tc *taskCommands) Cancel(ctx context.Context, id string) error {
	e := tc.e
	return e.do(ctx, &cancelCmd{id: id})
}

// startedCmd records that tasks' executors started them.
type startedCmd struct {
	answer
	ids  []string
	errs []error // per id (result)
}

func (c *startedCmd) run(e *Engine, now time.Time) {
	// The core reports the transitions; the step's stageOutput refreshes
	// the records.
	c.errs = make([]error, len(c.ids))
	for i, id := range c.ids {
		c.errs[i] = e.c.TaskStarted(now, id)
	}
}

// Started records that a task's executor started it.
func (tc *taskCommands) Started(ctx context.Context, id string) error {
	e := tc.e
	errs, err := e.StartedMany(ctx, []string{id})
	if err != nil {
		return err
	}
	return errs[0]
}

// StartedMany records that tasks' executors started them, in one step:
// each id gets its error (nil: durable), or the call its own. A front
// end that starts many tasks a second (the Kubernetes one: a bound pod is
// a started task) sends them together, as one command, rather than one
// engine step each.
func (tc *taskCommands) StartedMany(ctx context.Context, ids []string) ([]error, error) {
	e := tc.e
	cmd := &startedCmd{ids: ids}
	if err := e.do(ctx, cmd); err != nil {
		return nil, err
	}
	return cmd.errs, nil
}

// finishedCmd records how a task ended.
type finishedCmd struct {
	answer
	id     string
	result core.Result
}

func (c *finishedCmd) run(e *Engine, now time.Time) {
	if c.err = e.c.TaskFinished(now, c.id, c.result); c.err == nil {
		r := *e.staged.current(c.id)
		code := c.result.ExitCode
		r.ExitCode = &code
		e.staged.tasks[c.id] = &r // the state follows from the core's transition
	}
}

// Finished records how a task ended.
func (tc *taskCommands) Finished(ctx context.Context, id string, r core.Result) error {
	e := tc.e
	return e.do(ctx, &finishedCmd{id: id, result: r})
}

// renewCmd extends a lease.
type renewCmd struct {
	answer
	id string
}

func (c *renewCmd) run(e *Engine, now time.Time) { c.err = e.c.Renew(now, c.id) }

// Renew extends a lease.
func (tc *taskCommands) Renew(ctx context.Context, id string) error {
	e := tc.e
	return e.do(ctx, &renewCmd{id: id})
}
