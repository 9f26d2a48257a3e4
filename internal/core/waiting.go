package core

// Waiting reports the pending tasks by queue and reason, in groups: fn gets
// the queue's name ("" for tasks of no queue), the reason the group waits
// for ("" when it has not been found unschedulable since it was last
// tried; "retry" for tasks waiting out a retry backoff) and the group's
// size. Tasks blocked on dependencies are not pending and not reported.
// The cost is the number of classes and gangs and queues, not of tasks:
// for metrics and status pages.
func (c *Core) Waiting(fn func(queue, reason string, n int)) {
	name := func(q *queueNode) string {
		if q == c.qs.root.self {
			return ""
		}
		return q.name
	}
	for _, list := range c.ct.byHash {
		for _, cl := range list {
			for _, cq := range cl.classQueues() {
				if cq == nil || cq.size() == 0 {
					continue
				}
				reason := ""
				if cq.blocked {
					reason = cq.lastReason
				}
				fn(name(cl.leaf), reason, cq.size())
			}
		}
	}
	for _, g := range c.gs.wait {
		if len(g.ready) == 0 {
			continue
		}
		r := c.gs.gangWaitReason(g)
		for _, m := range g.ready {
			fn(name(m.leaf), r, 1)
		}
	}
	for _, q := range allQueueNodes(c) {
		if q.leaf && q.backoff > 0 {
			fn(name(q), "retry", q.backoff)
		}
	}
}
