package core

import "time"

// Task is a task as the core tracks it.
type Task struct {
	id          string
	cls         *class
	rt          *runtimeClass
	prio        int8 // native priority
	level       int8 // effective level (aging lowers it)
	raised      int8 // how many times aging raised it
	state       State
	preemptible bool
	resumable   bool              // it has a checkpoint: stopped, it resumes where it was
	noRequeue   bool              // fail instead of re-queueing when evicted
	noPreempt   bool              // preemptionPolicy never: evicts nothing
	value       int32             // priority value: orders its priority's tasks (importance)
	labels      map[string]string // its metadata: what placement constraints' selectors match

	seq        uint64
	enqueued   int64
	levelSince int64
	sortKey    int64
	duration   int64 // estimate, ns (0 = unknown)
	timeout    int64
	queueTTL   int64
	lease      int64

	cq    *classQueue
	cqpos int32
	lprev *Task
	lnext *Task

	deadline int64
	tpos     int32
	tkind    timerKind

	node    *Node
	npos    int32
	chosen  int8
	devs    []devShare
	started int64 // placement time, then the executor's start time
	served  int64 // ns placed or running in ended attempts (attained service)
	lastRun int64 // ns the last ended attempt was placed or running
	lasBase int64 // served when las last promoted it (promote.go)
	starved bool  // waited past its starvation bound since its last enqueue (promote.go)
	// whatIfGone: evicted what-if (journal.go): still on its node's task
	// list, its allocation taken away until the checkpoint rolls back.
	whatIfGone bool
	attempt    int32
	unmet      int32
	dependent  []depEdge
	reason     string

	job      *job
	gang     *gang
	leaf     *queueNode // its class's leaf (never nil)
	gready   bool       // pending in its gang's ready list (in no class queue)
	backoff  bool       // pending, waiting out a retry backoff (in no queue)
	failures int32      // retries used
	// locality (locality.go): the class preferring the data's nodes, the
	// task's own class, the wait, and whether the preference is spent.
	locCls  *class
	baseCls *class
	locWait int64
	locDone bool
}

type devShare struct {
	dev   int32 // index in node.devices
	milli int32
}

// ID returns the task's id.
func (t *Task) ID() string { return t.id }

// Priority returns the native priority (0 urgent .. 3 low).
func (t *Task) Priority() int { return int(t.prio) }

// Level returns the effective level after aging.
func (t *Task) Level() int { return int(t.level) }

// State returns the task's state.
func (t *Task) State() State { return t.state }

// Options returns the ways the task can run (do not modify).
func (t *Task) Options() []Option { return t.cls.opts }

// Node returns the node the task is placed on, or nil.
func (t *Task) Node() *Node { return t.node }

// Reason returns why the task is in its state (unplaced, failed, ...).
// A pending task whose class could not be placed reports why, after the
// reason it went back to pending (if any).
func (t *Task) Reason() string {
	r := t.ownReason()
	if t.state == Pending && t.cq != nil && t.cq.blocked && t.cq.lastReason != "" {
		if r != "" {
			r += "; " + t.cq.lastReason
		} else {
			r = t.cq.lastReason
		}
	}
	if t.state == Pending && t.locCls != nil && t.cls == t.locCls {
		w := "waiting up to " + durString(t.locWait) + " for the nodes holding its data (locality)"
		if r != "" {
			return w + ": " + r
		}
		return w
	}
	return r
}

// ownReason is the task's reason before its class's: a member waiting
// for its gang has the gang's (gangShow), which all its waiting members
// share; until the gang's first schedule pass (after a restore), its own.
func (t *Task) ownReason() string {
	if t.gready && t.gang.shown != "" {
		return t.gang.shown
	}
	return t.reason
}

// finish moves t to a terminal state, freeing whatever it holds, and
// settles its dependents.
func (c *Core) finish(t *Task, to State, reason string) {
	from := t.state
	if c.jb.retry(t, from, to, reason) {
		return
	}
	switch {
	case from == Pending && t.backoff:
		t.backoff = false
		t.leaf.backoff--
	case from == Pending:
		c.unqueue(t)
	case from == Scheduled, from == Running:
		c.release(t, true)
	}
	c.timers.cancel(t)
	t.state = to
	t.reason = reason
	c.stats.Finished++
	c.out.Transitions = append(c.out.Transitions, Transition{Task: t.id, From: from, To: to, Reason: reason, Attempt: int(t.attempt)})
	c.jb.ended(t)
	if t.job != nil {
		c.jb.jobTaskEnded(t, from)
	}
}

// requeue puts a placed task back to pending (attempt + 1), reporting the
// transition as to (Pending or Preempted). A task that must not be
// re-queued fails with the reason instead.
func (c *Core) requeue(t *Task, to State, reason string) {
	if t.state != Scheduled && t.state != Running {
		return // already moved (a gang restart re-queued it first)
	}
	if t.noRequeue {
		c.finish(t, Failed, reason+" (requeue: false)")
		return
	}
	from := t.state
	t.lastRun = max(0, c.now-t.started)
	t.served += t.lastRun
	c.release(t, true)
	c.timers.cancel(t)
	t.attempt++
	c.out.Transitions = append(c.out.Transitions, Transition{Task: t.id, From: from, To: to, Reason: reason, Attempt: int(t.attempt)})
	c.enqueue(t)
	t.reason = reason
	if t.gang != nil && (from == Scheduled || from == Running) {
		c.gs.gangMemberLeft(t, to, reason)
	}
}

func durString(ns int64) string { return time.Duration(ns).String() }

func durationOf(ns int64) time.Duration { return time.Duration(ns) }

// attained is the service t has had: its ended attempts' time placed or
// running, and the current attempt's so far.
func (c *Core) attained(t *Task) int64 {
	if t.state == Scheduled || t.state == Running {
		return t.served + max(0, c.now-t.started)
	}
	return t.served
}
