package core

import "sort"

// Preemption: an urgent or high task that fits nowhere may evict
// preemptible tasks of lower priority (larger number). The what-if runs on
// the live node state with raw, undoable allocation changes (checkpoint,
// evict, check, reprieve, rollback), so nothing is committed until the best
// node is chosen. On a node, victims are taken least important first, most
// recently started first, and then reprieved from the most important down,
// leaving the fewest that make room. Across nodes (as kube-scheduler does):
// the node whose most important victim is least important, then the fewest
// victims, then the most recently started. Victims go back to pending with
// their attempt counted; they are never lost.

type preemptPlan struct {
	n       *Node
	o       *Option
	victims []*Task
	minPrio int8  // the most important victim's priority (larger is better)
	latest  int64 // the latest start among victims (larger is better)
	hasPlan bool
}

func (p *preemptPlan) better(victims []*Task) bool {
	if !p.hasPlan {
		return true
	}
	mp, lt := victimStats(victims)
	if mp != p.minPrio {
		return mp > p.minPrio
	}
	if len(victims) != len(p.victims) {
		return len(victims) < len(p.victims)
	}
	return lt > p.latest
}

func victimStats(vs []*Task) (minPrio int8, latest int64) {
	minPrio = 127
	for _, v := range vs {
		if v.prio < minPrio {
			minPrio = v.prio
		}
		if s := startOf(v); s > latest {
			latest = s
		}
	}
	return
}

// startOf is when t started running, or was placed if not started yet.
func startOf(t *Task) int64 { return t.started }

// tryPreempt finds victims for t and, when it finds a plan, evicts them and
// places t. It looks at no more than Config.PreemptMaxVisit nodes.
func (c *Core) tryPreempt(t *Task) bool {
	var plan preemptPlan
	visited := 0
	try := func(o *Option, n *Node) {
		if !c.potentialFits(t, o, n) {
			return
		}
		victims, ok := c.victimsOn(t, o, n)
		if ok && len(victims) > 0 && plan.better(victims) {
			plan.n, plan.o, plan.hasPlan = n, o, true
			plan.victims = append(plan.victims[:0], victims...)
			plan.minPrio, plan.latest = victimStats(victims)
		}
	}
	for oi := range t.cls.opts {
		o := &t.cls.opts[oi]
		if t.queue != nil && c.queueCheck(t, o) != nil {
			continue // evicting others cannot lift its queue's max
		}
		c.refreshGroups(t, o)
		if len(t.cls.identity) > 0 {
			// Pinned: only the nodes the identity index names.
			term := t.cls.identity[0]
			for _, v := range term.values {
				for _, n := range c.idx.byIdentity[term.key][v] {
					if n.bucket >= 0 && o.hasGroup(n.group) && identityMatch(t.cls, n) {
						try(o, n)
					}
				}
			}
			continue
		}
		for _, g := range o.groups {
			for b := g.max; b >= 0; b-- {
				for _, n := range g.buckets[b] {
					if visited >= c.cfg.PreemptMaxVisit {
						goto decide
					}
					visited++
					try(o, n)
				}
			}
		}
	}
decide:
	if !plan.hasPlan {
		return false
	}
	for _, v := range plan.victims {
		c.stats.Preempted++
		c.out.Preemptions = append(c.out.Preemptions, Preemption{Victim: v.id, By: t.id, Node: plan.n.name})
		c.requeue(v, Preempted, "preempted by "+t.id)
	}
	if t.state != Pending || t.q == nil {
		// An eviction's consequences settled t itself (a victim that must
		// not restart failed, and its job failed fast, cancelling t).
		return true
	}
	if c.checkNode(t, plan.o, plan.n) != nil {
		// Cannot happen: the what-if proved the fit on this exact state.
		return false
	}
	c.commit(t, plan.o, plan.n, c.scratchDevs)
	return true
}

// potentialFits reports whether o could fit on n if every lower-priority
// preemptible task left.
func (c *Core) potentialFits(t *Task, o *Option, n *Node) bool {
	nd := c.dims.Len()
	for i := 0; i < nd; i++ {
		avail := n.capacity[i] - n.alloc[i]
		for p := int(t.prio) + 1; p < 4; p++ {
			avail += n.allocByPrio[p][i]
		}
		if o.req[i] > avail {
			return false
		}
	}
	return true
}

// victimsOn returns the smallest set of victims on n that lets o fit, found
// by evicting candidates least important first and then reprieving from the
// most important down. The node's state is restored before returning.
func (c *Core) victimsOn(t *Task, o *Option, n *Node) ([]*Task, bool) {
	cands := c.victimBuf[:0]
	for _, v := range n.tasks {
		if v.preemptible && v.prio > t.prio && c.now-startOf(v) >= int64(c.cfg.PreemptMinRuntime) {
			cands = append(cands, v)
		}
	}
	// Least important first, then most recently started, then newest.
	sort.Slice(cands, func(i, j int) bool { return victimBefore(cands[i], cands[j]) })
	c.victimBuf = cands
	evicted := 0
	fits := false
	for _, v := range cands {
		rawAdd(n, v, &v.cls.opts[optIndex(v.chosen)], v.devs, -1)
		evicted++
		if c.checkNode(t, o, n) == nil {
			fits = true
			break
		}
	}
	if !fits {
		for i := evicted - 1; i >= 0; i-- {
			v := cands[i]
			rawAdd(n, v, &v.cls.opts[optIndex(v.chosen)], v.devs, 1)
		}
		return nil, false
	}
	victims := c.victimOut[:0]
	for i := evicted - 1; i >= 0; i-- {
		v := cands[i]
		vo := &v.cls.opts[optIndex(v.chosen)]
		rawAdd(n, v, vo, v.devs, 1)
		if c.checkNode(t, o, n) != nil {
			rawAdd(n, v, vo, v.devs, -1)
			victims = append(victims, v)
		}
	}
	for _, v := range victims {
		rawAdd(n, v, &v.cls.opts[optIndex(v.chosen)], v.devs, 1)
	}
	c.victimOut = victims
	return victims, true
}

func victimBefore(a, b *Task) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	sa, sb := startOf(a), startOf(b)
	if sa != sb {
		return sa > sb
	}
	return a.seq > b.seq
}
