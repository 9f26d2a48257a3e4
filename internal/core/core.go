package core

import (
	"slices"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// Core is the scheduler state machine.
type Core struct {
	cfg    Config
	policy *Policy
	dims   *resource.Dims
	idx    *index
	tasks  map[string]*Task

	ct     classTable // the scheduling and runtime classes (class.go)
	lv     levels     // the tiers' pending tasks and the bands' batches (queue.go)
	timers timers
	seq    uint64
	now    int64
	out    Output
	spare  Output     // the buffer handed out by the previous TakeOutput
	cs     CycleState // what plugins see outside a search (Reserve, QueueSort)

	lr learner // runtimes and speeds learned from finished tasks, the request mix (learn.go)

	pl       placer          // the placement search (placement.go)
	pe       preemptor       // preemption's and time-sharing's what-ifs (preempt.go)
	jr       journal         // undo log of the open checkpoints (journal.go)
	cf       coreFilters     // the dynamic filters every policy runs first (plugins_filter.go)
	cons     constraintIndex // the placement constraints' state (constraints.go)
	deferred []*classQueue   // dispatch's scratch: the queues it deferred (reused)
	wk       waker           // the blocked class queues and what wakes them (schedule.go)
	// promo holds the starvation deadlines: las's promotions and the
	// starvation bound (promote.go).
	promo promoter
	// placedN counts the tasks placed on nodes.
	placedN int
	// deviceDims are the resource dims some node has (or had) device
	// objects of, with ids: GPUs, TPUs; not a countable license.
	deviceDims [resource.MaxDims]bool
	retryAt    int64 // a deferred search resumes at this time (when retrySet)
	retrySet   bool
	rr         int // round-robin cursor over index.order
	callPlaced int // placements made by the current input

	// jobs (jobs.go)
	jb     jobBook   // the jobs and the tasks' dependencies (jobs.go, depends.go)
	eta    estimator // where pending tasks stand (eta.go)
	gs     gangs     // the gangs' waiting, tries, reservations and preemption (gangs.go)
	capSeq uint64    // bumps when capacity may have appeared (wake)
	loc    locality  // the tasks' locality waits (locality.go)
	qs     queues    // the tenant queues (queues.go)

	stats Stats
}

// Stats are running counters of the core's work.
type Stats struct {
	Submitted, Placed, Preempted, Expired, Finished uint64
	// Starved counts the tasks that waited past their starvation bound
	// (Config.StarveFactor, StarveLimit; promote.go).
	Starved uint64
	// Promoted counts las's starvation promotions (promote.go).
	Promoted uint64
	// GangReserved counts gang reservations made (gangreserve.go).
	GangReserved                      uint64
	Attempts, Blocks, Deferrals, Aged uint64
}

// New returns a core with no nodes and no tasks.
func New(cfg Config) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Core{
		cfg:   cfg,
		dims:  resource.NewDims(),
		idx:   newIndex(cfg.IdentityLabels),
		tasks: make(map[string]*Task, cfg.TaskCapacityHint),
		qs:    newQueues(),
	}
	c.cs.core = c
	c.promo.c = c
	c.gs.c = c
	c.qs.c = c
	c.pl.c = c
	c.pe.c = c
	c.jr.c = c
	c.lr = learner{c: c, speed: map[string]ewma{}}
	c.wk = waker{c: c, pinned: map[pinKey][]blockRef{}}
	c.loc.c = c
	c.lv.c = c
	c.eta.c = c
	c.jb = jobBook{c: c, jobs: map[string]*job{}}
	c.ct = classTable{c: c, byHash: map[uint64][]*class{}, rtByName: map[string]*runtimeClass{},
		rtByMeta: map[string]*runtimeClass{}, rtByClass: map[*class]*runtimeClass{}}
	for i := range c.lv.bands {
		c.lv.bands[i].since = -1
	}
	c.policy = newPolicy(c, cfg.Policy)
	c.cf = newCoreFilters(c, c.policy.Picker)
	c.cons = newConstraintIndex(c)
	return c, nil
}

// Config returns the core's configuration.
func (c *Core) Config() Config { return c.cfg }

// Policy returns the policy in force.
func (c *Core) Policy() *Policy { return c.policy }

// Dims returns the resource name table (read only).
func (c *Core) Dims() *resource.Dims { return c.dims }

// Stats returns the running counters.
func (c *Core) Stats() Stats { return c.stats }

// TakeOutput returns the decisions made since the last call and clears
// them. The returned slices are reused by the core at the next TakeOutput
// call: copy what must outlive it.
func (c *Core) TakeOutput() Output {
	c.gs.gangReport()
	o := c.out
	c.out = c.spare
	c.out.reset()
	c.spare = o
	return o
}

// Task returns a task by id (read only).
func (c *Core) Task(id string) (*Task, bool) {
	t, ok := c.tasks[id]
	return t, ok
}

// Node returns a node by name (read only).
func (c *Core) Node(name string) (*Node, bool) {
	n, ok := c.idx.nodes[name]
	return n, ok
}

// Nodes returns the nodes in registration order, except that removing a
// node moves the last one into its place (read only).
func (c *Core) Nodes() []*Node { return c.idx.order }

// NumTasks returns how many tasks the core holds (terminal ones included
// until forgotten).
func (c *Core) NumTasks() int { return len(c.tasks) }

// Pending returns how many tasks wait at each level: a task aging raised
// counts in the level it waits in (PendingByTier counts by native tier).
func (c *Core) Pending() [4]int {
	var p [4]int
	for i := range c.lv.tiers {
		p[i] = c.lv.tiers[i].count
	}
	c.gs.gangPending(&p)
	return p
}

// PendingByTier counts the pending tasks by their native tier (gang
// members waiting for their gang included), and, of each tier, how many
// wait raised one tier up by aging (Pending counts those in the tier
// they were raised into).
func (c *Core) PendingByTier() (native, raised [4]int) {
	for l := range c.lv.tiers {
		own := c.lv.tiers[l].count - c.lv.tiers[l].raised
		native[l] += own
		if l+1 < len(c.lv.tiers) {
			native[l+1] += c.lv.tiers[l].raised
			raised[l+1] = c.lv.tiers[l].raised
		}
	}
	c.gs.gangPending(&native)
	return native, raised
}

func (c *Core) advance(now time.Time) {
	ns := now.UnixNano()
	if ns > c.now {
		c.now = ns
	}
	c.cs.now = c.now
	c.callPlaced = 0
}

// Tick advances time: timers fire, aging runs, due batches are dispatched.
func (c *Core) Tick(now time.Time) {
	c.advance(now)
	c.fireTimers()
	c.promo.fire()
	c.loc.fireLocality()
	c.gs.gangTimeouts()
	// Due batches go before aging, so that a task is raised only when its
	// own tier's dispatch did not place it.
	c.schedule()
	c.lv.age()
	if c.retrySet && c.now >= c.retryAt {
		c.retrySet = false
	}
	c.wk.unblockRefs(c.wk.highRetry.due(c.now))
	c.wk.unblockRefs(c.wk.shareRetry.due(c.now))
	if r := c.policy.Rounds; r != nil {
		if at, ok := r.Next(c.now); ok && c.now >= at {
			r.Round(c.now)
		}
	}
	c.schedule()
}

// NextWakeup returns when the core next needs a Tick (a timer, a batch
// window, aging or a resumed search), ok=false when nothing is scheduled.
func (c *Core) NextWakeup() (time.Time, bool) {
	var best int64
	ok := false
	consider := func(t int64) {
		if !ok || t < best {
			best, ok = t, true
		}
	}
	if d, has := c.timers.next(); has {
		consider(d)
	}
	for l := 2; l < 4; l++ {
		// Raised bands are never batched: only native batches wait.
		if bs := &c.lv.bands[bandOf(l, false)]; bs.active > 0 && bs.since >= 0 {
			consider(bs.since + int64(c.cfg.Tiers[l].Window))
		}
		// Only native tasks age (a task is raised at most once).
		if h := c.lv.tiers[l].aging[0].head; h != nil {
			if th := c.lv.agingThreshold(h); th > 0 {
				consider(h.levelSince + th + 1) // raised once past the threshold
			}
		}
	}
	if d, has := c.wk.highRetry.next(); has {
		consider(d)
	}
	if d, has := c.wk.shareRetry.next(); has {
		consider(d)
	}
	if c.retrySet {
		consider(c.retryAt)
	}
	if d, has := c.gs.nextGangTimeout(); has {
		consider(d)
	}
	if d, has := c.gs.gr.next(c); has {
		consider(d)
	}
	if d, has := c.loc.heap.next(); has {
		consider(d)
	}
	if d, has := c.promo.next(); has {
		consider(d)
	}
	if r := c.policy.Rounds; r != nil {
		if d, has := r.Next(c.now); has {
			consider(d)
		}
	}
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, best), true
}

// Submit adds a task. The spec must have passed api.Task.Validate (the
// core re-checks only what its own safety needs) and carry an id.
func (c *Core) Submit(now time.Time, spec *api.Task) error { return c.submit(now, spec, nil) }

// submit adds a task of job j (nil for none).
func (c *Core) submit(now time.Time, spec *api.Task, j *job) error {
	c.advance(now)
	t, deps, skipReason, err := c.admit(spec, j)
	if err != nil {
		return err
	}
	switch {
	case skipReason != "":
		t.state = Skipped
		t.reason = skipReason
		c.out.Transitions = append(c.out.Transitions, Transition{Task: t.id, From: Pending, To: Skipped, Reason: skipReason})
		if t.gang != nil {
			t.gang.failed++
			t.gang.dirty = true
		}
		c.jb.ended(t)
	case len(deps) > 0:
		c.jb.waitFor(t, deps)
	default:
		c.enqueue(t)
	}
	c.schedule()
	return nil
}

// admit checks a spec and creates its task of job j (nil for none; state
// unset, in no queue). It
// resolves the dependencies: deps are those not finished yet, skipReason
// is set when one ended without success. Nothing changes on error.
func (c *Core) admit(spec *api.Task, j *job) (t *Task, deps []depWait, skipReason string, err error) {
	if spec.ID == "" {
		return nil, nil, "", errs.Invalid("id", "the core needs an id; the server assigns one")
	}
	if _, dup := c.tasks[spec.ID]; dup {
		return nil, nil, "", errs.New(errs.AlreadyExists, "id", "task %q already exists", spec.ID)
	}
	prio := spec.PriorityOrDefault()
	if prio < 0 || prio > 3 {
		return nil, nil, "", errs.Invalid("priority", "must be 0..3, got %d", prio)
	}
	lease := spec.Lease
	if lease == api.NoExpiry {
		lease = 0 // a lease that never expires
	}
	for _, d := range []api.Duration{spec.Duration, spec.Timeout, spec.QueueTimeout, lease} {
		if d < 0 {
			return nil, nil, "", errs.Invalid("duration", "durations must not be negative")
		}
	}
	if err := api.ValidateRequest("resources", spec.Resources); err != nil {
		return nil, nil, "", err
	}
	for i := range spec.Alternatives {
		if err := api.ValidateRequest("alternatives["+strconv.Itoa(i)+"].resources", spec.Alternatives[i].Resources); err != nil {
			return nil, nil, "", err
		}
	}
	deps, skipReason, err = c.jb.resolveDeps(spec)
	if err != nil {
		return nil, nil, "", err
	}
	cls, err := c.ct.classFor(spec, c.qs.leafOf(spec.Queue))
	if err != nil {
		return nil, nil, "", err
	}
	c.seq++
	t = &Task{
		id: spec.ID, cls: cls, prio: int8(prio), level: int8(prio),
		preemptible: spec.IsPreemptible(), resumable: spec.Checkpoint != nil, noRequeue: !spec.Requeues(), seq: c.seq,
		noPreempt: spec.PreemptionPolicy == api.PreemptNever, value: spec.PriorityValue, labels: spec.Metadata,
		duration: int64(spec.Duration), timeout: int64(spec.Timeout),
		queueTTL: int64(spec.QueueTimeout), lease: int64(lease),
		cqpos: -1, tpos: -1, npos: -1, chosen: -1, leaf: cls.leaf,
	}
	t.rt = c.ct.runtimeClassFor(spec, cls)
	if spec.Locality != nil {
		if err := c.loc.setLocality(t, spec); err != nil {
			return nil, nil, "", err
		}
	}
	c.tasks[t.id] = t
	c.jb.attachJob(t, j)
	c.stats.Submitted++
	for oi := range cls.opts {
		c.lr.mix.observe(&cls.opts[oi])
	}
	return t, deps, skipReason, nil
}

// lookup finds a task or returns NotFound naming the id field.
func (c *Core) lookup(id string) (*Task, error) {
	t, ok := c.tasks[id]
	if !ok {
		return nil, errs.New(errs.NotFound, "id", "no task %q", id)
	}
	return t, nil
}

// taskIn is the preamble of a task event: the clock advanced to now, the
// task id looked up (NotFound), and its state one of states, or, with no
// states, not final (else a Conflict: "task ID is STATE" followed by why).
func (c *Core) taskIn(now time.Time, id, why string, states ...State) (*Task, error) {
	c.advance(now)
	t, err := c.lookup(id)
	if err != nil {
		return nil, err
	}
	switch {
	case len(states) == 0 && t.state.Terminal():
		return nil, errs.New(errs.Conflict, "id", "task %q is already %s", id, t.state)
	case len(states) > 0 && !slices.Contains(states, t.state):
		return nil, errs.New(errs.Conflict, "id", "task %q is %s%s", id, t.state, why)
	}
	return t, nil
}

// Cancel cancels a task that is not finished; a placed task's resources are
// freed (its executor is told by the Transition).
func (c *Core) Cancel(now time.Time, id, reason string) error {
	t, err := c.taskIn(now, id, "")
	if err != nil {
		return err
	}
	if reason == "" {
		reason = "cancelled"
	}
	c.finish(t, Cancelled, reason)
	c.schedule()
	return nil
}

// Forget drops a finished task from memory (the store keeps its record).
func (c *Core) Forget(id string) error {
	t, err := c.lookup(id)
	if err != nil {
		return err
	}
	if !t.state.Terminal() {
		return errs.New(errs.Conflict, "id", "task %q is %s, not finished", id, t.state)
	}
	delete(c.tasks, id)
	return nil
}

// ForgetJob drops a job whose tasks have all finished, with its tasks,
// from memory (retention: the store deletes their records).
func (c *Core) ForgetJob(id string) error {
	j := c.jb.jobs[id]
	if j == nil {
		return errs.New(errs.NotFound, "job", "no job %q", id)
	}
	for _, t := range j.tasks {
		if !t.state.Terminal() {
			return errs.New(errs.Conflict, "job", "job %q has task %q %s, not finished", id, t.id, t.state)
		}
	}
	if j.gang != nil && (len(j.gang.want) > 0 || j.gang.waiting) {
		return errs.New(errs.Conflict, "job", "job %q's gang still waits for members", id)
	}
	for _, t := range j.tasks {
		delete(c.tasks, t.id)
	}
	delete(c.jb.jobs, id)
	return nil
}

// TaskStarted records that the executor started a scheduled task.
func (c *Core) TaskStarted(now time.Time, id string) error {
	t, err := c.taskIn(now, id, ", not scheduled", Scheduled)
	if err != nil {
		return err
	}
	t.state = Running
	t.started = c.now
	if t.node != nil && t.node.hold != nil {
		// A held node's backfill counts from its start: the hold may no
		// longer add up (a reservation never outlives its reason).
		c.gs.gr.epoch++
		c.gs.gr.sweep(c)
	}
	c.out.Transitions = append(c.out.Transitions, Transition{Task: id, From: Scheduled, To: Running, Attempt: int(t.attempt)})
	if t.timeout > 0 && t.lease == 0 {
		c.timers.set(t, timerRun, c.now+t.timeout)
	}
	return nil
}

// TaskFinished records how a scheduled or running task ended.
func (c *Core) TaskFinished(now time.Time, id string, r Result) error {
	t, err := c.taskIn(now, id, ", not running", Scheduled, Running)
	if err != nil {
		return err
	}
	start := t.started
	to := Succeeded
	reason := r.Reason
	switch {
	case r.TimedOut:
		to = Timeout
	case r.ExitCode != 0:
		to = Failed
		if reason == "" {
			reason = "exit code " + strconv.Itoa(r.ExitCode)
		}
	}
	if to == Succeeded {
		c.lr.learnFinished(t, c.now-start)
	}
	c.finish(t, to, reason)
	c.schedule()
	return nil
}

// TaskLost re-queues a placed task whose run was lost without an outcome
// (its agent fenced it after losing the server, its supervisor died):
// attempt + 1, or failed with the reason when it must not be re-queued.
func (c *Core) TaskLost(now time.Time, id, reason string) error {
	t, err := c.taskIn(now, id, ", not running", Scheduled, Running)
	if err != nil {
		return err
	}
	c.requeue(t, Pending, reason)
	c.schedule()
	return nil
}

// Renew extends a lease by its lease duration from now.
func (c *Core) Renew(now time.Time, id string) error {
	t, err := c.taskIn(now, id, ": only a placed lease can be renewed", Scheduled, Running)
	if err != nil {
		return err
	}
	if t.lease == 0 {
		return errs.Invalid("lease", "task %q has no lease to renew", id)
	}
	c.timers.set(t, timerLease, c.now+t.lease)
	return nil
}

// ObserveNode feeds one utilization sample of a node (heartbeat).
func (c *Core) ObserveNode(now time.Time, name string, u NodeUsage) error {
	c.advance(now)
	n, ok := c.idx.nodes[name]
	if !ok {
		return errs.New(errs.NotFound, "name", "no node %q", name)
	}
	load := clamp01(u.CPU)
	if len(u.Devices) > 0 && len(n.devices) > 0 {
		var sum float64
		k := 0
		for i := range n.devices {
			if v, ok := u.Devices[n.devices[i].ID]; ok {
				sum += clamp01(v)
				k++
			}
		}
		if k > 0 {
			load = sum / float64(k)
		}
	}
	n.load.forecast.add(load)
	n.load.util.add(load)
	n.load.reserved = 0
	// The sample may lift a load-based filter: retry what could fit here.
	c.wk.wake(n)
	c.schedule()
	return nil
}
