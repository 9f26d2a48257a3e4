package core

import (
	"math"
)

// outcome of one placement attempt.
type outcome uint8

const (
	placed   outcome = iota
	unfit            // every node that could fit was examined: none does
	deferred         // the search budget ran out before a fit was found
)

// candidate is the best node so far: by preference (the placement
// constraints', ahead of any policy score), then by score.
type candidate struct {
	n     *Node
	o     *Option
	pref  int64
	score int64
}

func optIndex(chosen int8) int { return int(chosen) + 1 }

// placer is the placement search: it walks the compatible groups of a
// task's options, runs the policy's filters and scores on the nodes it
// visits, and commits the best fit through the core (commit, journaled in
// a what-if). The core calls it at named points: beginSearch at the start
// of an attempt, tryPlace for each task a pass tries, checkNode where a
// caller tests one node (gavel rounds, preemption, gang reservations).
type placer struct {
	c  *Core
	sc searchCtx // the search context, reused
}

// searchCtx is what one attempt's search carries from step to step: how it
// searches and the buffers it reuses. The placer owns one (placer.sc), so that
// the hot path allocates nothing, but no step reads it through the Core:
// beginSearch resets it at the start of an attempt and hands it to
// tryPlace, and every step that needs it (checkNode, consider,
// pickDevices, the preemption what-ifs) takes it as an argument.
type searchCtx struct {
	// cs is what the plugins see during the search; cs.picked holds the
	// devices that the last checkNode to pass chose on its node, valid
	// until the next checkNode.
	cs CycleState
	// full makes every walk complete (no MaxVisit budget): the second
	// attempt of urgent and high work, and gang tries.
	full bool
	// aff steers a gang try's members towards the nodes sharing topology
	// labels with the members placed before them; nil outside gang tries.
	aff *gangAffinity
	// best holds the devices of the best candidate so far (consider).
	best []devShare
	// victims, kept, evicted, ghosts and plan are preemption's buffers
	// (victimsOn, evictedWith, preemptOn).
	victims, kept, evicted, ghosts, plan []*Task
	takenAt                              []int // the journal entries of victimsOn's what-if evictions
	// During a gang's preemption plan (gangpreempt.go): gangGone is what
	// the members planned so far took away, what-if (no later member's
	// walk takes it again), gangBase the checkpoint before the plan
	// (guarantees are judged against it), gangOwn the gang (none of its
	// tasks is a victim). Nil outside such a plan.
	gangGone []*Task
	gangBase *checkpoint
	gangOwn  *gang
	// dom, during a gang try with domains (gangdomain.go), is the one
	// domain its placements and preemption walks may use; nil: any.
	dom *gangDomain
	// reserving: the search plans a gang reservation (gangreserve.go),
	// which never takes a node held for another gang.
	reserving bool
}

// beginSearch resets the core's search context for one attempt (full: no
// visit budget; aff: a gang try's affinity) and returns it.
func (pl *placer) beginSearch(full bool, aff *gangAffinity) *searchCtx {
	c := pl.c
	sc := &pl.sc
	sc.cs.core, sc.cs.now = c, c.now
	sc.cs.picked = sc.cs.picked[:0]
	sc.full, sc.aff = full, aff
	return sc
}

// endSearch drops what an attempt set up (a gang's affinity), so that
// nothing outlives the input that searched.
func (sc *searchCtx) endSearch() { sc.full, sc.aff = false, nil }

// refreshGroups recomputes the groups that pass the policy's static filters
// for o, when the set of groups changed since the last time.
func (pl *placer) refreshGroups(t *Task, o *Option) {
	c := pl.c
	if o.groupsOK && o.groupsVer == c.idx.version {
		return
	}
	o.groups = o.groups[:0]
	o.groupSet = o.groupSet[:0]
	for _, g := range c.idx.glist {
		ok := pl.staticCheck(t, o, g) == nil
		if ok {
			o.groups = append(o.groups, g)
		}
		o.groupSet = append(o.groupSet, ok)
	}
	o.groupsVer = c.idx.version
	o.groupsOK = true
}

func (pl *placer) staticCheck(t *Task, o *Option, g *group) *Status {
	c := pl.c
	for _, f := range c.policy.Static {
		if st := f.Filter(&c.cs, t, o, g.tmpl); !st.IsSuccess() {
			return st
		}
	}
	return nil
}

func (pl *placer) sampleSize() int {
	c := pl.c
	if c.policy.SampleSize > 0 {
		return c.policy.SampleSize
	}
	return c.cfg.SampleSize
}

// tryPlace searches the compatible groups of every option of t and commits
// the best-scoring fit.
func (pl *placer) tryPlace(sc *searchCtx, t *Task) outcome {
	c := pl.c
	if t.leaf != nil && c.qs.overQueueMax(t) {
		return unfit // node-independent: no walk can find a fit
	}
	if r := c.policy.Rounds; r != nil && r.Gate(t) {
		return unfit // placed in rounds only (gavel.go), but for a round's overflow
	}
	if len(t.cls.identity) > 0 {
		return pl.identityPlace(sc, t)
	}
	if c.policy.Order == Rotate {
		return pl.rotatePlace(sc, t)
	}
	best := candidate{pref: math.MinInt64, score: math.MinInt64}
	complete := true
	sample := pl.sampleSize()
	for _, oi := range t.cls.optOrder {
		o := &t.cls.opts[oi]
		pl.refreshGroups(t, o)
		for _, g := range o.groups {
			if !pl.searchGroup(sc, t, o, g, sample, &best) {
				complete = false
			}
		}
		if best.n != nil && !c.policy.CompareOptions {
			break
		}
	}
	if best.n == nil {
		if complete {
			return unfit
		}
		return deferred
	}
	c.commit(t, best.o, best.n, sc.best)
	return placed
}

// identityMatch reports whether n carries the identity-label values cls
// selects.
func identityMatch(cls *class, n *Node) bool {
	return termsMatch(cls.identity, n.labels, nil) && (!cls.affinityIdentity || affinityMatch(cls, n))
}

// termsMatch reports whether labels satisfy every term not named in skip.
func termsMatch(terms []selTerm, labels map[string]string, skip map[string]bool) bool {
	for _, s := range terms {
		if skip[s.key] {
			continue
		}
		v, ok := labels[s.key]
		if !ok {
			return false
		}
		match := false
		for _, want := range s.values {
			if v == want {
				match = true
				break
			}
		}
		if !match {
			return false
		}
	}
	return true
}

// identityPlace places a task that selects nodes by identity label: the
// candidates come from the index of that label's values, never from a scan.
func (pl *placer) identityPlace(sc *searchCtx, t *Task) outcome {
	c := pl.c
	best := candidate{pref: math.MinInt64, score: math.MinInt64}
	term := t.cls.identity[0]
	for _, oi := range t.cls.optOrder {
		o := &t.cls.opts[oi]
		pl.refreshGroups(t, o)
		for _, v := range term.values {
			for _, n := range c.idx.byIdentity[term.key][v] {
				if n.bucket >= 0 && o.hasGroup(n.group) {
					pl.consider(sc, t, o, n, &best)
				}
			}
		}
		if best.n != nil && !c.policy.CompareOptions {
			break
		}
	}
	if best.n == nil {
		return unfit
	}
	c.commit(t, best.o, best.n, sc.best)
	return placed
}

// rotatePlace is round-robin: from a cursor over all nodes, the first node
// that fits any option takes the task and the cursor moves past it. Nodes
// outside the task's groups are skipped at the cost of a lookup; at most
// MaxVisit compatible nodes are checked per attempt, and after an attempt
// that ran out of budget the next one checks a whole turn. A task is unfit
// only after a whole turn within one attempt found nothing.
func (pl *placer) rotatePlace(sc *searchCtx, t *Task) outcome {
	c := pl.c
	possible := false
	for oi := range t.cls.opts {
		o := &t.cls.opts[oi]
		pl.refreshGroups(t, o)
		for _, g := range o.groups {
			if g.indexed > 0 && g.needBucket(o.req[g.primary]) <= g.max {
				possible = true
			}
		}
	}
	order := c.idx.order
	if !possible || len(order) == 0 {
		t.cls.rrExhaustive = false
		return unfit
	}
	full := t.cls.rrExhaustive || sc.full
	limit := c.cfg.MaxVisit
	if full {
		limit = len(order)
	}
	checked := 0
	// The accelerator guard, as a turn can keep it: a task that asks for
	// no device passes over the nodes with devices that fit it, and takes
	// the first of them only when the turn ends without a node without
	// devices (or its budget runs out).
	guard := !asksDevices(t)
	var fallback *Node
	var fallbackOpt *Option
	fallbackPos := 0
	useFallback := func() outcome {
		t.cls.rrExhaustive = false
		c.rr = fallbackPos + 1
		c.commit(t, fallbackOpt, fallback, nil)
		return placed
	}
	scanLimit := 4 * c.cfg.MaxVisit // incompatible nodes are cheap, not free
	if full {
		scanLimit = len(order)
	}
	for scanned := 0; scanned < len(order); scanned++ {
		if scanned == scanLimit {
			if fallback != nil {
				return useFallback()
			}
			c.rr += scanned
			t.cls.rrExhaustive = true
			return deferred
		}
		pos := (c.rr + scanned) % len(order)
		n := order[pos]
		if n.bucket < 0 {
			continue
		}
		compatible := false
		for _, oi := range t.cls.optOrder {
			o := &t.cls.opts[oi]
			if !o.hasGroup(n.group) {
				continue
			}
			compatible = true
			if pl.checkNode(sc, t, o, n) == nil {
				if guard && len(n.devices) > 0 {
					if fallback == nil {
						fallback, fallbackOpt, fallbackPos = n, o, pos
					}
					break
				}
				t.cls.rrExhaustive = false
				c.rr = pos + 1
				c.commit(t, o, n, sc.cs.picked)
				return placed
			}
		}
		if compatible {
			// An exhaustive turn ends at the end of the order (unfit), not
			// at its budget.
			if checked++; checked >= limit && !full {
				if fallback != nil {
					return useFallback()
				}
				c.rr = pos + 1
				t.cls.rrExhaustive = true
				return deferred
			}
		}
	}
	if fallback != nil {
		return useFallback()
	}
	t.cls.rrExhaustive = false
	return unfit
}

// asksDevices reports whether some option of t asks for a device.
func asksDevices(t *Task) bool {
	for oi := range t.cls.opts {
		if len(t.cls.opts[oi].devs) > 0 {
			return true
		}
	}
	return false
}

// scanState is how a class's next search of one group runs.
type scanState struct {
	// exhaustive: the last search ran out of budget (or found its fit
	// past it), so the next one looks at every node, from hint on.
	exhaustive bool
	hint       int // walk position of the last fit found by such a search
}

func (o *Option) scan(g *group) *scanState {
	for len(o.scans) <= g.id {
		o.scans = append(o.scans, scanState{})
	}
	return &o.scans[g.id]
}

// searchGroup walks g's nodes that may fit in the policy's order (fullest
// first from the lowest bucket that may fit, or emptiest first), scoring up
// to sample fits. A normal search starts at the best end of the walk and
// looks at up to MaxVisit nodes; when that budget runs out with no fit it
// returns false (the caller defers the task) and the class's next search of
// g is exhaustive: it starts where the last such search found a fit, wraps
// around, and looks at every node, so a task is declared unfit only after a
// complete walk within one attempt. Searches stay exhaustive while fits are
// only found beyond the budget.
func (pl *placer) searchGroup(sc *searchCtx, t *Task, o *Option, g *group, sample int, best *candidate) bool {
	c := pl.c
	if g.indexed == 0 || !o.req.Fits(&g.maxCap) || sc.dom != nil && !sc.dom.holdsGroup(g) {
		return true
	}
	nb := g.needBucket(o.req[g.primary])
	if nb > g.max {
		return true
	}
	first, end, step := nb, g.max+1, 1
	if c.policy.Order == LeastAllocatedFirst {
		first, end, step = g.max, nb-1, -1
		if c.policy.KeepRoom {
			if cut := pl.roomCut(g, o); cut > nb && pl.probeBelow(sc, t, o, g, nb, cut, sample, best) {
				return true
			}
		}
	}
	total := 0
	for b := first; b != end; b += step {
		total += len(g.buckets[b])
	}
	st := o.scan(g)
	limit, start := c.cfg.MaxVisit, 0
	if c.policy.FullWalk {
		limit, sample = total, total+1
	}
	if st.exhaustive || sc.full {
		limit, start = total, st.hint
		if start >= total {
			start = 0
		}
	}
	// The bucket and offset of walk position start.
	b, i := first, start
	for i >= len(g.buckets[b]) {
		i -= len(g.buckets[b])
		b += step
	}
	visited, found := 0, 0
	for visited < total {
		for i >= len(g.buckets[b]) {
			i = 0
			if b += step; b == end {
				b = first
			}
		}
		if visited == limit {
			st.exhaustive, st.hint = true, 0
			return found > 0
		}
		n := g.buckets[b][i]
		pos := (start + visited) % total
		visited++
		i++
		if pl.consider(sc, t, o, n, best) {
			if st.exhaustive {
				st.hint = pos
				st.exhaustive = pos >= c.cfg.MaxVisit
			}
			if found++; found >= sample {
				return true
			}
		}
	}
	// A complete walk that found nothing leaves the next search
	// exhaustive too: were it reset to a budgeted one, two groups of one
	// class could take turns cutting each other short, and the class would
	// be deferred for ever instead of found unfit.
	return true
}

// consider checks n for o and keeps it in best when it scores higher
// (ties keep the earlier node, so results are deterministic).
func (pl *placer) consider(sc *searchCtx, t *Task, o *Option, n *Node, best *candidate) bool {
	c := pl.c
	if pl.checkNode(sc, t, o, n) != nil {
		return false
	}
	var s int64
	for _, ws := range c.policy.Scores {
		v, st := ws.Plugin.Score(&sc.cs, t, o, n)
		if !st.IsSuccess() {
			return false
		}
		s += ws.Weight * v
	}
	if sc.aff != nil {
		s += sc.aff.bonus(n)
	}
	var pref int64
	if prefers(t, n) {
		pref = c.cons.preference(t, n)
	}
	if pref > best.pref || pref == best.pref && s > best.score {
		best.n, best.o, best.pref, best.score = n, o, pref, s
		sc.best = append(sc.best[:0], sc.cs.picked...)
	}
	return true
}

// checkNode runs the dynamic filters of o on n, the core's own
// (coreFilters) and then the policy's (Policy.Filters), and returns the
// first failure; on success the devices DeviceFit picked are in
// sc.cs.picked.
func (pl *placer) checkNode(sc *searchCtx, t *Task, o *Option, n *Node) *Status {
	c := pl.c
	cs, cf := &sc.cs, &c.cf
	if d := sc.dom; d != nil && (!d.holdsNode(n) || n.group == nil || !d.holdsGroup(n.group)) {
		return errOutsideDomain
	}
	if t.cls.perNode() {
		if st := cf.identity.Filter(cs, t, o, n); st != nil {
			return st
		}
	}
	if st := cf.quota.Filter(cs, t, o, n); st != nil {
		return st
	}
	if st := cf.fit.Filter(cs, t, o, n); st != nil {
		return st
	}
	if len(o.devs) == 0 {
		cs.picked = cs.picked[:0] // DeviceFit's answer, without the call
	} else if st := cf.devs.Filter(cs, t, o, n); st != nil {
		return st
	}
	if t.cls.cons != nil || c.cons.owned > 0 {
		if st := c.cons.filter(t, n); st != nil {
			return st
		}
	}
	if n.hold != nil {
		if st := c.gs.gr.filter(c, sc, t, o, n); st != nil {
			return st
		}
	}
	for _, f := range c.policy.Filters {
		if st := f.Filter(&sc.cs, t, o, n); !st.IsSuccess() {
			return st
		}
	}
	return nil
}

// errOutsideDomain: the node is outside a gang try's domain (gangdomain.go).
var errOutsideDomain = NewUnresolvable("outside the gang's domain")

// commit places pending t on n with devs; under a checkpoint it records
// what it changes (journal.go).
func (c *Core) commit(t *Task, o *Option, n *Node, devs []devShare) {
	if c.jr.journaling() {
		c.jr.recordPlace(t, o, n)
	}
	delay := c.now - t.enqueued
	wait := c.now - attemptStart(t)
	level := t.level
	c.unqueue(t)
	c.timers.cancel(t)
	c.allocate(t, n, o, devs)
	t.locDone = true
	t.state = Scheduled
	t.started = c.now // until TaskStarted says when it really started
	t.reason = ""
	if t.lease > 0 {
		c.timers.set(t, timerLease, c.now+t.lease)
	}
	for _, r := range c.policy.Reserve {
		r.Reserve(&c.cs, t, o, n)
	}
	c.cons.reserve(t, n, 1)
	c.stats.Placed++
	c.callPlaced++
	refs := make([]DeviceRef, len(t.devs))
	for i, s := range t.devs {
		d := &n.devices[s.dev]
		refs[i] = DeviceRef{Type: d.Type, ID: d.ID, Model: d.Model, Share: s.milli}
	}
	c.out.Placements = append(c.out.Placements, Placement{
		Task: t.id, Node: n.name, Devices: refs, Chosen: o.Index, Attempt: int(t.attempt),
		Delay: durationOf(delay), AttemptWait: durationOf(wait), Priority: int(t.prio), Level: int(level),
	})
}

// attemptStart is where the attempt on pending t began: its entry into the
// queue, or the later wake of its class queue by capacity (see
// Placement.AttemptWait).
func attemptStart(t *Task) int64 {
	if q := t.cq; q != nil && !t.gready && q.woken > t.enqueued {
		return q.woken
	}
	return t.enqueued
}

// rawAdd adds (sign 1) or removes (sign -1) t's allocation on n without
// touching n's task list or its bucket: the what-if step of preemption.
func rawAdd(n *Node, t *Task, o *Option, devs []devShare, sign int64) {
	req := o.req[:o.reqLen] // the dims past reqLen are zero
	for i, r := range req {
		n.alloc[i] += sign * r
	}
	if t.preemptible {
		v := &n.allocByPrio[t.prio]
		for i, r := range req {
			v[i] += sign * r
		}
	}
	for _, s := range devs {
		n.devices[s.dev].Used += int32(sign) * s.milli
	}
	if n.bucket >= 0 && n.group != nil {
		n.group.ix.countFree(n, o.reqLen)
	}
}

// allocate records t's placement on n.
func (c *Core) allocate(t *Task, n *Node, o *Option, devs []devShare) {
	rawAdd(n, t, o, devs, 1)
	if t.leaf != nil {
		c.qs.queueAdd(t, o, 1)
	}
	t.devs = append(t.devs[:0], devs...)
	t.node = n
	t.chosen = int8(o.Index)
	t.npos = int32(len(n.tasks))
	n.tasks = append(n.tasks, t)
	c.placedN++
	if n.group != nil {
		n.group.rebucket(n)
	}
}

// release frees t's allocation; with wake, classes blocked on the node's
// group get another try.
func (c *Core) release(t *Task, wake bool) {
	n := t.node
	if n == nil {
		return
	}
	o := &t.cls.opts[optIndex(t.chosen)]
	for _, r := range c.policy.Reserve {
		r.Unreserve(&c.cs, t, o, n)
	}
	c.cons.reserve(t, n, -1)
	rawAdd(n, t, o, t.devs, -1)
	if t.leaf != nil {
		c.qs.queueAdd(t, o, -1)
	}
	last := len(n.tasks) - 1
	if int(t.npos) != last {
		n.tasks[t.npos] = n.tasks[last]
		n.tasks[t.npos].npos = t.npos
	}
	n.tasks[last] = nil
	n.tasks = n.tasks[:last]
	t.node = nil
	t.npos = -1
	t.devs = t.devs[:0]
	c.placedN--
	if n.group != nil {
		n.group.rebucket(n)
		if wake {
			c.wk.wake(n)
		}
	}
}
