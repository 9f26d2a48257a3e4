package core

import (
	"math"
	"slices"
)

// Preemption and reclaim: a task that fits nowhere may evict preemptible
// tasks that have run at least PreemptMinRuntime.
//
//   - Priority: an urgent or high task (a task of any priority under
//     Config.PreemptAllTiers) may evict less important tasks:
//     of a lower priority (a larger number), or of its own with a smaller
//     priority value (importance), as a Kubernetes pod may evict pods of
//     a smaller priority. A task whose preemptionPolicy is never evicts
//     nothing, by any of the three rules.
//   - Reclaim: a task of any priority whose queue stays within its
//     guarantee with the task placed (for each guaranteed resource it
//     asks for) may evict tasks of other queues that are borrowing (their
//     subtree holds more than its guarantee of a resource both ask for),
//     outside the queue whose guarantee it reclaims for.
//   - Either way, evictions never eat into guaranteed usage: every queue
//     with a guarantee keeps, of each resource it guarantees, at least the
//     smaller of what it holds and its guarantee (keepsGuarantees). So no
//     preemption undoes another, and tasks never evict each other in turn.
//   - A gang is evicted whole: it is a victim only if every placed member
//     is preemptible, has run PreemptMinRuntime, and (for priority) is
//     less important than the preemptor.
//   - A waiting gang preempts as one: gangpreempt.go plans a place for
//     every member it needs over these same walks, and evicts nothing
//     unless all of them get one.
//
// The what-if runs on the live node and queue state under a journal
// checkpoint (journal.go: checkpoint, evict, check, reprieve, rollback),
// so nothing is committed until the best node is chosen. On a node, victims are taken
// least important first, most recently started first, and then reprieved
// from the most important down, leaving the fewest that make room. Across
// nodes (as kube-scheduler does): the node whose most important victim is
// least important, then the fewest victims (a gang counts all its placed
// members: it is evicted whole), then the most recently started. The walk
// stops after PreemptCandidates nodes with a plan, or PreemptMaxVisit
// nodes. Victims go back to pending with "preempted by T", their attempt
// counted; they are never lost.

// preemptor plans and makes evictions: priority preemption, reclaim and
// time-sharing's swaps (the policy's TimeSharePlugin ranks). The core
// calls it at named points: mayPreempt when a task blocks (which retry
// list it joins), tryPreempt when a blocked head is retried, evictable
// and victimsOn from gang preemption and reservations. It changes
// nothing but through the core's journal.
type preemptor struct {
	c *Core
}

// PreemptReason says why a task was evicted.
type PreemptReason string

// Preemption reasons (the metrics' label values).
const (
	PreemptPriority PreemptReason = "priority"  // for a more important task
	PreemptReclaim  PreemptReason = "reclaim"   // for a queue under its guarantee
	PreemptGang     PreemptReason = "gang"      // with a member of its gang
	PreemptShare    PreemptReason = "timeshare" // swapped out for a task of a better rank
)

type preemptPlan struct {
	n       *Node
	o       *Option
	victims []*Task
	top     int64 // the most important victim's importance (smaller is better)
	cost    int   // victims, a gang counting all its placed members
	latest  int64 // the latest start among victims (larger is better)
	hasPlan bool
}

func (p *preemptPlan) better(top int64, cost int, latest int64) bool {
	if !p.hasPlan {
		return true
	}
	if top != p.top {
		return top < p.top
	}
	if cost != p.cost {
		return cost < p.cost
	}
	return latest > p.latest
}

func victimStats(vs []*Task) (top int64, cost int, latest int64) {
	top = math.MinInt64
	var gangs []*gang
	for _, v := range vs {
		top = max(top, importance(v))
		if s := startOf(v); s > latest {
			latest = s
		}
		if g := v.gang; inGang(v) {
			seen := false
			for _, x := range gangs {
				seen = seen || x == g
			}
			if !seen {
				gangs = append(gangs, g)
				cost += g.placed
			}
			continue
		}
		cost++
	}
	return
}

// inGang reports whether evicting t evicts other tasks with it (not with
// disruption "member").
func inGang(t *Task) bool { return t.gang != nil && !t.gang.byMember && t.gang.placed > 1 }

// importance orders tasks for preemption, larger first: by priority
// (0 most important), then by priority value.
func importance(t *Task) int64 {
	return int64(3-t.prio)<<32 | int64(uint32(t.value)^0x80000000)
}

// startOf is when t started running, or was placed if not started yet.
func startOf(t *Task) int64 { return t.started }

// preemptMode is what a preemption attempt may do.
type preemptMode struct {
	priority  bool // evict lower-priority tasks
	reclaim   bool // evict borrowers of other queues
	timeshare bool // swap out worse-ranked tasks of its tier or below
	wait      bool // wait for any running task to end (gangreserve.go)
}

// preemptModeOf says what t may evict with option o.
func (pe *preemptor) preemptModeOf(t *Task, o *Option) preemptMode {
	c := pe.c
	if t.noPreempt {
		return preemptMode{}
	}
	return preemptMode{priority: c.cfg.byPriority(t), reclaim: pe.mayReclaim(t, o), timeshare: pe.mayShare(t)}
}

// byPriority reports whether t may evict less important tasks: it is
// urgent or high, or Config.PreemptAllTiers lets every priority do so.
func (cfg *Config) byPriority(t *Task) bool {
	return !t.noPreempt && (t.prio <= 1 || cfg.PreemptAllTiers)
}

// mayShare reports whether pending t may swap out running tasks under the
// time-sharing policy: there is one, and t's rank is not its ceiling.
func (pe *preemptor) mayShare(t *Task) bool {
	c := pe.c
	ts := c.policy.TimeShare
	if ts == nil {
		return false
	}
	if rc, ok := ts.(RankCeiling); ok && ts.Rank(t) >= rc.MaxRank() {
		return false
	}
	return true
}

// mayReclaim reports whether t's queue (the nearest ancestor with a
// guarantee) stays within its guarantee of every guaranteed resource o
// asks for, and o asks for at least one.
func (pe *preemptor) mayReclaim(t *Task, o *Option) bool {
	q := reclaimQueue(t)
	if q == nil {
		return false
	}
	asked := false
	for _, g := range q.guar {
		if o.req[g.dim] == 0 {
			continue
		}
		asked = true
		if q.used[g.dim]+o.req[g.dim] > g.max {
			return false
		}
	}
	return asked
}

// mayPreempt reports whether t may evict anything: it is urgent or high,
// may swap out under time-sharing, or some option may reclaim.
func (pe *preemptor) mayPreempt(t *Task) bool {
	c := pe.c
	if t.noPreempt {
		return false
	}
	if c.cfg.byPriority(t) || pe.mayShare(t) {
		return true
	}
	for oi := range t.cls.opts {
		if pe.mayReclaim(t, &t.cls.opts[oi]) {
			return true
		}
	}
	return false
}

// tryPreempt finds victims for t and, when it finds a plan, evicts them and
// places t. evicted reports whether it evicted anything; done whether t
// needs nothing more (placed, or settled by an eviction's consequences).
func (pe *preemptor) tryPreempt(t *Task) (done, evicted bool) {
	c := pe.c
	w := preemptWalk{sc: c.pl.beginSearch(false, nil), t: t}
	for oi := range t.cls.opts {
		if !pe.preemptOption(&w, &t.cls.opts[oi]) {
			break // the walk's budget is spent
		}
	}
	if !w.plan.hasPlan {
		return false, false
	}
	plan := &w.plan
	for _, v := range plan.victims {
		if v.state == Scheduled || v.state == Running {
			pe.evict(v, t, plan.n)
		}
	}
	if t.state != Pending || t.cq == nil {
		// An eviction's consequences settled t itself (a victim that must
		// not restart failed, and its job failed fast, cancelling t).
		return true, true
	}
	if c.pl.checkNode(w.sc, t, plan.o, plan.n) != nil {
		// Cannot happen: the what-if proved the fit on this exact state.
		return false, true
	}
	c.commit(t, plan.o, plan.n, w.sc.cs.picked)
	return true, true
}

// preemptWalk is one preemption attempt's walk over candidate nodes: the
// best plan so far and the budget spent (PreemptMaxVisit nodes visited,
// PreemptCandidates nodes with a plan).
type preemptWalk struct {
	sc             *searchCtx
	t              *Task
	plan           preemptPlan
	visited, plans int
	// wait: a gang reservation's walk (gangreserve.go): its "victims"
	// are the tasks it waits for, whatever their tier, and none is
	// evicted.
	wait bool
}

// preemptOption walks the nodes where t's option o may evict enough,
// keeping the best plan in w; it reports false when the walk's budget is
// spent (no further option is tried).
func (pe *preemptor) preemptOption(w *preemptWalk, o *Option) bool {
	c := pe.c
	t := w.t
	if st := c.qs.queueCheck(t, o); st.IsUnresolvable() {
		return true // evicting others' work cannot lift its queue's max
	}
	m := pe.preemptModeOf(t, o)
	if w.wait {
		m = preemptMode{wait: true}
	} else if !m.priority && !m.reclaim && !m.timeshare {
		return true
	}
	c.pl.refreshGroups(t, o)
	if len(t.cls.identity) > 0 {
		// Pinned: only the nodes the identity index names.
		term := t.cls.identity[0]
		for _, v := range term.values {
			for _, n := range c.idx.byIdentity[term.key][v] {
				if n.bucket >= 0 && o.hasGroup(n.group) && identityMatch(t.cls, n) {
					pe.preemptOn(w, o, m, n)
				}
			}
		}
		return true
	}
	for _, g := range o.groups {
		if w.sc.dom != nil && !w.sc.dom.holdsGroup(g) {
			continue // a gang's plan in one domain (gangdomain.go)
		}
		for b := g.max; b >= 0; b-- {
			for _, n := range g.buckets[b] {
				if w.visited >= c.cfg.PreemptMaxVisit || w.plans >= c.cfg.PreemptCandidates {
					return false
				}
				w.visited++
				if t.cls.perNode() && !identityMatch(t.cls, n) {
					continue
				}
				pe.preemptOn(w, o, m, n)
			}
		}
	}
	return true
}

// preemptOn finds the victims on n that let o fit, and keeps them as w's
// plan when they beat it.
func (pe *preemptor) preemptOn(w *preemptWalk, o *Option, m preemptMode, n *Node) {
	t := w.t
	if m.wait {
		pe.waitOn(w, o, n)
		return
	}
	if !pe.potentialFits(t, o, n, m) {
		return
	}
	victims, ok := pe.victimsOn(w.sc, t, o, n, m)
	if (!ok || len(victims) == 0) && m.reclaim && m.priority {
		// The reclaim plan spares t's own queue; priority alone may evict
		// its less important work.
		victims, ok = pe.victimsOn(w.sc, t, o, n, preemptMode{priority: true})
	}
	if !ok || len(victims) == 0 {
		return
	}
	w.plans++
	if mp, cost, lt := victimStats(victims); w.plan.better(mp, cost, lt) {
		p := &w.plan
		p.n, p.o, p.hasPlan = n, o, true
		p.victims = append(w.sc.plan[:0], victims...)
		w.sc.plan = p.victims
		p.top, p.cost, p.latest = mp, cost, lt
	}
}

// evict sends v (and the other placed members of its gang) back to pending
// for t.
func (pe *preemptor) evict(v, t *Task, n *Node) {
	c := pe.c
	why := "preempted by " + t.id
	reason := PreemptReclaim
	switch {
	case c.cfg.byPriority(t) && importance(v) < importance(t):
		reason = PreemptPriority
	case c.policy.TimeShare != nil && pe.shareVictim(t, v):
		reason = PreemptShare
	}
	g := v.gang
	if !inGang(v) {
		c.stats.Preempted++
		c.out.Preemptions = append(c.out.Preemptions, Preemption{Victim: v.id, By: t.id, Node: n.name, Reason: reason})
		c.requeue(v, Preempted, why)
		return
	}
	whole := why + " (gang of job " + g.job.id + " evicted whole)"
	g.restart = true
	for _, m := range g.members {
		if m.state != Scheduled && m.state != Running {
			continue
		}
		r := reason
		if m != v {
			r = PreemptGang
		}
		c.stats.Preempted++
		c.out.Preemptions = append(c.out.Preemptions, Preemption{Victim: m.id, By: t.id, Node: m.node.name, Reason: r})
		c.requeue(m, Preempted, whole)
	}
	g.restart = false
	g.started = false
	g.since = c.now
	g.reason = whole // what its members show until the next try
	g.lastOf = 0
}

// potentialFits reports whether o could fit on n if every task m may evict
// left (a bound: the victims' own checks decide).
func (pe *preemptor) potentialFits(t *Task, o *Option, n *Node, m preemptMode) bool {
	c := pe.c
	from := int(t.prio) + 1
	switch {
	case m.reclaim:
		from = 0
	case m.timeshare, m.priority:
		from = int(t.prio) // of its own priority: a smaller value, a worse rank
	}
	nd := c.dims.Len()
	for i := 0; i < nd; i++ {
		avail := n.capacity[i] - n.alloc[i]
		for p := from; p < 4; p++ {
			avail += n.allocByPrio[p][i]
		}
		if o.req[i] > avail {
			return false
		}
	}
	return true
}

// siblingBelow returns the ancestor of v's leaf just below the lowest
// common ancestor of the leaves of t and v (nil when they share a leaf).
func siblingBelow(t, v *Task) *queueNode {
	if t.leaf == v.leaf {
		return nil
	}
	for b := v.leaf; b.parent != nil; b = b.parent {
		for a := t.leaf; a != nil; a = a.parent {
			if a == b.parent {
				return b
			}
		}
	}
	return nil
}

// borrowing reports whether q holds (net of the what-if's evictions) more
// than its guarantee of dim d.
func borrowing(q *queueNode, d int) bool {
	held := q.used[d]
	for _, g := range q.guar {
		if g.dim == d {
			return held > g.max
		}
	}
	return held > 0
}

// priorityVictim reports whether t may evict v for priority: v, and every
// other placed member of its gang (evicted with it), is less important.
func (pe *preemptor) priorityVictim(t, v *Task) bool {
	c := pe.c
	if !c.cfg.byPriority(t) || importance(v) >= importance(t) {
		return false
	}
	if inGang(v) {
		for _, m := range v.gang.members {
			if (m.state == Scheduled || m.state == Running) && importance(m) >= importance(t) {
				return false
			}
		}
	}
	return true
}

// shareVictim reports whether t may swap v out under the time-sharing
// policy: v, and every other placed member of its gang (evicted with it),
// is of t's tier or below, ranks worse than t, and has run
// TimeShareMinRun.
func (pe *preemptor) shareVictim(t, v *Task) bool {
	c := pe.c
	ts := c.policy.TimeShare
	if ts == nil {
		return false
	}
	return pe.shareVictimOf(ts.Rank(t), t, v)
}

// shareVictimOf is shareVictim with t's rank given (a walk over many
// candidates ranks t once).
func (pe *preemptor) shareVictimOf(rank int64, t, v *Task) bool {
	c := pe.c
	ts := c.policy.TimeShare
	ok := func(m *Task) bool {
		return m.prio >= t.prio && ts.Rank(m) > rank && c.now-startOf(m) >= int64(c.cfg.TimeShareMinRun)
	}
	if !ok(v) {
		return false
	}
	if inGang(v) {
		for _, m := range v.gang.members {
			if (m.state == Scheduled || m.state == Running) && !ok(m) {
				return false
			}
		}
	}
	return true
}

// reclaimQueue is the queue whose guarantee t reclaims for: the nearest
// with a guarantee at or above t's leaf.
func reclaimQueue(t *Task) *queueNode {
	q := t.leaf
	for q != nil && len(q.guar) == 0 {
		q = q.parent
	}
	return q
}

// inSubtree reports whether leaf is q or below it.
func inSubtree(leaf, q *queueNode) bool {
	for x := leaf; x != nil; x = x.parent {
		if x == q {
			return true
		}
	}
	return false
}

// reclaimVictim reports whether t may take back from v: v's side is
// borrowing a resource that both ask for.
func (pe *preemptor) reclaimVictim(t *Task, o *Option, v *Task) bool {
	c := pe.c
	b := siblingBelow(t, v)
	if b == nil {
		return false
	}
	vo := &v.cls.opts[optIndex(v.chosen)]
	for i := 0; i < c.dims.Len(); i++ {
		if o.req[i] > 0 && vo.req[i] > 0 && borrowing(b, i) {
			return true
		}
	}
	return false
}

// evictedWith lists what evicting v takes away: v and the other placed
// members of its gang that the plan does not evict already (taken, on the
// node, or ghosts, gang members elsewhere evicted with an earlier victim).
func evictedWith(sc *searchCtx, v *Task, taken, ghosts []*Task) []*Task {
	xs := append(sc.evicted[:0], v)
	if inGang(v) {
		for _, m := range v.gang.members {
			if m != v && (m.state == Scheduled || m.state == Running) && !slices.Contains(taken, m) && !slices.Contains(ghosts, m) &&
				!m.whatIfGone { // not gone already (a gang plan's earlier members took it)
				xs = append(xs, m)
			}
		}
	}
	sc.evicted = xs
	return xs
}

// keepsGuarantees reports whether evicting xs, on top of the plan's
// evictions so far (the what-if's on the node since cp, and ghosts not
// among them),
// and placing t with o leave every queue with a guarantee holding, of
// each resource it guarantees, no less than the smaller of what it holds
// now and its guarantee: evictions never eat into guaranteed usage. With
// that, no preemption undoes another: the guaranteed usage (summed over
// queues and resources) never drops, a reclaim raises it (its victims are
// outside the queue it reclaims for), and a priority preemption keeps it
// and places a more important task in the room of less important ones.
// Without it, tasks evicted each other in turn for ever: an urgent task
// evicted a queue's work down below its guarantee, and that work reclaimed
// its place back.
func (pe *preemptor) keepsGuarantees(cp checkpoint, t *Task, o *Option, xs, ghosts, taken []*Task) bool {
	c := pe.c
	v := xs[0]
	for _, x := range xs {
		for q := x.leaf; q != nil; q = q.parent {
			for _, g := range q.guar {
				var out int64
				for _, y := range xs {
					if inSubtree(y.leaf, q) {
						out += y.cls.opts[optIndex(y.chosen)].req[g.dim]
					}
				}
				if out == 0 {
					continue
				}
				for _, y := range ghosts {
					if y != v && !slices.Contains(taken, y) && inSubtree(y.leaf, q) {
						out += y.cls.opts[optIndex(y.chosen)].req[g.dim]
					}
				}
				after := q.used[g.dim] - out
				if inSubtree(t.leaf, q) {
					after += o.req[g.dim]
				}
				if after < min(c.jr.usedAt(cp, q, g.dim), g.max) {
					return false
				}
			}
		}
	}
	return true
}

// victimsOn returns the smallest set of victims on n that lets o fit, found
// by evicting candidates least important first and then reprieving from the
// most important down. A candidate's eligibility is judged as it is taken,
// against what the victims before it already freed. The what-if runs under
// a checkpoint that is rolled back before returning.
func (pe *preemptor) victimsOn(sc *searchCtx, t *Task, o *Option, n *Node, m preemptMode) ([]*Task, bool) {
	c := pe.c
	cands := sc.victims[:0]
	var rank int64
	shareOnly := m.timeshare && !m.priority && !m.reclaim
	if m.timeshare {
		rank = c.policy.TimeShare.Rank(t)
	}
	for _, v := range n.tasks {
		if !pe.evictable(v) || !(m.priority && importance(v) < importance(t) || m.reclaim || m.timeshare && v.prio >= t.prio) {
			continue
		}
		if v.whatIfGone || sc.gangBase != nil && v.gang != nil && v.gang == sc.gangOwn {
			continue // a gang's plan: its own task, or taken already
		}
		if shareOnly && !pe.shareVictimOf(rank, t, v) {
			continue // the only reason it could go does not hold: no what-if
		}
		if !(inGang(v) && pe.gangProtected(v)) {
			cands = append(cands, v)
		}
	}
	// Least important first, then most recently started, then newest (a
	// total order: any sort gives this one).
	slices.SortFunc(cands, victimOrder)
	sc.victims = cands
	if len(cands) == 0 {
		return nil, false
	}
	taken := cands[:0] // the evicted, in order (reuses cands' front)
	sc.takenAt = sc.takenAt[:0]
	fits := false
	cp := c.jr.checkpoint()
	var gq *queueNode
	if m.reclaim {
		gq = reclaimQueue(t)
	}
	ghosts := sc.ghosts[:0]
	base := cp // what guarantees are kept from: the state before the plan
	if sc.gangBase != nil {
		base = *sc.gangBase
	}
	for _, v := range cands {
		if !(m.priority && pe.priorityVictim(t, v) || m.reclaim && pe.reclaimVictim(t, o, v) || m.timeshare && pe.shareVictimOf(rank, t, v)) {
			continue
		}
		xs := evictedWith(sc, v, taken, ghosts)
		if slices.ContainsFunc(xs, func(x *Task) bool { return c.cons.affinityNeeds(t, x) }) {
			continue
		}
		if gq != nil && slices.ContainsFunc(xs, func(x *Task) bool { return inSubtree(x.leaf, gq) }) {
			// A reclaim takes nothing from the queue it reclaims for
			// (that gives the queue nothing, and the victim, under
			// the same guarantee, could reclaim its place back).
			continue
		}
		if !pe.keepsGuarantees(base, t, o, xs, ghosts, taken) {
			continue
		}
		ghosts = append(ghosts, xs[1:]...)
		sc.takenAt = append(sc.takenAt, c.jr.whatIfEvict(v))
		taken = append(taken, v)
		st := c.pl.checkNode(sc, t, o, n)
		if st == nil {
			fits = true
			break
		}
		if st.IsUnresolvable() {
			break // no further eviction helps on this node
		}
	}
	sc.ghosts = ghosts[:0]
	if !fits {
		c.jr.rollback(cp)
		return nil, false
	}
	// Reprieve: give each victim back, the most important first, unless
	// t no longer fits without it. The last taken is kept without a
	// check: without it, the state is the one checked just before it was
	// taken (or, for the first, the state t fits nowhere in: tryPreempt
	// runs after an unfit search), where t did not fit.
	victims := append(sc.kept[:0], taken[len(taken)-1])
	for i := len(taken) - 2; i >= 0; i-- {
		c.jr.whatIfSet(sc.takenAt[i], false)
		if c.pl.checkNode(sc, t, o, n) != nil {
			c.jr.whatIfSet(sc.takenAt[i], true)
			victims = append(victims, taken[i])
		}
	}
	c.jr.rollback(cp)
	sc.kept = victims
	return victims, true
}

// evictable reports whether v may be evicted at all: it is preemptible and
// has run PreemptMinRuntime.
func (pe *preemptor) evictable(v *Task) bool {
	c := pe.c
	return v.preemptible && c.now-startOf(v) >= int64(c.cfg.PreemptMinRuntime)
}

// gangProtected reports whether a placed member of v's gang may not be
// evicted: evicting v evicts the whole gang, so one member that is not
// preemptible, or has not run PreemptMinRuntime, protects them all.
func (pe *preemptor) gangProtected(v *Task) bool {
	for _, m := range v.gang.members {
		if (m.state == Scheduled || m.state == Running) && !pe.evictable(m) {
			return true
		}
	}
	return false
}

// victimOrder is victimBefore as a comparison.
func victimOrder(a, b *Task) int {
	switch {
	case victimBefore(a, b):
		return -1
	case victimBefore(b, a):
		return 1
	}
	return 0
}

// victimBefore orders a node's candidates: least important first
// (importance), then tasks outside a placed gang (a gang is evicted
// whole), then the most recently started, then the newest.
func victimBefore(a, b *Task) bool {
	if ia, ib := importance(a), importance(b); ia != ib {
		return ia < ib
	}
	if ga, gb := inGang(a), inGang(b); ga != gb {
		return gb
	}
	sa, sb := startOf(a), startOf(b)
	if sa != sb {
		return sa > sb
	}
	return a.seq > b.seq
}
