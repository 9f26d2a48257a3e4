package core

import "container/heap"

// Starvation promotion under las (Tiresias' STARVELIMIT): a task that
// ran, went back to pending in a queue above 0 and has waited
// Config.LASPromote times its last run since, is promoted to queue 0:
// its attained service is counted from then (Task.lasBase), it is
// re-keyed in its class queue, and it may swap out what runs in higher
// queues again. Gang members are not promoted (their gang is queued as
// a whole). Deadlines live in a heap checked at each Tick; an entry whose
// task ran again, left, or moved to another attempt is dropped when due.

// promotion is one starvation deadline.
type promotion struct {
	at      int64
	t       *Task
	attempt int32
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
func (c *Core) promotes(t *Task) bool {
	la, ok := c.policy.TimeShare.(*LeastAttained)
	return ok && c.cfg.LASPromote > 0 && t.gang == nil && t.lastRun > 0 && la.Rank(t) > 0
}

// schedulePromotion sets t's starvation deadline when it may be promoted.
func (c *Core) schedulePromotion(t *Task) {
	if !c.promotes(t) {
		return
	}
	heap.Push(&c.promotions, promotion{at: c.now + int64(c.cfg.LASPromote)*t.lastRun, t: t, attempt: t.attempt})
}

// firePromotions promotes the tasks whose starvation deadline passed and
// still wait in the attempt it was set for.
func (c *Core) firePromotions() {
	for len(c.promotions) > 0 && c.promotions[0].at <= c.now {
		p := heap.Pop(&c.promotions).(promotion)
		t := p.t
		if t.state != Pending || t.attempt != p.attempt || t.backoff || t.gready || t.cq == nil {
			continue
		}
		t.lasBase = t.served
		c.stats.Promoted++
		// Re-keyed in its class queue; its level, its place in the
		// level's aging list and its band stay as they are.
		q := t.cq
		q.removeAt(int(t.cqpos))
		t.sortKey = c.policy.QueueSort.SortKey(&c.cs, t)
		q.push(t)
		switch {
		case q.blocked:
			c.unblock(q) // its new head may swap out what it could not
		case q.hpos >= 0:
			c.hfix(q)
		}
	}
}
