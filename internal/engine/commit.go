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
	"github.com/hetsched/hetsched/internal/store"
)

// The commit path: stage → encode → durable commit → publish → answer.
// step (loop.go) states what each step owes; these are the steps after
// the commands ran.

// commitBatch is one step's changes on their way to the store and to the
// readers. Its buffers are the loop's, reused from step to step (the store
// keeps nothing of recs once Commit returns).
type commitBatch struct {
	recs []store.Record
	// arena holds the batch's task values and the events' high-water
	// mark; a value is a slice of it (growing the arena leaves earlier
	// slices on the old array, intact).
	arena []byte
	// changes are the staged task records to publish, in id order.
	changes []change
	// jobEvents are the events of the jobs whose state changes.
	jobEvents []Event
}

// change is a staged task record to publish.
type change struct {
	id    string
	r     *TaskRecord
	old   *TaskRecord // nil for a new task
	event bool        // its state or node changes: an event
}

// reset drops the references the reused buffers would keep; a big step
// (a large batch, recovery) does not pin its arena.
func (b *commitBatch) reset() {
	clear(b.recs)
	clear(b.changes)
	b.recs, b.arena, b.changes, b.jobEvents = b.recs[:0], b.arena[:0], b.changes[:0], nil
	if cap(b.arena) > 4<<20 {
		b.recs, b.arena, b.changes = nil, nil, nil
	}
}

// commitStaged takes the step's changes through the commit path: the
// core's decisions are staged, the staged records encoded, committed
// durably, and only then published.
func (e *Engine) commitStaged(now time.Time) error {
	e.staged.stageOutput(now)
	if e.staged.empty() && !e.svc.pending() && !e.pools.pending() && !e.acct.pending() {
		e.gauges.attempted(e.cfg.Now().Sub(now))
		return nil
	}
	b := &e.batch
	if err := e.encode(b, now); err != nil {
		e.gauges.attempts = e.gauges.attempts[:0]
		return err
	}
	if err := e.tracing.commit(len(b.recs), func() error { return e.commitDurable(b) }); err != nil {
		e.gauges.attempts = e.gauges.attempts[:0] // not decided: nothing was kept
		return err
	}
	e.gauges.attempted(e.cfg.Now().Sub(now))
	e.publish(b, now)
	return nil
}

// encode turns the staged changes into b: the store records of the jobs,
// queues, tasks and nodes, and — decided now, so that the store's event
// high-water mark commits with the events — what each task change
// publishes.
func (e *Engine) encode(b *commitBatch, now time.Time) error {
	if e.volatile {
		// Nothing is kept: only the events (their high-water mark) are
		// decided here.
		e.encodeEvents(b, now)
		return nil
	}
	for id, j := range e.staged.jobs {
		v, err := json.Marshal(j)
		if err != nil {
			return fmt.Errorf("encode job %s: %w", id, err)
		}
		b.recs = append(b.recs, store.Record{Kind: KindJob, Key: id, Value: v})
	}
	for name, q := range e.staged.queues {
		v, err := json.Marshal(q)
		if err != nil {
			return fmt.Errorf("encode queue %s: %w", name, err)
		}
		b.recs = append(b.recs, store.Record{Kind: KindQueue, Key: name, Value: v})
	}
	if err := e.encodeTasks(b, now); err != nil {
		return err
	}
	e.acct.encode(b)
	if err := e.encodeNodes(b); err != nil {
		return err
	}
	if err := e.encodeServices(b); err != nil {
		return err
	}
	if err := e.encodePools(b); err != nil {
		return err
	}
	for id := range e.staged.forget {
		b.recs = append(b.recs, store.Record{Kind: KindTask, Key: id})
	}
	for id := range e.staged.forgetJobs {
		b.recs = append(b.recs, store.Record{Kind: KindJob, Key: id})
	}
	e.encodeEvents(b, now)
	return nil
}

// encodeTasks appends the staged task records, their values in the arena,
// and with a record entering a final state its accounting record (the
// same value; accounting.go).
func (e *Engine) encodeTasks(b *commitBatch, now time.Time) error {
	if need := 256 * len(e.staged.tasks); cap(b.arena) < need {
		b.arena = make([]byte, 0, need)
	}
	for id, r := range e.staged.tasks {
		start := len(b.arena)
		var err error
		if b.arena, err = r.appendJSON(b.arena); err != nil {
			return fmt.Errorf("encode task %s: %w", id, err)
		}
		v := b.arena[start:len(b.arena):len(b.arena)]
		b.recs = append(b.recs, store.Record{Kind: KindTask, Key: id, Value: v})
		if k, ok := accountable(id, r, e.tasks, now); ok {
			b.recs = append(b.recs, store.Record{Kind: KindAccounting, Key: k, Value: v})
		}
	}
	return nil
}

// encodeNodes appends the staged nodes with their holders and admin
// states (a released node: a deletion).
func (e *Engine) encodeNodes(b *commitBatch) error {
	for name, n := range e.staged.nodes {
		if n == nil { // released (holders.go)
			b.recs = append(b.recs, store.Record{Kind: KindNode, Key: name})
			continue
		}
		owner, ok := e.staged.holders[name]
		if !ok {
			owner = e.owner[name]
		}
		admin, ok := e.staged.admin[name]
		if !ok {
			admin = e.admin[name]
		}
		v, err := json.Marshal(NodeRecord{Spec: *n, Agent: owner, Admin: admin})
		if err != nil {
			return fmt.Errorf("encode node %s: %w", name, err)
		}
		b.recs = append(b.recs, store.Record{Kind: KindNode, Key: name, Value: v})
	}
	return nil
}

// encodeEvents decides the batch's events (every node change, every task
// whose state or node changes, every waiting task whose reason for waiting
// changes, every job whose state changes) and appends
// the store's event high-water mark when there are any.
func (e *Engine) encodeEvents(b *commitBatch, now time.Time) {
	n := len(e.staged.nodes)
	for id, r := range e.staged.tasks {
		old := e.tasks[id]
		ev := old == nil || old.State != r.State || old.Node != r.Node || r.State == "pending" && old.Reason != r.Reason
		if ev {
			n++
		}
		b.changes = append(b.changes, change{id, r, old, ev})
	}
	slices.SortFunc(b.changes, func(x, y change) int { return strings.Compare(x.id, y.id) })
	b.jobEvents = e.jobChanges(now)
	n += len(b.jobEvents) + len(e.svc.events)
	if n > 0 {
		start := len(b.arena)
		b.arena = strconv.AppendUint(b.arena, e.events.next+uint64(n), 10)
		b.recs = append(b.recs, store.Record{Kind: KindMeta, Key: metaEventsKey, Value: b.arena[start:len(b.arena):len(b.arena)]})
	}
}

// commitDurable writes the batch's records in one durable store commit.
func (e *Engine) commitDurable(b *commitBatch) error {
	t0 := e.cfg.Now()
	if err := e.st.Commit(context.Background(), b.recs); err != nil {
		return err
	}
	if m := e.cfg.Metrics; m != nil {
		m.CommitDuration.Observe(e.cfg.Now().Sub(t0).Seconds())
		m.CommitRecords.Observe(float64(len(b.recs)))
	}
	return nil
}

// publish makes a durable commit visible, in this order: the records (to
// readers), the assignment feeds (to agents), the events (to event
// clients), then the waiters of the changed tasks are woken; the loop's
// own bookkeeping follows and the staging is cleared. A reader woken, or
// told of an event, finds the record at least as new.
func (e *Engine) publish(b *commitBatch, now time.Time) {
	e.publishRecords(b)
	e.noteFinished(b, now)
	e.sessions.track(b.changes)
	e.publishEvents(b, now)
	e.wakeWaiters(b.changes)
	for _, c := range b.changes {
		e.waiting.add(c.old, -1)
		e.waiting.add(c.r, +1)
	}
	for _, ev := range b.jobEvents {
		e.jobLast[ev.ID] = ev.State
	}
	for name, a := range e.staged.holders {
		if a == "" {
			delete(e.owner, name)
		} else {
			e.owner[name] = a
		}
	}
	for name, a := range e.staged.admin {
		if a == "" {
			delete(e.admin, name)
		} else {
			e.admin[name] = a
		}
	}
	b.reset()
	e.staged.clear()
}

// publishRecords publishes the staged tasks, nodes, queues and jobs, with
// the listing orders, under mu.
func (e *Engine) publishRecords(b *commitBatch) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fresh := make([]*TaskRecord, 0, 8)
	for _, c := range b.changes {
		if c.old == nil {
			fresh = append(fresh, c.r)
		}
		e.tasks[c.id] = c.r
	}
	sort.Slice(fresh, func(i, j int) bool { return fresh[i].Seq < fresh[j].Seq })
	for _, r := range fresh {
		e.order = append(e.order, r.Spec.ID)
	}
	for name, n := range e.staged.nodes {
		if n == nil {
			delete(e.nodes, name)
			e.laneNodes.Delete(name)
		} else {
			e.nodes[name] = n
			e.laneNodes.Store(name, n)
		}
	}
	for name, q := range e.staged.queues {
		e.queues[name] = q
	}
	var newJobs []*JobRecord
	for id, j := range e.staged.jobs {
		if e.jobs[id] == nil {
			newJobs = append(newJobs, j)
		}
		e.jobs[id] = j
	}
	sort.Slice(newJobs, func(a, b int) bool { return jobBefore(newJobs[a], newJobs[b]) })
	for _, j := range newJobs {
		e.jobOrder = append(e.jobOrder, j.Spec.ID)
	}
	e.publishServices(b.changes)
	e.publishPools()
	e.publishForgotten()
}

// publishEvents adds the batch's events: its tasks', its nodes', its jobs'.
func (e *Engine) publishEvents(b *commitBatch, now time.Time) {
	l := &e.events
	l.begin()
	defer l.end(l.next)
	for _, c := range b.changes {
		if c.event {
			l.add(Event{Kind: "task", ID: c.id, State: c.r.State, Node: c.r.Node, Reason: c.r.Reason, Time: now, Tenant: c.r.Tenant})
		}
	}
	for name, n := range e.staged.nodes {
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
	for _, ev := range b.jobEvents {
		l.add(ev)
	}
	e.publishServiceEvents(l)
}
