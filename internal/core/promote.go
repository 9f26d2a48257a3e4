package core

import (
	"container/heap"
	"math"
)

// Starvation promotion under las (Tiresias' STARVELIMIT): a task that
// ran, went back to pending in a queue above 0 and has waited
// Config.LASPromote times its last run since, is promoted to queue 0:
// its attained service is counted from then (Task.lasBase), it is
// re-keyed in its class queue, and it may swap out what runs in higher
// queues again. Gang members are not promoted (their gang is queued as
// a whole). Deadlines live in a heap checked at each Tick; an entry whose
// task ran again, left, or moved to another attempt is dropped when due.
//
// The starvation bound of the other policies that order pending tasks
// (sjf, srtf: Config.StarveFactor, StarveLimit) shares the heap: a task
// whose bound passed while it waits is marked starved and re-keyed ahead
// of every task of its class queues not starved, the longest waiting
// first (promoter.sortKey); under srtf it also ranks first, so it runs to its
// end once placed. Aging raises every waiter of a level alike, so without
// it the longest job could stay last for ever (sjf left one 18.5 days).
//
// The promoter holds the deadlines; the core calls it at named points:
// schedule when a task becomes pending, sortKey when it is keyed in a
// class queue, fire at each Tick, next for NextWakeup.

// promoter holds the starvation deadlines of the pending tasks.
type promoter struct {
	c   *Core
	due promoteHeap
}

// promotion is one starvation deadline: las's promotion, or (starve)
// the starvation bound.
type promotion struct {
	at      int64
	t       *Task
	attempt int32
	starve  bool
}

type promoteHeap []promotion

func (h promoteHeap) Len() int { return len(h) }
func (h promoteHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].t.seq < h[j].t.seq
}
func (h promoteHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *promoteHeap) Push(x any)   { *h = append(*h, x.(promotion)) }
func (h *promoteHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = promotion{}
	*h = old[:len(old)-1]
	return p
}

// promotes reports whether t, just made pending, may be promoted.
func (p *promoter) promotes(t *Task) bool {
	c := p.c
	la, ok := c.policy.TimeShare.(*LeastAttained)
	return ok && c.cfg.LASPromote > 0 && t.gang == nil && t.lastRun > 0 && la.Rank(t) > 0
}

// schedule sets t's starvation deadline when it may be promoted, or its
// starvation bound when its policy has one.
func (p *promoter) schedule(t *Task) {
	c := p.c
	if p.promotes(t) {
		heap.Push(&p.due, promotion{at: c.now + int64(c.cfg.LASPromote)*t.lastRun, t: t, attempt: t.attempt})
		return
	}
	if bound := p.bound(t); bound > 0 {
		heap.Push(&p.due, promotion{at: c.now + bound, t: t, attempt: t.attempt, starve: true})
	}
}

// bound is how long pending t may wait before it is starved (0: no
// bound): under a policy that orders pending tasks, other than las,
// StarveFactor times its expected runtime or StarveLimit, the less.
// Gang members wait as their gang does (no class queue orders them).
func (p *promoter) bound(t *Task) int64 {
	c := p.c
	if c.policy.QueueSort == nil || t.gang != nil || c.cfg.StarveFactor == 0 && c.cfg.StarveLimit == 0 {
		return 0
	}
	if _, las := c.policy.QueueSort.(*LeastAttained); las {
		return 0
	}
	bound := int64(c.cfg.StarveLimit)
	if exp := int64(c.cfg.StarveFactor) * c.lr.expectedRuntime(t); c.cfg.StarveFactor > 0 && exp > 0 && (bound == 0 || exp < bound) {
		bound = exp
	}
	return bound
}

// sortKey is t's key in its class queue: the policy's, or for a starved
// task one below every policy key, earlier arrivals first.
func (p *promoter) sortKey(t *Task) int64 {
	if t.starved {
		return math.MinInt64/2 + t.enqueued
	}
	return p.c.policy.QueueSort.SortKey(&p.c.cs, t)
}

// next returns the earliest deadline, ok=false when none.
func (p *promoter) next() (int64, bool) {
	if len(p.due) == 0 {
		return 0, false
	}
	return p.due[0].at, true
}

// fire promotes the tasks whose starvation deadline passed and still
// wait in the attempt it was set for.
func (p *promoter) fire() {
	c := p.c
	for len(p.due) > 0 && p.due[0].at <= c.now {
		pr := heap.Pop(&p.due).(promotion)
		t := pr.t
		if t.state != Pending || t.attempt != pr.attempt || t.backoff || t.gready || t.cq == nil || pr.starve && t.starved {
			continue
		}
		if pr.starve {
			t.starved = true
			c.stats.Starved++
		} else {
			t.lasBase = t.served
			c.stats.Promoted++
		}
		// Re-keyed in its class queue; its level, its place in the
		// level's aging list and its band stay as they are.
		q := t.cq
		q.removeAt(int(t.cqpos))
		t.sortKey = p.sortKey(t)
		q.push(t)
		switch {
		case q.blocked:
			c.wk.unblock(q) // its new head may swap out what it could not
		case q.hpos >= 0:
			c.qs.hfix(q)
		}
	}
}
