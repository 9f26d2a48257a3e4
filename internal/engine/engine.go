package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/metrics"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// Config configures an engine.
type Config struct {
	Core core.Config
	// Now is the clock (default time.Now).
	Now func() time.Time
	// MaxBatch bounds the commands applied in one step (default 4096).
	MaxBatch int
	Logger   *slog.Logger
	// Metrics, when set, is updated by the loop.
	Metrics *metrics.Metrics
}

// ErrStopped is returned once the engine has stopped.
var ErrStopped = errs.New(errs.Unavailable, "", "the scheduler is stopped")

// Engine runs a core for a server. See the package doc for its contracts.
type Engine struct {
	cfg  Config
	st   store.Store
	log  *slog.Logger
	cmds chan *command
	quit chan struct{}
	done chan struct{}

	mu      sync.RWMutex // guards tasks, order, nodes, waiters and fatal for readers
	tasks   map[string]*TaskRecord
	order   []string // task ids in submission order (for listing)
	nodes   map[string]*api.Node
	queues  map[string]*api.Queue
	jobs    map[string]*JobRecord
	waiters map[string][]chan struct{}
	fatal   error
	events  eventLog

	// loop-owned
	c      *core.Core
	seq    uint64
	staged map[string]*TaskRecord
	stNode map[string]*api.Node
	stQ    map[string]*api.Queue
	stJob  map[string]*JobRecord
	gauged time.Time // when the gauges were last refreshed
	// waiting counts pending and blocked tasks per queue and native tier,
	// kept up to date as records are published (for the metrics).
	waiting map[queueTier]int
}

type queueTier struct {
	queue string
	tier  int
}

// countWaiting adjusts waiting for a record entering (+1) or leaving (-1)
// the published set.
func (e *Engine) countWaiting(r *TaskRecord, delta int) {
	if r == nil || (r.State != "pending" && r.State != "blocked") {
		return
	}
	q := r.Spec.Queue
	if q == "" {
		q = "default"
	}
	k := queueTier{q, r.Spec.PriorityOrDefault()}
	if e.waiting[k] += delta; e.waiting[k] == 0 {
		delete(e.waiting, k)
	}
}

type cmdKind uint8

const (
	cmdSubmit cmdKind = iota
	cmdCancel
	cmdUpsertNode
	cmdNodeState
	cmdStarted
	cmdFinished
	cmdRenew
	cmdSummary
	cmdPutQueue
	cmdSubmitJob
	cmdCancelJob
)

type command struct {
	kind   cmdKind
	tenant string
	tasks  []api.Task
	id     string
	node   *api.Node
	queue  *api.Queue
	job    *api.Job
	state  string
	result core.Result
	// results
	summary *Summary
	ids     []string
	errs    []error
	err     error
	reply   chan struct{}
}

// New opens an engine on st, rebuilding the core from what st holds, and
// starts its loop. Stop it with Close.
func New(cfg Config, st store.Store) (*Engine, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 4096
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := core.New(cfg.Core)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		cfg: cfg, st: st, log: cfg.Logger, c: c,
		cmds: make(chan *command, cfg.MaxBatch), quit: make(chan struct{}), done: make(chan struct{}),
		tasks: map[string]*TaskRecord{}, nodes: map[string]*api.Node{}, queues: map[string]*api.Queue{}, waiters: map[string][]chan struct{}{},
		jobs: map[string]*JobRecord{}, stJob: map[string]*JobRecord{}, waiting: map[queueTier]int{},
		staged: map[string]*TaskRecord{}, stNode: map[string]*api.Node{}, stQ: map[string]*api.Queue{},
	}
	if err := e.recover(); err != nil {
		return nil, err
	}
	go e.loop()
	return e, nil
}

// recover rebuilds the core: nodes first, then tasks in submission order,
// then one step commits whatever the restore changed (placements that could
// not be restored go back to pending).
func (e *Engine) recover() error {
	ctx := context.Background()
	now := e.cfg.Now()
	if err := e.st.Load(ctx, KindNode, func(key string, v []byte) error {
		var r NodeRecord
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("node %s: %w", key, err)
		}
		if err := e.c.UpsertNode(now, &r.Spec); err != nil {
			return fmt.Errorf("node %s: %w", key, err)
		}
		spec := r.Spec
		e.nodes[key] = &spec
		return nil
	}); err != nil {
		return fmt.Errorf("recover nodes: %w", err)
	}
	if err := e.st.Load(ctx, KindQueue, func(key string, v []byte) error {
		var q api.Queue
		if err := json.Unmarshal(v, &q); err != nil {
			return fmt.Errorf("queue %s: %w", key, err)
		}
		e.queues[key] = &q
		return nil
	}); err != nil {
		return fmt.Errorf("recover queues: %w", err)
	}
	if err := e.st.Load(ctx, KindJob, func(key string, v []byte) error {
		var j JobRecord
		if err := json.Unmarshal(v, &j); err != nil {
			return fmt.Errorf("job %s: %w", key, err)
		}
		e.jobs[key] = &j
		return nil
	}); err != nil {
		return fmt.Errorf("recover jobs: %w", err)
	}
	var recs []*TaskRecord
	if err := e.st.Load(ctx, KindTask, func(key string, v []byte) error {
		r, err := decodeTask(v)
		if err != nil {
			return fmt.Errorf("task %s: %w", key, err)
		}
		recs = append(recs, r)
		return nil
	}); err != nil {
		return fmt.Errorf("recover tasks: %w", err)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	for _, r := range recs {
		if err := e.c.Restore(now, &r.Spec, r.saved()); err != nil {
			return fmt.Errorf("restore task %s: %w", r.Spec.ID, err)
		}
		e.tasks[r.Spec.ID] = r
		e.countWaiting(r, +1)
		e.order = append(e.order, r.Spec.ID)
		if r.Seq > e.seq {
			e.seq = r.Seq
		}
	}
	e.c.TakeOutput() // restore's own transitions are re-read below
	for _, r := range recs {
		e.refresh(r.Spec.ID, now)
	}
	if err := e.commitStaged(now); err != nil {
		return err
	}
	e.log.Info("engine recovered", "nodes", len(e.nodes), "tasks", len(recs))
	return nil
}

// Close stops the loop; commands after it fail with ErrStopped.
func (e *Engine) Close() {
	select {
	case <-e.quit:
	default:
		close(e.quit)
	}
	<-e.done
}

func (e *Engine) loop() {
	defer close(e.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	batch := make([]*command, 0, e.cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case cmd := <-e.cmds:
			batch = append(batch, cmd)
		case <-timer.C:
		case <-e.quit:
			e.failPending(ErrStopped)
			return
		}
	drain:
		for len(batch) < e.cfg.MaxBatch {
			select {
			case cmd := <-e.cmds:
				batch = append(batch, cmd)
			default:
				break drain
			}
		}
		if err := e.step(batch); err != nil {
			e.log.Error("engine stopped: store commit failed", "err", err)
			e.mu.Lock()
			e.fatal = err
			e.mu.Unlock()
			for _, cmd := range batch {
				cmd.err = errs.Wrap(errs.Unavailable, "", err)
				close(cmd.reply)
			}
			e.failPending(ErrStopped)
			return
		}
		for _, cmd := range batch {
			close(cmd.reply)
		}
		e.gauge(e.cfg.Now())
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		d := time.Hour
		if next, ok := e.c.NextWakeup(); ok {
			d = next.Sub(e.cfg.Now())
			if d < 0 {
				d = 0
			}
		}
		timer.Reset(d)
	}
}

// failPending answers every queued command with err.
func (e *Engine) failPending(err error) {
	for {
		select {
		case cmd := <-e.cmds:
			cmd.err = err
			close(cmd.reply)
		default:
			return
		}
	}
}

// step applies a batch, lets the core decide, and commits all changes in
// one durable commit before anyone is answered.
func (e *Engine) step(batch []*command) error {
	now := e.cfg.Now()
	for _, cmd := range batch {
		e.apply(cmd, now)
	}
	e.c.Tick(now)
	return e.commitStaged(now)
}

// commitStaged turns the core's output into record changes, commits them
// and publishes them.
func (e *Engine) commitStaged(now time.Time) error {
	out := e.c.TakeOutput()
	e.count(&out)
	for _, p := range out.Placements {
		e.refresh(p.Task, now)
	}
	for _, tr := range out.Transitions {
		e.refresh(tr.Task, now)
	}
	for _, p := range out.Preemptions {
		e.refresh(p.Victim, now)
	}
	if len(e.staged) == 0 && len(e.stNode) == 0 && len(e.stQ) == 0 && len(e.stJob) == 0 {
		return nil
	}
	recs := make([]store.Record, 0, len(e.staged)+len(e.stNode)+len(e.stQ))
	for id, j := range e.stJob {
		b, err := json.Marshal(j)
		if err != nil {
			return fmt.Errorf("encode job %s: %w", id, err)
		}
		recs = append(recs, store.Record{Kind: KindJob, Key: id, Value: b})
	}
	for name, q := range e.stQ {
		b, err := json.Marshal(q)
		if err != nil {
			return fmt.Errorf("encode queue %s: %w", name, err)
		}
		recs = append(recs, store.Record{Kind: KindQueue, Key: name, Value: b})
	}
	for id, r := range e.staged {
		b, err := r.encode()
		if err != nil {
			return fmt.Errorf("encode task %s: %w", id, err)
		}
		recs = append(recs, store.Record{Kind: KindTask, Key: id, Value: b})
	}
	for name, n := range e.stNode {
		b, err := json.Marshal(NodeRecord{Spec: *n})
		if err != nil {
			return fmt.Errorf("encode node %s: %w", name, err)
		}
		recs = append(recs, store.Record{Kind: KindNode, Key: name, Value: b})
	}
	t0 := time.Now()
	if err := e.st.Commit(context.Background(), recs); err != nil {
		return err
	}
	if m := e.cfg.Metrics; m != nil {
		m.CommitDuration.Observe(time.Since(t0).Seconds())
		m.CommitRecords.Observe(float64(len(recs)))
	}
	e.mu.Lock()
	var wake []chan struct{}
	fresh := make([]*TaskRecord, 0, 8)
	ids := make([]string, 0, len(e.staged))
	for id := range e.staged {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		r := e.staged[id]
		old, known := e.tasks[id]
		if !known {
			fresh = append(fresh, r)
		}
		e.countWaiting(old, -1)
		e.countWaiting(r, +1)
		if !known || old.State != r.State || old.Node != r.Node {
			e.events.add(Event{Kind: "task", ID: id, State: r.State, Node: r.Node, Reason: r.Reason, Time: now, Tenant: r.Tenant})
		}
		e.tasks[id] = r
		wake = append(wake, e.waiters[id]...)
		delete(e.waiters, id)
	}
	for name, n := range e.stNode {
		e.nodes[name] = n
		state := n.State
		if state == "" {
			state = api.NodeReady
		}
		e.events.add(Event{Kind: "node", ID: name, State: state, Time: now})
	}
	for name, q := range e.stQ {
		e.queues[name] = q
	}
	for id, j := range e.stJob {
		e.jobs[id] = j
	}
	e.events.wake()
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].Seq < fresh[j].Seq })
	for _, r := range fresh {
		e.order = append(e.order, r.Spec.ID)
	}
	e.mu.Unlock()
	for _, ch := range wake {
		close(ch)
	}
	clear(e.staged)
	clear(e.stNode)
	clear(e.stQ)
	clear(e.stJob)
	return nil
}

// count updates the decision counters.
func (e *Engine) count(out *core.Output) {
	m := e.cfg.Metrics
	if m == nil {
		return
	}
	for _, p := range out.Placements {
		tier := api.TierNames[p.Priority]
		m.Placements.WithLabelValues(tier).Inc()
		m.SchedulingDelay.WithLabelValues(tier).Observe(p.Delay.Seconds())
	}
	m.Preemptions.Add(float64(len(out.Preemptions)))
	for _, tr := range out.Transitions {
		m.Transitions.WithLabelValues(tr.To.String()).Inc()
	}
}

// gauge refreshes the gauges, at most once a second: summing capacity
// walks every node.
func (e *Engine) gauge(now time.Time) {
	m := e.cfg.Metrics
	if m == nil || now.Sub(e.gauged) < time.Second {
		return
	}
	e.gauged = now
	p := e.c.Pending()
	for l, n := range p {
		m.Pending.WithLabelValues(api.TierNames[l]).Set(float64(n))
	}
	dims := e.c.Dims()
	var capSum, allocSum [resource.MaxDims]int64
	states := map[string]int{api.NodeReady: 0, api.NodeNotReady: 0, api.NodeCordoned: 0, api.NodeDraining: 0}
	for _, n := range e.c.Nodes() {
		c, a := n.Capacity(), n.Allocated()
		for i := 0; i < dims.Len(); i++ {
			capSum[i] += c[i]
			allocSum[i] += a[i]
		}
		states[n.State()]++
	}
	for i := 0; i < dims.Len(); i++ {
		name := string(dims.Name(i))
		m.Capacity.WithLabelValues(name).Set(float64(capSum[i]))
		m.Allocated.WithLabelValues(name).Set(float64(allocSum[i]))
	}
	for s, n := range states {
		m.Nodes.WithLabelValues(s).Set(float64(n))
	}
	type typeModel struct{ typ, model string }
	devCap, devAlloc := map[typeModel]int64{}, map[typeModel]int64{}
	for _, n := range e.c.Nodes() {
		for _, d := range n.Devices() {
			k := typeModel{d.Type, d.Model}
			if d.Healthy {
				devCap[k] += 1000
			}
			devAlloc[k] += int64(d.Used)
		}
	}
	for k, v := range devCap {
		m.DeviceCapacity.WithLabelValues(k.typ, k.model).Set(float64(v))
	}
	for k, v := range devAlloc {
		m.DeviceAllocated.WithLabelValues(k.typ, k.model).Set(float64(v))
	}
	m.PendingQueue.Reset()
	e.mu.RLock()
	for k, n := range e.waiting {
		m.PendingQueue.WithLabelValues(k.queue, api.TierNames[k.tier]).Set(float64(n))
	}
	e.mu.RUnlock()
	e.mu.RLock()
	m.Tasks.Set(float64(len(e.tasks)))
	e.mu.RUnlock()
}

// current returns the loop's latest record of a task (staged or published).
func (e *Engine) current(id string) *TaskRecord {
	if r, ok := e.staged[id]; ok {
		return r
	}
	return e.tasks[id]
}

// refresh stages a new record of task id from the core's state.
func (e *Engine) refresh(id string, now time.Time) {
	old := e.current(id)
	if old == nil {
		return
	}
	s, ok := e.c.SavedState(id)
	if !ok {
		return
	}
	r := *old
	prev := r.State
	r.State = s.State.String()
	r.Node = s.Node
	r.Devices = s.Devices
	r.Chosen = s.Chosen
	r.Attempt = s.Attempt
	if t, ok := e.c.Task(id); ok {
		r.Reason = t.Reason()
	}
	switch {
	case s.State == core.Scheduled && prev != r.State:
		r.Scheduled = timePtr(now)
		r.Started, r.Finished = nil, nil
	case s.State == core.Running && prev != r.State:
		r.Started = timePtr(now)
	case s.State.Terminal() && prev != r.State:
		r.Finished = timePtr(now)
	case s.State == core.Pending:
		r.Scheduled, r.Started = nil, nil
	}
	e.staged[id] = &r
}

// apply runs one command against the core, staging its records.
func (e *Engine) apply(cmd *command, now time.Time) {
	switch cmd.kind {
	case cmdSubmit:
		cmd.ids = make([]string, len(cmd.tasks))
		cmd.errs = make([]error, len(cmd.tasks))
		for i := range cmd.tasks {
			cmd.ids[i], cmd.errs[i] = e.submit(cmd.tenant, &cmd.tasks[i], now)
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
		cmd.err = e.c.UpsertNode(now, cmd.node)
		if cmd.err == nil {
			e.stNode[cmd.node.Name] = cmd.node
		}
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
// or a conflict.
func (e *Engine) submit(tenant string, spec *api.Task, now time.Time) (string, error) {
	if err := spec.Validate(); err != nil {
		return "", err
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
			id := "t" + strconv.FormatUint(e.seq, 36)
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
	if err := e.c.Submit(now, spec); err != nil {
		return "", err
	}
	e.seq++
	e.staged[spec.ID] = &TaskRecord{Spec: *spec, Tenant: tenant, Seq: e.seq, State: core.Pending.String(), Chosen: -1, Submitted: now}
	e.refresh(spec.ID, now)
	return spec.ID, nil
}

// do sends a command to the loop and waits for its durable answer.
func (e *Engine) do(ctx context.Context, cmd *command) error {
	cmd.reply = make(chan struct{})
	e.mu.RLock()
	fatal := e.fatal
	e.mu.RUnlock()
	if fatal != nil {
		return ErrStopped
	}
	select {
	case e.cmds <- cmd:
	case <-e.quit:
		return ErrStopped
	case <-ctx.Done():
		return errs.Wrap(errs.Unavailable, "", ctx.Err())
	}
	// Once queued the command will run; its answer is waited for even if
	// ctx ends, so that "not acknowledged" never hides "done".
	<-cmd.reply
	return cmd.err
}

// Submit admits tasks owned by tenant. It returns each task's id
// (generated when empty) and error; a nil error means the task is durable.
func (e *Engine) Submit(ctx context.Context, tenant string, tasks []api.Task) ([]string, []error, error) {
	cmd := &command{kind: cmdSubmit, tenant: tenant, tasks: tasks}
	if err := e.do(ctx, cmd); err != nil {
		return nil, nil, err
	}
	return cmd.ids, cmd.errs, nil
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

// SetNodeState cordons, uncordons, drains or marks a node notready.
func (e *Engine) SetNodeState(ctx context.Context, name, state string) error {
	return e.do(ctx, &command{kind: cmdNodeState, id: name, state: state})
}

// Task returns the durable record of a task (do not modify it).
func (e *Engine) Task(id string) (*TaskRecord, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	r, ok := e.tasks[id]
	return r, ok
}

// NumTasks returns how many task records the engine holds.
func (e *Engine) NumTasks() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.tasks)
}

// WaitChange returns a channel closed at the next durable change of task
// id (or at once if the task is unknown).
func (e *Engine) WaitChange(id string) <-chan struct{} {
	ch := make(chan struct{})
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.tasks[id]; !ok || e.fatal != nil {
		close(ch)
		return ch
	}
	e.waiters[id] = append(e.waiters[id], ch)
	return ch
}

// WaitPlaced waits until task id is no longer pending or blocked, or ctx
// ends, and returns its latest record.
func (e *Engine) WaitPlaced(ctx context.Context, id string) (*TaskRecord, error) {
	for {
		ch := e.WaitChange(id)
		r, ok := e.Task(id)
		if !ok {
			return nil, errs.New(errs.NotFound, "id", "no task %q", id)
		}
		if r.State != core.Pending.String() && r.State != core.Blocked.String() {
			return r, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return r, nil
		case <-e.done:
			return r, ErrStopped
		}
	}
}

// Nodes returns the durable node specs, by name.
func (e *Engine) Nodes() []api.Node {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]api.Node, 0, len(e.nodes))
	for _, n := range e.nodes {
		out = append(out, *n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Filter selects tasks in a listing; empty fields match everything.
type Filter struct {
	State, Queue, Node, Tenant string
}

func (f Filter) match(r *TaskRecord) bool {
	return (f.State == "" || r.State == f.State) && (f.Queue == "" || r.Spec.Queue == f.Queue) &&
		(f.Node == "" || r.Node == f.Node) && (f.Tenant == "" || r.Tenant == f.Tenant)
}

// maxListScan bounds the records one listing call looks at, matching or
// not, so that a rare filter over a million tasks cannot hold the lock.
const maxListScan = 100_000

// List returns up to limit tasks matching f in submission order, starting
// after position cursor; next is the cursor of the following page (0 when
// the listing is complete).
func (e *Engine) List(f Filter, cursor, limit int) (out []*TaskRecord, next int) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if cursor < 0 || cursor > len(e.order) {
		cursor = len(e.order)
	}
	i := cursor
	for scanned := 0; i < len(e.order) && len(out) < limit && scanned < maxListScan; i++ {
		scanned++
		if r := e.tasks[e.order[i]]; r != nil && f.match(r) {
			out = append(out, r)
		}
	}
	if i < len(e.order) {
		return out, i
	}
	return out, 0
}

// ResourceSummary is one resource across the cluster, in canonical units.
type ResourceSummary struct {
	Capacity    int64   `json:"capacity"`
	Allocated   int64   `json:"allocated"`
	Utilization float64 `json:"utilization"`
}

// Summary is the cluster at a glance (GET /api/v1/cluster).
type Summary struct {
	Policy    string                     `json:"policy"`
	Nodes     map[string]int             `json:"nodes"`
	Resources map[string]ResourceSummary `json:"resources"`
	Pending   map[string]int             `json:"pending"`
	Tasks     int                        `json:"tasks"`
}

func (e *Engine) summarize() *Summary {
	s := &Summary{Policy: e.cfg.Core.Policy, Nodes: map[string]int{}, Resources: map[string]ResourceSummary{}, Pending: map[string]int{}}
	dims := e.c.Dims()
	var capSum, allocSum [resource.MaxDims]int64
	for _, n := range e.c.Nodes() {
		c, a := n.Capacity(), n.Allocated()
		for i := 0; i < dims.Len(); i++ {
			capSum[i] += c[i]
			allocSum[i] += a[i]
		}
		s.Nodes[n.State()]++
	}
	for i := 0; i < dims.Len(); i++ {
		r := ResourceSummary{Capacity: capSum[i], Allocated: allocSum[i]}
		if r.Capacity > 0 {
			r.Utilization = float64(r.Allocated) / float64(r.Capacity)
		}
		s.Resources[string(dims.Name(i))] = r
	}
	for l, n := range e.c.Pending() {
		s.Pending[api.TierNames[l]] = n
	}
	s.Tasks = e.c.NumTasks()
	return s
}

// Summarize returns the cluster summary, computed by the loop.
func (e *Engine) Summarize(ctx context.Context) (*Summary, error) {
	cmd := &command{kind: cmdSummary}
	if err := e.do(ctx, cmd); err != nil {
		return nil, err
	}
	return cmd.summary, nil
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
	if tenant != "" && tenant != DefaultTenant {
		with := make(map[string]*api.Queue, len(all)+1)
		for k, v := range all {
			with[k] = v
		}
		with[q.Name] = q
		if api.QueueOwner(q.Name, with) != tenant || (all[q.Name] != nil && api.QueueOwner(q.Name, all) != tenant) {
			return errs.New(errs.PermissionDenied, "name", "queue %q is not under tenant %s", q.Name, tenant)
		}
	}
	e.stQ[q.Name] = q
	return nil
}

// PutQueue creates or replaces a queue on behalf of tenant ("" or
// "default": no ownership check).
func (e *Engine) PutQueue(ctx context.Context, tenant string, q api.Queue) error {
	return e.do(ctx, &command{kind: cmdPutQueue, tenant: tenant, queue: &q})
}

// Queues returns the queues (by name) a tenant may see ("" or "default":
// all).
func (e *Engine) Queues(tenant string) []api.Queue {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]api.Queue, 0, len(e.queues))
	for name, q := range e.queues {
		if tenant == "" || tenant == DefaultTenant || api.QueueOwner(name, e.queues) == tenant {
			out = append(out, *q)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Err returns why the engine stopped (a failed store commit), or nil while
// it runs.
func (e *Engine) Err() error {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.fatal
}
