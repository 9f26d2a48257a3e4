package core

// Gang preemption: a waiting gang whose try failed (tryGang) may evict,
// as one, what its members' preemption modes allow (preempt.go: priority,
// reclaim, time-share). The plan is made on the live state under one
// journal checkpoint:
//
//   - each member the gang still needs, in submission order, gets a node
//     on the state the members before it left (their placements and their
//     victims' evictions, what-if): a free fit first (the gang's topology
//     preference steering it), else the node whose victims come first in
//     kube-scheduler's order (the least important most important victim,
//     then the fewest victims, a gang counting all its placed members,
//     then the latest started; victimsOn: minimal on that node);
//   - a member's walk takes no task an earlier member's plan took, and
//     judges guarantees against the state before the plan (no gang eats,
//     member by member, into a queue's guaranteed usage);
//   - no task of the gang itself is a victim.
//
// When every member it needs has a place, the plan is rolled back and then
// carried out: the victims evicted (a victim's gang whole, as always),
// then the members placed where planned, under a checkpoint kept only if
// every one of them fits, so the gang is never partly placed. When some
// member has no place, nothing is evicted: the gang keeps its try's
// verdict and is tried again when capacity changes.

// gangPlace is where a gang preemption plan puts one member.
type gangPlace struct {
	t *Task
	o *Option
	n *Node
}

// gangVictim is a task a gang preemption plan evicts, and the member whose
// place needed it (the preemption's "by").
type gangVictim struct {
	v, by *Task
}

// gangPreemption plans and carries out gang preemptions; it holds one
// plan's scratch (the core's, reused).
type gangPreemption struct {
	places  []gangPlace
	victims []gangVictim
	// wait makes plan a reservation's (gangreserve.go): its victims are
	// the tasks it waits for, and nothing is carried out.
	wait bool
}

// start plans g's start over evictions and carries the plan out (the
// caller, placeGangs, asks only for a gang some ready member of which may
// evict anything). It reports whether g started.
func (gp *gangPreemption) start(c *Core, g *gang) bool {
	need := g.min - g.placed - g.done
	if need <= 0 || len(g.ready) < need {
		return false
	}
	return gp.plan(c, g, need) && gp.carryOut(c, g)
}

// plan fills gp with a place for need ready members of g and the victims
// that make room, or reports false. The state is as it was when it
// returns.
func (gp *gangPreemption) plan(c *Core, g *gang, need int) bool {
	ready, aff := c.gs.gangTryStart(g)
	defer c.gs.gangTryEnd(ready)
	sc := c.pl.beginSearch(true, aff)
	defer sc.endSearch()
	sc.reserving = gp.wait
	defer func() { sc.reserving = false }()
	return c.gs.inGangDomains(g, sc, ready, aff, func() bool { return gp.planIn(c, g, need, sc, ready, aff) })
}

// planIn is plan in the search sc (its domain, if any).
func (gp *gangPreemption) planIn(c *Core, g *gang, need int, sc *searchCtx, ready []*Task, aff *gangAffinity) bool {
	gp.places, gp.victims = gp.places[:0], gp.victims[:0]
	cp := c.jr.checkpoint()
	sc.gangBase, sc.gangGone, sc.gangOwn = &cp, sc.gangGone[:0], g
	for i, t := range ready {
		if len(gp.places) == need || len(gp.places)+len(ready)-i < need {
			break // done, or too few members left to reach need
		}
		c.gs.saved.save(t.cls)
		res := c.pl.tryPlace(sc, t)
		c.gs.saved.restore(t.cls)
		if res == placed || gp.planMember(c, sc, t) {
			gp.places = append(gp.places, gangPlace{t: t, o: &t.cls.opts[optIndex(t.chosen)], n: t.node})
			if aff.anchor == nil {
				aff.anchor = t.node
			}
		}
	}
	ok := len(gp.places) == need
	c.jr.rollback(cp)
	sc.gangBase, sc.gangGone, sc.gangOwn = nil, sc.gangGone[:0], nil
	return ok
}

// planMember finds member t's best node over evictions (the walk of
// tryPreempt), takes its victims away what-if and places t there what-if.
// It reports whether t got a place.
func (gp *gangPreemption) planMember(c *Core, sc *searchCtx, t *Task) bool {
	if !gp.wait && !c.pe.mayPreempt(t) {
		return false
	}
	w := preemptWalk{sc: sc, t: t, wait: gp.wait}
	for oi := range t.cls.opts {
		if !c.pe.preemptOption(&w, &t.cls.opts[oi]) {
			break
		}
	}
	if !w.plan.hasPlan {
		return false
	}
	plan := w.plan // its victims live in sc.plan, which the evictions below do not touch
	for _, v := range plan.victims {
		if gp.wait {
			// Waited for: it alone ends (its gang's others need not).
			c.jr.whatIfEvict(v)
			sc.gangGone = append(sc.gangGone, v)
			gp.victims = append(gp.victims, gangVictim{v: v, by: t})
			continue
		}
		for _, x := range evictedWith(sc, v, sc.gangGone, nil) {
			c.jr.whatIfEvict(x)
			sc.gangGone = append(sc.gangGone, x)
		}
		gp.victims = append(gp.victims, gangVictim{v: v, by: t})
	}
	if c.pl.checkNode(sc, t, plan.o, plan.n) != nil {
		// Cannot happen: the walk proved the fit with these victims gone.
		return false
	}
	c.commit(t, plan.o, plan.n, sc.cs.picked)
	return true
}

// carryOut evicts the plan's victims and places its members. It reports
// whether every member was placed (else none is).
func (gp *gangPreemption) carryOut(c *Core, g *gang) bool {
	for _, x := range gp.victims {
		if x.v.state == Scheduled || x.v.state == Running {
			c.pe.evict(x.v, x.by, x.v.node)
		}
	}
	// The victims went back to pending: serve them soon (they may fit
	// elsewhere), as a preemption's pass does.
	c.retrySoon()
	sc := c.pl.beginSearch(true, nil)
	defer sc.endSearch()
	cp := c.jr.checkpoint()
	for _, p := range gp.places {
		if p.t.state != Pending || p.t.gang != g || c.pl.checkNode(sc, p.t, p.o, p.n) != nil {
			// An eviction's consequences changed what the plan proved
			// (a victim's job failing fast cancelled a member, say).
			c.jr.rollback(cp)
			return false
		}
		c.commit(p.t, p.o, p.n, sc.cs.picked)
	}
	c.jr.keep(cp)
	c.stats.Attempts += uint64(len(gp.places))
	g.placed += len(gp.places)
	g.started = true
	g.reason = ""
	g.lastOf = 0
	if len(g.ready) > 0 {
		g.tried = c.capSeq // the rest wait for capacity
	}
	return true
}
