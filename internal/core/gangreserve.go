package core

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/hetsched/hetsched/internal/resource"
)

// Gang reservations: a gang that could start only if several nodes freed
// room at the same moment waits for ever behind a stream of small tasks
// (each freed device is taken again at once). Once a waiting gang has
// waited Config.GangReserveAfter (its tries failing, its preemption plans
// finding nothing it may evict), it gets a reservation, as Slurm's
// backfill gives the top pending job one:
//
//   - The plan is a gang preemption plan (gangpreempt.go) whose "victims"
//     are the running tasks it waits for: each member it needs gets, in
//     submission order, a free fit or else the node where the tasks it
//     would have to wait for end earliest (their expected end: placement
//     plus the least of their timeout and their expected runtime), the
//     fewest of them first; the members share one domain when the gang
//     requires one. The reservation's expected start is the latest such
//     end. Nodes held by another reservation are not used.
//   - Each node of the plan is held (gangHold): a task of another gang
//     may take room on it only if the members planned there still fit
//     once the tasks waited for end (it uses the node's slack), if it is
//     more urgent than the gang (it could preempt for the room anyway),
//     or if it ends before the expected start: its timeout, else its
//     declared estimate (Task.duration), is within the time left
//     (backfill). A task with neither does not backfill: a guess could
//     delay the gang without bound. A task that overruns its declared
//     estimate delays the gang by as much.
//   - The gang's tries prefer its held nodes (gangAffinity.bonus), so it
//     starts there once the tasks waited for have ended.
//   - A reservation ends when the gang starts or stops waiting, when a
//     held node leaves the schedulable set, when its holds no longer add
//     up (a more urgent task took the room), or when every task it waited
//     for ended and a try still failed (device-level fit the vectors did
//     not see); the gang may get another at once (it waited long enough).
//     The held nodes' blocked classes are woken when it ends.
//
// At most Config.GangReservations reservations are held at once, given to
// the due gangs most urgent first, then longest waiting; one plan per
// schedule call. A reservation is not taken back for a more urgent gang
// that becomes due later: it waits for the next free slot (Slurm plans
// again at every backfill cycle).

// gangReservation is one gang's reservation.
type gangReservation struct {
	g     *gang
	prio  int8  // the gang's tier: more urgent work is not held back
	at    int64 // when it was made
	start int64 // its expected start: the latest expected end of the tasks it waits for
	holds []*gangHold
	waits int     // tasks waited for, over all its nodes
	st    *Status // what a held-back task's check says
}

// gangHold is a reservation's hold on one node.
type gangHold struct {
	r    *gangReservation
	n    *Node
	need resource.Vector // what the members planned on n ask, in all
	wait []*Task         // the tasks on n it waits for
	// later is freeingLater's answer, made at laterAt (laterOK).
	later   resource.Vector
	laterAt holdStamp
	laterOK bool
}

// holdStamp is when a hold's accounting was computed: it stands while no
// capacity frees (capSeq), nothing is placed and no task on a held node
// starts (gangReservations.epoch).
type holdStamp struct{ capSeq, placed, epoch uint64 }

func (gs *gangs) holdStamp() holdStamp {
	return holdStamp{gs.c.capSeq, gs.c.stats.Placed, gs.gr.epoch}
}

// gangReservations holds the core's reservations (gangs.gr).
type gangReservations struct {
	active  []*gangReservation
	scratch []*gangReservation // holdingFrom's
	// epoch counts what changes a hold's accounting besides capacity
	// and placements: a task on a held node starting (holdStamp).
	epoch uint64
	// room is heldRoom over every active reservation, made at roomAt
	// (roomOK); a reservation made or ended drops it.
	room   resource.Vector
	roomAt holdStamp
	roomOK bool
}

// expectedEnd is when running task v is expected to end: its placement
// (or start) plus the least of its timeout and its runtime: the one it
// declares, else the one the core expects (learn.go).
func (gs *gangs) expectedEnd(v *Task) int64 {
	c := gs.c
	d := v.duration
	if d <= 0 {
		d = int64(c.lr.expectedOn(v, &v.cls.opts[optIndex(v.chosen)], v.node))
	}
	if v.timeout > 0 {
		d = min(d, v.timeout)
	}
	return startOf(v) + d
}

// declaredRuntime is the least of t's timeout and declared duration, 0
// when it declares neither.
func declaredRuntime(t *Task) int64 {
	switch {
	case t.timeout > 0 && t.duration > 0:
		return min(t.timeout, t.duration)
	case t.timeout > 0:
		return t.timeout
	}
	return max(t.duration, 0)
}

// waitOn is preemptOn in a reservation plan's walk: the tasks on n that o
// must wait for, those ending first taken first, until o fits; the plan
// is kept in w when it starts earlier (then waits for fewer tasks) than
// w's.
func (pe *preemptor) waitOn(w *preemptWalk, o *Option, n *Node) {
	c := pe.c
	t, sc := w.t, w.sc
	if h := n.hold; h != nil && h.r.g != t.gang {
		return // held for another gang
	}
	nd := c.dims.Len()
	for d := 0; d < nd; d++ {
		if o.req[d] > n.capacity[d] {
			return
		}
	}
	cands := sc.victims[:0]
	for _, v := range n.tasks {
		if v.gang != nil && v.gang == t.gang || v.whatIfGone { // its own gang, or an earlier member's wait
			continue
		}
		cands = append(cands, v)
	}
	ends := func(a, b *Task) int {
		return cmp.Or(cmp.Compare(c.gs.expectedEnd(a), c.gs.expectedEnd(b)), cmp.Compare(a.seq, b.seq))
	}
	slices.SortFunc(cands, ends)
	sc.victims = cands
	cp := c.jr.checkpoint()
	end, taken, fits := c.now, 0, false
	for {
		st := c.pl.checkNode(sc, t, o, n)
		if st == nil {
			fits = true
			break
		}
		if st.IsUnresolvable() || taken == len(cands) {
			break
		}
		v := cands[taken]
		c.jr.whatIfEvict(v)
		end = max(end, c.gs.expectedEnd(v))
		taken++
	}
	c.jr.rollback(cp)
	if !fits {
		return
	}
	w.plans++
	if w.plan.better(end, taken, 0) {
		p := &w.plan
		p.n, p.o, p.hasPlan = n, o, true
		p.victims = append(w.sc.plan[:0], cands[:taken]...)
		w.sc.plan = p.victims
		p.top, p.cost, p.latest = end, taken, 0
	}
}

// filter is a held node's check of t with o (checkNode): nil, or the
// reservation's status when t may not take that room now.
func (gr *gangReservations) filter(c *Core, sc *searchCtx, t *Task, o *Option, n *Node) *Status {
	h := n.hold
	r := h.r
	if t.gang != nil && t.gang == r.g {
		return nil
	}
	if sc.reserving {
		return r.st // another gang's reservation plan: never a held node
	}
	if t.prio < r.prio || c.gs.backfills(t, r.start) {
		return nil
	}
	if !h.fitsWith(c, o) {
		return r.st
	}
	return nil
}

// fitsWith reports whether the members planned on h's node fit once the
// tasks h waits for, and those backfilled since it was made, have ended,
// with o placed there too (nil: as it is).
func (h *gangHold) fitsWith(c *Core, o *Option) bool {
	n := h.n
	var free resource.Vector
	nd := c.dims.Len()
	for d := 0; d < nd; d++ {
		free[d] = n.capacity[d] - n.alloc[d]
		if o != nil {
			free[d] -= o.req[d]
		}
	}
	later := h.freeingLater(c) // what-if evictions are free already (n.alloc)
	free.Add(&later)
	for d := 0; d < nd; d++ {
		if free[d] < h.need[d] {
			return false
		}
	}
	return true
}

// holdingFrom lists the reservations that keep room from g's members:
// other gangs', of g's tier or above, that no ready member of g ends in
// time to backfill (the core's scratch: valid until the next call).
func (gr *gangReservations) holdingFrom(c *Core, g *gang) []*gangReservation {
	out := gr.scratch[:0]
	if len(gr.active) == 0 {
		return out
	}
	p := gangPrio(g)
	for _, r := range gr.active {
		if r.g == g || p < r.prio || slices.ContainsFunc(g.ready, func(t *Task) bool { return c.gs.backfills(t, r.start) }) {
			continue
		}
		out = append(out, r)
	}
	gr.scratch = out
	return out
}

// heldRoom is, per resource, the free room the reservations rs keep (a
// bound gangMayFit takes off the free room): on each held node, the free
// room less what the members could leave to others (what the tasks it
// waits for, and those backfilled, will free beyond what the members
// need), never below zero.
func (gr *gangReservations) heldRoom(c *Core, rs []*gangReservation) resource.Vector {
	// Most often every reservation holds from every gang: that answer is
	// kept while nothing changed (as freeingLater's).
	all := len(rs) == len(gr.active) && !c.jr.journaling()
	if all && gr.roomOK && gr.roomAt == c.gs.holdStamp() {
		return gr.room
	}
	var held resource.Vector
	nd := c.dims.Len()
	for _, r := range rs {
		for _, h := range r.holds {
			later := h.freeingLater(c)
			for d := 0; d < nd; d++ {
				free := h.n.capacity[d] - h.n.alloc[d]
				if keep := min(free, h.need[d]-later[d]); keep > 0 {
					held[d] += keep
				}
			}
		}
	}
	if all {
		gr.room, gr.roomAt, gr.roomOK = held, c.gs.holdStamp(), true
	}
	return held
}

// heldSlots counts the nodes of grp in buckets from nb on (gangSlots'
// candidates for a member with o) that the reservations rs hold and where
// o does not fit beside the members planned there.
func heldSlots(c *Core, rs []*gangReservation, o *Option, grp *group, nb int) int {
	n := 0
	for _, r := range rs {
		for _, h := range r.holds {
			if h.n.group == grp && int(h.n.bucket) >= nb && !h.fitsWith(c, o) {
				n++
			}
		}
	}
	return n
}

// freeingLater is what the tasks on h's node that h waits for, and those
// backfilled since it was made, hold: room that frees before the
// reservation's expected start.
func (h *gangHold) freeingLater(c *Core) resource.Vector {
	// Outside a what-if the answer stands as long as its stamp: the
	// bounds of every waiting gang read it at each change.
	cache := !c.jr.journaling()
	if cache && h.laterOK && h.laterAt == c.gs.holdStamp() {
		return h.later
	}
	var v resource.Vector
	for _, x := range h.n.tasks {
		if !x.whatIfGone && h.frees(c, x) {
			v.Add(&x.cls.opts[optIndex(x.chosen)].req)
		}
	}
	if cache {
		h.later, h.laterAt, h.laterOK = v, c.gs.holdStamp(), true
	}
	return v
}

// frees reports whether x, placed on h's node, frees its room before the
// reservation's expected start: a task h waits for, or one backfilled
// since (of the gang's tier or below, ending by then by what it declares).
func (h *gangHold) frees(c *Core, x *Task) bool {
	r := h.r
	return slices.Contains(h.wait, x) || x.prio >= r.prio && x.started >= r.at && c.gs.backfillsFrom(x, startOf(x), r.start)
}

// backfills reports whether t, placed now, ends by start (its timeout,
// else its declared duration, fits in the time left).
func (gs *gangs) backfills(t *Task, start int64) bool {
	c := gs.c
	return gs.backfillsFrom(t, c.now, start)
}

// backfillsFrom is backfills for t placed at from. It reads what t
// declares, as given, never what the core learned since of its class: a
// backfill's promise is not revised when a later estimate moves, or a
// hold would stop adding up under it.
func (gs *gangs) backfillsFrom(t *Task, from, start int64) bool {
	d := declaredRuntime(t)
	return d > 0 && from+d <= start
}

// pass ends placeGangs: it drops the reservations that no longer hold and
// plans one for the most urgent due gang while a slot is free.
func (gr *gangReservations) pass(c *Core) {
	gr.sweep(c)
	if c.cfg.GangReserveAfter <= 0 || len(gr.active) >= c.cfg.GangReservations {
		return
	}
	var best *gang
	for _, g := range c.gs.wait {
		if gr.due(c, g) && (best == nil || gangBefore(g, best)) {
			best = g
		}
	}
	if best != nil {
		gr.reserve(c, best)
	}
}

// sweep drops the reservations that no longer hold (stale); it ends every
// schedule call, placeGangs' or not, so that none outlives its reason.
func (gr *gangReservations) sweep(c *Core) {
	if len(gr.active) == 0 {
		return
	}
	keep := gr.active[:0]
	for _, r := range gr.active {
		if gr.stale(c, r) {
			gr.release(c, r)
			continue
		}
		keep = append(keep, r)
	}
	clear(gr.active[len(keep):])
	gr.active = keep
}

// due reports whether g may get a reservation now: it waits, unstarted,
// with enough members ready, past GangReserveAfter, and no plan for it
// failed since capacity last changed.
func (gr *gangReservations) due(c *Core, g *gang) bool {
	return gr.eligible(c, g) && c.now >= g.since+int64(c.cfg.GangReserveAfter)
}

// eligible is due but for the time: the reservation could be planned.
func (gr *gangReservations) eligible(c *Core, g *gang) bool {
	return g.resv == nil && !g.started && len(g.ready) > 0 && len(g.ready) >= g.min-g.placed-g.done &&
		g.resvTried != c.capSeq
}

// gangBefore orders due gangs: the more urgent first, then the one waiting
// longest.
func gangBefore(a, b *gang) bool {
	if pa, pb := gangPrio(a), gangPrio(b); pa != pb {
		return pa < pb
	}
	if a.since != b.since {
		return a.since < b.since
	}
	return a.job.id < b.job.id
}

// gangPrio is a waiting gang's tier: its most urgent ready member's.
func gangPrio(g *gang) int8 {
	p := int8(3)
	for _, t := range g.ready {
		p = min(p, t.prio)
	}
	return p
}

// next is the earliest time a waiting gang becomes due (NextWakeup).
func (gr *gangReservations) next(c *Core) (int64, bool) {
	if c.cfg.GangReserveAfter <= 0 || len(gr.active) >= c.cfg.GangReservations {
		return 0, false
	}
	var best int64
	ok := false
	for _, g := range c.gs.wait {
		if !gr.eligible(c, g) {
			continue
		}
		if d := g.since + int64(c.cfg.GangReserveAfter); !ok || d < best {
			best, ok = d, true
		}
	}
	return best, ok
}

// reserve plans g's reservation and, when every member it needs has a
// place, holds the plan's nodes for it.
func (gr *gangReservations) reserve(c *Core, g *gang) {
	g.resvTried = c.capSeq
	need := g.min - g.placed - g.done
	if need <= 0 || len(g.ready) < need {
		return
	}
	gp := &c.gs.gp
	gp.wait = true
	ok := gp.plan(c, g, need)
	gp.wait = false
	if !ok {
		return
	}
	r := &gangReservation{g: g, prio: gangPrio(g), at: c.now, start: c.now}
	hold := func(n *Node) *gangHold {
		for _, h := range r.holds {
			if h.n == n {
				return h
			}
		}
		h := &gangHold{r: r, n: n}
		r.holds = append(r.holds, h)
		return h
	}
	for _, p := range gp.places {
		h := hold(p.n)
		h.need.Add(&p.o.req)
	}
	for _, v := range gp.victims {
		h := hold(v.v.node)
		h.wait = append(h.wait, v.v)
		r.start = max(r.start, c.gs.expectedEnd(v.v))
		r.waits++
	}
	for _, h := range r.holds {
		h.n.hold = h
	}
	r.st = NewUnschedulable(fmt.Sprintf("held for the gang of job %s (reserved: it starts there once %d running task(s) end; only work ending by then, or more urgent, may use the room)", g.job.id, r.waits))
	g.resv = r
	gr.active = append(gr.active, r)
	gr.roomOK = false
	c.stats.GangReserved++
}

// stale reports whether r no longer holds: its gang started or stopped
// waiting, a held node left the schedulable set, the held room was taken
// (a more urgent task), or every task it waited for, and every backfill,
// ended and the gang's try since still failed (it did not fit its held
// room).
func (gr *gangReservations) stale(c *Core, r *gangReservation) bool {
	g := r.g
	if !g.waiting || g.started || len(g.ready) == 0 {
		return true
	}
	waiting := false
	for _, h := range r.holds {
		if h.n.bucket < 0 || h.n.group == nil || h.n.hold != h || !h.fitsWith(c, nil) {
			return true
		}
		waiting = waiting || slices.ContainsFunc(h.n.tasks, func(x *Task) bool { return h.frees(c, x) })
	}
	return !waiting && g.tried == c.capSeq && !g.dirty
}

// release ends r: its nodes are no longer held, and what waited on them
// may try again.
func (gr *gangReservations) release(c *Core, r *gangReservation) {
	for _, h := range r.holds {
		if h.n.hold == h {
			h.n.hold = nil
			c.wk.wake(h.n)
			if grp := h.n.group; grp != nil && h.n.bucket >= 0 {
				// Those it could not wake waited on the node's group,
				// perhaps for the hold: they try again, so that their
				// reason no longer names it.
				for _, ref := range grp.blocked {
					if ref.q.blocked && ref.q.gen == ref.gen {
						c.wk.unblock(ref.q)
					}
				}
				clear(grp.blocked)
				grp.blocked = grp.blocked[:0]
			}
		}
	}
	gr.roomOK = false
	c.retrySoon() // the classes woken try at the next Tick
	if r.g.resv == r {
		r.g.resv = nil
	}
	// Its own wakes are no new capacity: the gang is planned for again
	// once capacity changes otherwise (else a hold its try cannot use
	// would be made and dropped at every call).
	r.g.resvTried = c.capSeq
}

// describe says what r holds, for its gang's members' reason.
func (r *gangReservation) describe() string {
	return fmt.Sprintf("; reserved after waiting %s: %d node(s) held for it until %d running task(s) end (expected %s after the reservation)",
		durString(r.at-r.g.since), len(r.holds), r.waits, time.Duration(r.start-r.at).Round(time.Second))
}
