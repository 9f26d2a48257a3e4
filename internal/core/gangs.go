package core

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/hetsched/hetsched/internal/resource"
)

// gangs places the jobs' gangs (jobs.go says how): it lists the gangs
// with pending members, tries them all or nothing through the core's
// search and journal, reserves room for the one waiting longest
// (gangreserve.go), plans their starts over evictions (gangpreempt.go),
// and reports their members' shared reason. The core calls it at named
// points: gangEnqueue and gangUnqueue when a member becomes pending or
// stops waiting, placeGangs in each schedule pass, gangMemberLeft when a
// placed member leaves, gangTimeouts at each Tick, gangReport at
// TakeOutput.
type gangs struct {
	c    *Core
	wait []*gang // gangs with pending members
	// told lists the gangs whose members' reason changed since the last
	// TakeOutput, which reports each member (gangReport).
	told []*gang
	// tryGang's scratch: the ready members it tries, and a class's search
	// state saved around each member's try (reused).
	ready    []*Task
	saved    searchState
	gp       gangPreemption   // gang preemption's plans (gangpreempt.go)
	gr       gangReservations // gang reservations (gangreserve.go)
	slotsBuf []modelSlots     // gangSlots' scratch
}

// gangMemberLeft accounts for a placed member leaving its placement; one
// that did not succeed restarts the gang: the other placed members go back
// to pending.
func (gs *gangs) gangMemberLeft(t *Task, to State, reason string) {
	g := t.gang
	g.placed--
	if to == Succeeded || g.restart || g.byMember && to == Preempted {
		return // a member preempted alone (disruption "member") leaves the others running
	}
	why := "gang restart: member " + t.id + " " + to.String()
	if reason != "" {
		why += ": " + reason
	}
	gs.gangRestart(g, why)
}

// gangCheckReachable fails the gang's unfinished members once too many
// ended without success for MinMember ever to run (or have run) together.
func (gs *gangs) gangCheckReachable(g *gang) {
	c := gs.c
	if g.failing {
		return
	}
	total := len(g.members) + len(g.want)
	if total-g.failed >= g.min {
		return
	}
	why := fmt.Sprintf("gang of job %s can no longer reach minMember %d: %d of its %d members ended without success", g.job.id, g.min, g.failed, total)
	g.failing = true
	for _, m := range append([]*Task(nil), g.members...) {
		if !m.state.Terminal() {
			c.finish(m, Failed, why)
		}
	}
	g.failing = false
}

// gangEnqueue makes a pending member wait for its gang.
func (gs *gangs) gangEnqueue(t *Task) {
	c := gs.c
	g := t.gang
	t.gready = true
	g.ready = append(g.ready, t)
	g.dirty = true
	g.reason = "" // a verdict on the ready list before t joined
	if !g.waiting {
		g.waiting = true
		g.since = c.now
		gs.wait = append(gs.wait, g)
	}
}

// gangWaitReason is the one reason every ready member of g shows: the
// gang's own verdict, else how many members are there to start it. It
// reads gang-level state only.
func (gs *gangs) gangWaitReason(g *gang) string {
	if g.reason != "" {
		if g.resv != nil {
			return g.reason + g.resv.describe()
		}
		return g.reason
	}
	return fmt.Sprintf("waiting for its gang: %d of %d members pending, placed or done (minMember %d)", g.placed+g.done+len(g.ready), len(g.members)+len(g.want), g.min)
}

// gangShow sets the reason every ready member of g shows (Task.Reason:
// one for all of them, so that they say the same at the same moment),
// when its inputs changed.
func (gs *gangs) gangShow(g *gang) {
	n := g.placed + g.done + len(g.ready)
	if g.shown != "" && n == g.shownN && g.reason == g.shownWhy && g.resv == g.shownResv {
		return
	}
	r := gs.gangWaitReason(g)
	if r != g.shown && !g.told {
		g.told = true
		gs.told = append(gs.told, g)
	}
	g.shown, g.shownWhy, g.shownN, g.shownResv = r, g.reason, n, g.resv
}

// gangReport adds to the output, for each gang whose members' reason
// changed since the last TakeOutput, one UnschedulableClass per waiting
// member: the reason changed for all of them, not only for those a
// transition names.
func (gs *gangs) gangReport() {
	c := gs.c
	for i, g := range gs.told {
		g.told = false
		gs.told[i] = nil
		for _, t := range g.ready {
			c.out.Unschedulable = append(c.out.Unschedulable, UnschedulableClass{Sample: t.id, Count: len(g.ready), Reason: g.shown})
		}
	}
	gs.told = gs.told[:0]
}

// showGangReasons ends a schedule pass: the waiting gangs' members show
// their gang's reason as it is now.
func (gs *gangs) showGangReasons() {
	for _, g := range gs.wait {
		gs.gangShow(g)
	}
}

// gangUnqueue takes a ready member out of its gang's ready list.
func (gs *gangs) gangUnqueue(t *Task) {
	g := t.gang
	t.gready = false
	for i, m := range g.ready {
		if m == t {
			g.ready = append(g.ready[:i], g.ready[i+1:]...)
			break
		}
	}
	g.reason = "" // a verdict on the ready list t was part of
}

// placeGangs tries the waiting gangs that could start now. Gangs left
// untried by the per-call limits, or whose try ran out of search budget,
// get a retry soon (as deferred class queues do).
func (gs *gangs) placeGangs() {
	c := gs.c
	waiting := gs.wait
	// Gangs that begin waiting during the loop (a gang preemption's
	// victims) gather in a list of their own, kept after the loop.
	gs.wait = nil
	keep := waiting[:0]
	tries, preempts := 0, 0
	for _, g := range waiting {
		if len(g.ready) > 0 {
			// A member joined or left since: the gang may be out of reach.
			gs.gangCheckReachable(g)
		}
		if len(g.ready) == 0 {
			g.waiting = false
			continue
		}
		keep = append(keep, g)
		if g.started && g.placed+g.done < g.min && !g.byMember {
			// Started, but its placements were not all restored: start
			// over rather than hold part of it.
			gs.gangRestart(g, "gang restart: members lost their placements")
		}
		if g.placed+g.done+len(g.ready) < g.min || (!g.dirty && g.tried == c.capSeq) {
			continue
		}
		if g.reason != "" && g.reason == g.tryReason && !gs.gangMayFit(g) {
			// Its last try failed, and the schedulable nodes could not
			// hold the members it needs now (gangMayFit): no try (it
			// keeps that try's verdict) until capacity changes again.
			g.dirty = false
			g.tried = c.capSeq
			continue
		}
		if tries >= maxGangTries || c.callPlaced >= c.cfg.MaxPlacementsPerCall {
			c.retrySoon()
			continue
		}
		tries++
		gs.tryGang(g)
		if g.placed+g.done < g.min && preempts < maxGangPreempts && slices.ContainsFunc(g.ready, c.pe.mayPreempt) {
			preempts++
			gs.gp.start(c, g) // over evictions (gangpreempt.go)
		}
	}
	for i := len(keep); i < len(waiting); i++ {
		waiting[i] = nil
	}
	gs.wait = append(keep, gs.wait...)
	gs.gr.pass(c) // reservations for gangs that waited long (gangreserve.go)
}

// gangMayFit reports whether the schedulable nodes could hold the members
// g still needs to start (as many as it lacks of MinMember): their free
// capacity all together, each member asking at least the least any ready
// member's options ask of each resource, and the nodes with room for one
// member (gangSlots). A bound: false means no try could start it.
// It reads g.least: call it only while the ready list is the one its
// last failed try had.
func (gs *gangs) gangMayFit(g *gang) bool {
	c := gs.c
	k := int64(g.min - g.placed - g.done)
	if k <= 0 || len(g.ready) == 0 {
		return true
	}
	nd := c.dims.Len()
	for d := 0; d < nd; d++ {
		if l := g.least[d]; l > 0 && k*l > c.idx.free[d] {
			return false
		}
	}
	// Other gangs' reservations keep room from it (gangreserve.go).
	holding := gs.gr.holdingFrom(c, g)
	if len(holding) > 0 {
		held := gs.gr.heldRoom(c, holding)
		for d := 0; d < nd; d++ {
			if l := g.least[d]; l > 0 && k*l > c.idx.free[d]-held[d] {
				return false
			}
		}
	}
	return gs.gangSlots(g, holding) >= int(k)
}

// gangSlots bounds how many of g's ready members the schedulable nodes
// could hold now, when they are all of one class: over the class's
// options and their groups, each node with free primary resource enough
// for one member (its bucket, index.go) holds at most the group's largest
// capacity over the member's request, less the nodes other gangs'
// reservations keep from it (heldSlots); members that share one device
// model count one model's nodes. Members of several classes, an
// option that asks none of its group's primary resource, or groups that
// changed since the last search give no bound (math.MaxInt).
func (gs *gangs) gangSlots(g *gang, holding []*gangReservation) int {
	c := gs.c
	cls := g.ready[0].cls
	for _, t := range g.ready[1:] {
		if t.cls != cls {
			return math.MaxInt
		}
	}
	// Members that must share a device model (gangdomain.go) count the
	// slots of one model at a time: the bound is the best model's.
	var dims []int
	if !g.mixed {
		dims = g.devDims
	}
	byModel := gs.slotsBuf[:0]
	defer func() { gs.slotsBuf = byModel[:0] }()
	for oi := range cls.opts {
		o := &cls.opts[oi]
		if !o.groupsOK || o.groupsVer != c.idx.version {
			return math.MaxInt
		}
		for _, grp := range o.groups {
			r := o.req[grp.primary]
			if r <= 0 {
				return math.MaxInt
			}
			per := int(max(1, grp.maxCap[grp.primary]/r))
			nb := grp.needBucket(r)
			n := 0
			for b := nb; b <= grp.max; b++ {
				n += len(grp.buckets[b]) * per
			}
			n -= heldSlots(c, holding, o, grp, nb) * per
			models := ""
			if len(dims) > 0 {
				models = groupModels(grp, dims)
			}
			i := slices.IndexFunc(byModel, func(m modelSlots) bool { return m.models == models })
			if i < 0 {
				byModel = append(byModel, modelSlots{models: models})
				i = len(byModel) - 1
			}
			byModel[i].n += n
		}
	}
	slots := 0
	for _, m := range byModel {
		slots = max(slots, m.n)
	}
	return slots
}

// leastAsked sets g.least from its ready members.
func (gs *gangs) leastAsked(g *gang) {
	c := gs.c
	nd := c.dims.Len()
	for d := 0; d < nd; d++ {
		least := int64(-1)
		for _, t := range g.ready {
			for oi := range t.cls.opts {
				if r := t.cls.opts[oi].req[d]; least < 0 || r < least {
					least = r
				}
			}
		}
		g.least[d] = max(0, least)
	}
	g.devDims = gangDeviceDims(g.ready)
}

// gangRestart sends a gang's placed members back to pending.
func (gs *gangs) gangRestart(g *gang, why string) {
	c := gs.c
	g.restart = true
	g.started = false
	g.since = c.now
	for _, m := range g.members {
		if m.state == Scheduled || m.state == Running {
			c.requeue(m, Pending, why)
		}
	}
	g.restart = false
	g.reason = why // what its members show until the next try
	g.lastOf = 0
}

// gangTryStart returns a copy of g's ready members in submission order
// (placing a member takes it out of g.ready; the list is the core's
// scratch: tries do not nest, and gangTryEnd gives it back) and the
// affinity steering the try's members to the topology of the members
// placed already.
func (gs *gangs) gangTryStart(g *gang) ([]*Task, *gangAffinity) {
	ready := append(gs.ready[:0], g.ready...)
	if !slices.IsSortedFunc(ready, bySeq) {
		slices.SortFunc(ready, bySeq)
	}
	keys := g.topology
	if keys == nil {
		keys = defaultGangTopology
	}
	aff := &gangAffinity{keys: keys, g: g}
	for _, m := range g.members {
		if m.node != nil && (m.state == Scheduled || m.state == Running) {
			aff.anchor = m.node
			break
		}
	}
	return ready, aff
}

// gangTryEnd gives gangTryStart's list back.
func (gs *gangs) gangTryEnd(ready []*Task) {
	clear(ready)
	gs.ready = ready[:0]
}

// tryGang places as many ready members as fit, under a checkpoint that it
// keeps only if the gang then has MinMember placed; otherwise it rolls
// every placement of this try back (journal.go).
func (gs *gangs) tryGang(g *gang) {
	c := gs.c
	if g.tried != c.capSeq {
		g.deferred = 0
	}
	ready, aff := gs.gangTryStart(g)
	defer gs.gangTryEnd(ready)
	// Gang tries search completely (no MaxVisit budget) and leave the
	// class's search state as they found it: a gang member shares its
	// class with plain tasks, and a try that changed that state could
	// keep their searches, and its own, from ever completing.
	sc := c.pl.beginSearch(true, aff)
	newly, deferredTry, kept := gs.placeGangMembers(g, sc, ready, aff)
	sc.endSearch()
	g.dirty = false
	if kept {
		c.stats.Attempts += uint64(len(ready))
		g.placed += newly
		g.started = true
		g.reason = ""
		g.lastOf = 0
		if len(g.ready) > 0 {
			g.tried = c.capSeq // the rest wait for capacity
		}
		return
	}
	// Rolled back; the attempts happened all the same.
	c.stats.Attempts += uint64(len(ready))
	g.tried = c.capSeq
	if deferredTry && g.deferred < maxGangDeferrals {
		// The search ran out of budget, not of nodes: try again soon (a
		// few times: members of one class share its search state, so a
		// try can keep cutting itself short; then the gang waits for
		// capacity to change, like an unfit class).
		g.deferred++
		g.dirty = true
		c.retrySoon()
	}
	g.lastFit, g.lastOf, g.lastNeed = newly, len(ready), g.min-g.placed-g.done
	gs.leastAsked(g)
	if g.tryReason == "" || g.tryFit != g.lastFit || g.tryOf != g.lastOf || g.tryNeed != g.lastNeed {
		g.tryFit, g.tryOf, g.tryNeed = g.lastFit, g.lastOf, g.lastNeed
		g.tryReason = fmt.Sprintf("gang of job %s: %d of %d pending members fit together now, %d needed to start", g.job.id, g.lastFit, g.lastOf, g.lastNeed)
	}
	g.reason = g.tryReason
}

// gangTimeouts fails the gangs that did not start within their timeout,
// naming the shortfall.
func (gs *gangs) gangTimeouts() {
	c := gs.c
	for _, g := range gs.wait {
		if g.started || g.timeout <= 0 || len(g.ready) == 0 || c.now < g.since+g.timeout {
			continue
		}
		why := gs.gangShortfall(g)
		g.failing = true
		for _, m := range append([]*Task(nil), g.ready...) {
			if !m.state.Terminal() {
				c.finish(m, Failed, why)
			}
		}
		g.failing = false
	}
}

// nextGangTimeout is the earliest gang deadline.
func (gs *gangs) nextGangTimeout() (int64, bool) {
	var best int64
	ok := false
	for _, g := range gs.wait {
		if g.started || g.timeout <= 0 || len(g.ready) == 0 {
			continue
		}
		if d := g.since + g.timeout; !ok || d < best {
			best, ok = d, true
		}
	}
	return best, ok
}

// gangShortfall explains why a gang could not start: too few members to
// reach MinMember, or what its last try could place; then what its
// pending members ask in all of the resource they ask most, against what
// the whole cluster and its freest node have free. Topology is only a
// preference: the largest free domain of the first topology key the
// nodes carry is named when no domain could hold all the pending members
// (a preference it could not meet), never as a requirement. It walks
// every node once; it runs only when a gang times out.
func (gs *gangs) gangShortfall(g *gang) string {
	c := gs.c
	var need resource.Vector
	for _, t := range g.ready {
		o := &t.cls.opts[t.cls.optOrder[0]]
		for i := range o.req {
			need[i] += o.req[i]
		}
	}
	// The resource to report: the device type needed most, else cpu.
	dim := -1
	for i := 0; i < c.dims.Len(); i++ {
		if strings.Contains(string(c.dims.Name(i)), "/") && need[i] > 0 && (dim < 0 || need[i] > need[dim]) {
			dim = i
		}
	}
	if dim < 0 {
		dim = 0
	}
	keys := g.topology
	if keys == nil {
		keys = defaultGangTopology
	}
	// One walk: free capacity in all, on the freest node, and per domain
	// of every key.
	byKey := make([]map[string]int64, len(keys))
	for i := range byKey {
		byKey[i] = map[string]int64{}
	}
	var total, node int64
	for _, n := range c.idx.order {
		if !n.Schedulable() {
			continue
		}
		f := n.capacity[dim] - n.alloc[dim]
		total += f
		node = max(node, f)
		for i, k := range keys {
			if v, ok := n.labels[k]; ok {
				byKey[i][v] += f
			}
		}
	}
	name := string(c.dims.Name(dim))
	var parts []string
	switch have := g.placed + g.done + len(g.ready); {
	case have < g.min:
		parts = append(parts, fmt.Sprintf("%d of its %d members pending, placed or done, minMember %d",
			have, len(g.members)+len(g.want), g.min))
	case g.lastOf > 0:
		parts = append(parts, fmt.Sprintf("%d of %d pending members could be placed together at its last try, %d needed to start",
			g.lastFit, g.lastOf, g.lastNeed))
	}
	parts = append(parts, fmt.Sprintf("its %d pending members ask %s %s in all, the cluster has %s free (at most %s on one node)",
		len(g.ready), c.formatQty(dim, need[dim]), name, c.formatQty(dim, total), c.formatQty(dim, node)))
	for i, k := range keys {
		if len(byKey[i]) == 0 {
			continue
		}
		var largest int64
		for _, v := range byKey[i] {
			largest = max(largest, v)
		}
		if largest < need[dim] {
			parts = append(parts, fmt.Sprintf("its preference for one %s domain could not be met either: the largest free %s domain has %s",
				k, k, c.formatQty(dim, largest)))
		}
		break
	}
	return fmt.Sprintf("gang of job %s did not start within %s: %s", g.job.id, durString(g.timeout), strings.Join(parts, "; "))
}

// gangPending counts the members waiting for their gangs, per level.
func (gs *gangs) gangPending(p *[4]int) {
	for _, g := range gs.wait {
		for _, t := range g.ready {
			p[t.prio]++
		}
	}
}
