package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/store"
)

// commitStaged turns the core's output into record changes, commits them
// and publishes them.
func (e *Engine) commitStaged(now time.Time) error {
	out := e.c.TakeOutput()
	e.gauges.count(&out)
	for _, p := range out.Placements {
		e.refresh(p.Task, now)
	}
	for _, tr := range out.Transitions {
		e.refresh(tr.Task, now)
	}
	for _, p := range out.Preemptions {
		e.refresh(p.Victim, now)
	}
	for _, u := range out.Unschedulable {
		// The class's first task shows why it waits (the others' records
		// catch up at their next change; GET /queues counts them all).
		e.refresh(u.Sample, now)
	}
	if len(e.staged) == 0 && len(e.stNode) == 0 && len(e.stQ) == 0 && len(e.stJob) == 0 {
		return nil
	}
	// recs, the arena of task values and changes are the loop's, reused
	// from step to step (the store keeps nothing of recs once Commit
	// returns).
	recs := e.recsBuf[:0]
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
	// One arena for the batch's task values; a value is a slice of it
	// (growing the arena leaves earlier slices on the old array, intact).
	arena := e.arena[:0]
	if need := 256 * len(e.staged); cap(arena) < need {
		arena = make([]byte, 0, need)
	}
	for id, r := range e.staged {
		start := len(arena)
		var err error
		if arena, err = r.appendJSON(arena); err != nil {
			return fmt.Errorf("encode task %s: %w", id, err)
		}
		recs = append(recs, store.Record{Kind: KindTask, Key: id, Value: arena[start:len(arena):len(arena)]})
	}
	for name, n := range e.stNode {
		if n == nil { // released (holders.go)
			recs = append(recs, store.Record{Kind: KindNode, Key: name})
			continue
		}
		owner, ok := e.stAgent[name]
		if !ok {
			owner = e.owner[name]
		}
		admin, ok := e.stAdmin[name]
		if !ok {
			admin = e.admin[name]
		}
		b, err := json.Marshal(NodeRecord{Spec: *n, Agent: owner, Admin: admin})
		if err != nil {
			return fmt.Errorf("encode node %s: %w", name, err)
		}
		recs = append(recs, store.Record{Kind: KindNode, Key: name, Value: b})
	}
	// What each staged task publishes is decided now, so that the store's
	// event high-water mark commits with the events.
	changes := e.changes[:0]
	nEvents := len(e.stNode)
	for id, r := range e.staged {
		old := e.tasks[id]
		ev := old == nil || old.State != r.State || old.Node != r.Node
		if ev {
			nEvents++
		}
		changes = append(changes, change{id, r, old, ev})
	}
	slices.SortFunc(changes, func(a, b change) int { return strings.Compare(a.id, b.id) })
	jobEvents := e.jobChanges(now)
	nEvents += len(jobEvents)
	if nEvents > 0 {
		start := len(arena)
		arena = strconv.AppendUint(arena, e.events.next+uint64(nEvents), 10)
		recs = append(recs, store.Record{Kind: KindMeta, Key: metaEventsKey, Value: arena[start:len(arena):len(arena)]})
	}
	t0 := e.cfg.Now() // the wall clock only through Config.Now
	if err := e.st.Commit(context.Background(), recs); err != nil {
		return err
	}
	if m := e.cfg.Metrics; m != nil {
		m.CommitDuration.Observe(e.cfg.Now().Sub(t0).Seconds())
		m.CommitRecords.Observe(float64(len(recs)))
	}
	e.mu.Lock()
	fresh := make([]*TaskRecord, 0, 8)
	for _, c := range changes {
		if c.old == nil {
			fresh = append(fresh, c.r)
		}
		e.tasks[c.id] = c.r
	}
	for name, n := range e.stNode {
		if n == nil {
			delete(e.nodes, name)
		} else {
			e.nodes[name] = n
		}
	}
	for name, q := range e.stQ {
		e.queues[name] = q
	}
	var newJobs []*JobRecord
	for id, j := range e.stJob {
		if e.jobs[id] == nil {
			newJobs = append(newJobs, j)
		}
		e.jobs[id] = j
	}
	sort.Slice(newJobs, func(a, b int) bool { return jobBefore(newJobs[a], newJobs[b]) })
	for _, j := range newJobs {
		e.jobOrder = append(e.jobOrder, j.Spec.ID)
	}
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].Seq < fresh[j].Seq })
	for _, r := range fresh {
		e.order = append(e.order, r.Spec.ID)
	}
	e.mu.Unlock()
	for _, c := range changes {
		e.waiting.add(c.old, -1)
		e.waiting.add(c.r, +1)
	}
	// The agents' feeds get the published assignments (sessions has its
	// own lock), before the waiters are woken.
	e.sessions.track(changes)
	// The events follow the records they name (the event log has its own
	// lock): a client told of an event finds the record at least as new.
	l := &e.events
	l.begin()
	started := l.next
	for _, c := range changes {
		if c.event {
			l.add(Event{Kind: "task", ID: c.id, State: c.r.State, Node: c.r.Node, Reason: c.r.Reason, Time: now, Tenant: c.r.Tenant})
		}
	}
	for name, n := range e.stNode {
		if n == nil {
			l.add(Event{Kind: "node", ID: name, State: "removed", Time: now})
			continue
		}
		state := n.State
		if state == "" {
			state = api.NodeReady
		}
		l.add(Event{Kind: "node", ID: name, State: state, Time: now})
	}
	for _, ev := range jobEvents {
		l.add(ev)
		e.jobLast[ev.ID] = ev.State
	}
	l.end(started)
	// Waiters are woken after the records are published: a waiter
	// registers before it reads the record, so it either reads the new
	// record or is woken here.
	e.waitMu.Lock()
	if len(e.waiters) > 0 {
		for _, c := range changes {
			if ch, ok := e.waiters[c.id]; ok {
				close(ch)
				delete(e.waiters, c.id)
			}
		}
	}
	e.waitMu.Unlock()
	for name, a := range e.stAgent {
		if a == "" {
			delete(e.owner, name)
		} else {
			e.owner[name] = a
		}
	}
	for name, a := range e.stAdmin {
		if a == "" {
			delete(e.admin, name)
		} else {
			e.admin[name] = a
		}
	}
	clear(recs) // drop the references the reused buffers would keep
	clear(changes)
	e.recsBuf, e.arena, e.changes = recs[:0], arena[:0], changes[:0]
	if cap(e.arena) > 4<<20 { // a big step (a large batch, recovery) does not pin its arena
		e.recsBuf, e.arena, e.changes = nil, nil, nil
	}
	clear(e.stAgent)
	clear(e.stAdmin)
	clear(e.staged)
	clear(e.stNode)
	clear(e.stQ)
	clear(e.stJob)
	return nil
}

// change is a staged task record to publish.
type change struct {
	id    string
	r     *TaskRecord
	old   *TaskRecord // nil for a new task
	event bool
}

// current returns the loop's latest record of a task (staged or published).
func (e *Engine) current(id string) *TaskRecord {
	if r, ok := e.staged[id]; ok {
		return r
	}
	return e.tasks[id]
}

func (e *Engine) currentNode(name string) *api.Node {
	if n, ok := e.stNode[name]; ok {
		return n
	}
	return e.nodes[name]
}

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

// refresh stages a new record of task id from the core's state, when
// that state differs from the record's (a published record is copied only
// then: recovery refreshes every task and most are unchanged).
func (e *Engine) refresh(id string, now time.Time) {
	old := e.current(id)
	if old == nil {
		return
	}
	v, ok := e.coreView(id, old)
	if !ok || v.same(old) {
		return
	}
	r := old
	if e.staged[id] != old {
		cp := *old
		r = &cp
	}
	e.stage(r, v, id, now)
}

// stageState brings a new record up to date with the core and stages it.
func (e *Engine) stageState(r *TaskRecord, id string, now time.Time) {
	if v, ok := e.coreView(id, r); ok {
		e.stage(r, v, id, now)
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

func (e *Engine) coreView(id string, r *TaskRecord) (taskView, bool) {
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

func sameCause(a, b *string) bool { return a == b || a != nil && b != nil && *a == *b }

// stage writes v into r (not yet published), stamps the times of a state
// change and stages r.
func (e *Engine) stage(r *TaskRecord, v taskView, id string, now time.Time) {
	prev, s := r.State, v.s
	if s.Attempt != r.Attempt && r.Node != "" {
		// The placed attempt ended and the task goes on (re-queued or
		// placed again): keep it in the history.
		reason := v.reason
		if v.cause != nil {
			reason = *v.cause
		}
		r.endAttempt(now, reason)
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
	case s.State.Terminal() && prev != v.state:
		r.Finished = timePtr(now)
	case s.State == core.Pending:
		r.Scheduled, r.Started = nil, nil
	}
	e.staged[id] = r
}
