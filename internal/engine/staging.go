package engine

import (
	"slices"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
)

// staging holds what the current step changed and has not committed yet.
// The loop's view of a record is its staged version over its published one
// (current, currentNode, queueView, jobView); the commit path encodes the
// staged sets, commits them and publishes them, then clears them.
// Loop-owned.
type staging struct {
	e      *Engine
	tasks  map[string]*TaskRecord
	nodes  map[string]*api.Node // nil: the node was released (holders.go)
	queues map[string]*api.Queue
	jobs   map[string]*JobRecord
	// holders are the changes to the nodes' holders (NodeRecord.Agent:
	// "" for the static inventory); admin those to the state a notready
	// node returns to (NodeRecord.Admin). They are written with the node.
	holders, admin map[string]string
	// forget and forgetJobs are the finished tasks and jobs retired
	// (retention.go): their records are deleted.
	forget, forgetJobs map[string]bool
}

func newStaging() staging {
	return staging{tasks: map[string]*TaskRecord{}, nodes: map[string]*api.Node{}, queues: map[string]*api.Queue{},
		jobs: map[string]*JobRecord{}, holders: map[string]string{}, admin: map[string]string{},
		forget: map[string]bool{}, forgetJobs: map[string]bool{}}
}

// empty reports whether there is nothing to commit.
func (sg *staging) empty() bool {
	return len(sg.tasks) == 0 && len(sg.nodes) == 0 && len(sg.queues) == 0 && len(sg.jobs) == 0 &&
		len(sg.forget) == 0 && len(sg.forgetJobs) == 0
}

func (sg *staging) clear() {
	clear(sg.tasks)
	clear(sg.nodes)
	clear(sg.queues)
	clear(sg.jobs)
	clear(sg.holders)
	clear(sg.admin)
	clear(sg.forget)
	clear(sg.forgetJobs)
}

// The loop stages through these: its view of a record (current,
// currentNode, queueView, jobView) and the staging of what the core's
// output changed (stageOutput, refresh, stage).

// current returns the loop's latest record of a task (staged or published).
func (sg *staging) current(id string) *TaskRecord {
	e := sg.e
	if r, ok := sg.tasks[id]; ok {
		return r
	}
	return e.tasks[id]
}

func (sg *staging) currentNode(name string) *api.Node {
	e := sg.e
	if n, ok := sg.nodes[name]; ok {
		return n
	}
	return e.nodes[name]
}

// queueView is the loop's latest queues (staged over published).
func (sg *staging) queueView() map[string]*api.Queue {
	e := sg.e
	if len(sg.queues) == 0 {
		return e.queues
	}
	all := make(map[string]*api.Queue, len(e.queues)+len(sg.queues))
	for k, v := range e.queues {
		all[k] = v
	}
	for k, v := range sg.queues {
		all[k] = v
	}
	return all
}

func (sg *staging) jobView(id string) *JobRecord {
	e := sg.e
	if r, ok := sg.jobs[id]; ok {
		return r
	}
	return e.jobs[id]
}

// stageOutput stages the records of the tasks the core's decisions of this
// step changed (the first step of the commit path).
func (sg *staging) stageOutput(now time.Time) {
	e := sg.e
	out := e.c.TakeOutput()
	e.gauges.count(&out)
	e.gauges.coreEvents(e.c.Stats())
	for _, p := range out.Placements {
		sg.refresh(p.Task, now)
	}
	for _, tr := range out.Transitions {
		sg.refresh(tr.Task, now)
	}
	for _, p := range out.Preemptions {
		sg.refresh(p.Victim, now)
	}
	for _, u := range out.Unschedulable {
		// Every waiting task of the class shows why it waits.
		sg.refresh(u.Sample, now)
		for _, id := range u.Tasks {
			if id != u.Sample {
				sg.refresh(id, now)
			}
		}
	}
}

// refresh stages a new record of task id from the core's state, when
// that state differs from the record's (a published record is copied only
// then: recovery refreshes every task and most are unchanged).
func (sg *staging) refresh(id string, now time.Time) { sg.refreshKeeping(id, now, false) }

// refreshRecovered is refresh for a record just restored: a difference
// in the reason alone is left as it is. The core gives a restored waiting
// task its class's reason at its first schedule pass, which follows;
// staging the reason it has before that (none) would rewrite every
// waiting task's record at every restart, and again at that pass.
func (sg *staging) refreshRecovered(id string, now time.Time) { sg.refreshKeeping(id, now, true) }

// refreshKeeping stages a task whose core view differs from its record;
// with keepReason a difference in the reason alone does not count.
func (sg *staging) refreshKeeping(id string, now time.Time, keepReason bool) {
	old := sg.current(id)
	if old == nil {
		return
	}
	v, ok := sg.coreView(id, old)
	if !ok || v.same(old) {
		return
	}
	if keepReason && v.sameButReason(old) {
		return
	}
	r := old
	if sg.tasks[id] != old {
		cp := *old
		r = &cp
	}
	sg.stage(r, v, id, now)
}

// stageState brings a new record up to date with the core and stages it.
func (sg *staging) stageState(r *TaskRecord, id string, now time.Time) {
	if v, ok := sg.coreView(id, r); ok {
		sg.stage(r, v, id, now)
	}
}

// taskView is the core's view of a task, in a record's terms.
type taskView struct {
	s      core.Saved
	state  string
	reason string
	// cause is the task's own reason when reason adds its class's wait
	// reason to it (TaskRecord.Cause); nil when they are the same.
	cause *string
}

func (sg *staging) coreView(id string, r *TaskRecord) (taskView, bool) {
	e := sg.e
	s, ok := e.c.SavedState(id)
	if !ok {
		return taskView{}, false
	}
	if s.State.Terminal() && s.Node == "" {
		// A finished task keeps the node it ran on (its logs are there).
		s.Node, s.Devices = r.Node, r.Devices
	}
	v := taskView{s: s, state: s.State.String(), reason: r.Reason}
	if t, ok := e.c.Task(id); ok {
		v.reason = t.Reason()
		if s.Reason != v.reason {
			own := s.Reason
			v.cause = &own
		}
	}
	return v, true
}

func (v taskView) same(r *TaskRecord) bool {
	return r.State == v.state && r.Node == v.s.Node && r.Chosen == v.s.Chosen && r.Attempt == v.s.Attempt && r.Failures == v.s.Failures &&
		r.Reason == v.reason && sameCause(r.Cause, v.cause) && slices.Equal(r.Devices, v.s.Devices)
}

// sameButReason is same with r's reason taken as the view's (v is a
// copy).
func (v taskView) sameButReason(r *TaskRecord) bool {
	v.reason, v.cause = r.Reason, r.Cause
	return v.same(r)
}

// restartedAfterPreemption adds, when r's attempt that started last
// before this one was preempted, the time from that eviction to now (its
// successor running) to r's preemption cost.
func (sg *staging) restartedAfterPreemption(r *TaskRecord, now time.Time) {
	e := sg.e
	if r.Preemption == nil {
		return
	}
	for i := len(r.Attempts) - 1; i >= 0; i-- {
		a := &r.Attempts[i]
		if a.Started == nil {
			continue // placed, never started: look further back
		}
		if a.State == AttemptPreempted && now.After(a.Finished) {
			d := now.Sub(a.Finished)
			p := *r.Preemption
			p.RestartSeconds += d.Seconds()
			r.Preemption = &p
			e.gauges.preemptionRestart(d)
		}
		return
	}
}

func sameCause(a, b *string) bool { return a == b || a != nil && b != nil && *a == *b }

// stage writes v into r (not yet published), stamps the times of a state
// change and stages r.
func (sg *staging) stage(r *TaskRecord, v taskView, id string, now time.Time) {
	e := sg.e
	prev, prevReason, s := r.State, r.Reason, v.s
	var ended *Attempt
	if s.Attempt != r.Attempt && r.Node != "" {
		// The placed attempt ended and the task goes on (re-queued or
		// placed again): keep it in the history.
		reason := v.reason
		if v.cause != nil {
			reason = *v.cause
		}
		r.endAttempt(now, reason)
		ended = &r.Attempts[len(r.Attempts)-1]
	}
	r.State, r.Node, r.Devices, r.Chosen, r.Attempt, r.Reason = v.state, s.Node, s.Devices, s.Chosen, s.Attempt, v.reason
	r.Failures, r.Cause = s.Failures, v.cause
	switch {
	case s.State == core.Scheduled && prev != v.state:
		r.Scheduled = timePtr(now)
		r.Started, r.Finished = nil, nil
	case s.State == core.Running && prev != v.state:
		r.Started = timePtr(now)
		if r.Scheduled == nil { // placed and started within one step
			r.Scheduled = r.Started
		}
		sg.restartedAfterPreemption(r, now)
	case s.State.Terminal() && prev != v.state:
		r.Finished = timePtr(now)
	case s.State == core.Pending:
		r.Scheduled, r.Started = nil, nil
	}
	if e.tracing.on() {
		e.tracing.staged(r, prev, prevReason, ended, now)
	}
	sg.tasks[id] = r
}
