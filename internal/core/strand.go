package core

import "github.com/hetsched/hetsched/internal/resource"

// Keeping room for large requests (issue 43 §1b). Spreading places each
// task on the emptiest node that fits it; on a fleet that also runs
// requests as large as a whole node, it breaks one empty node after
// another for small work, and the large requests wait for nodes to drain
// (192-core services waited up to 7 days beside 48- to 96-core ones that
// would have fitted the nodes already in use). With Policy.KeepRoom, a
// least-allocated-first search of a group first walks the nodes whose free
// primary resource (their devices', else their CPU) is below the largest
// request of it seen so far that the group's largest node could hold: a
// task placed there takes no room such a request could use. The emptiest
// of those that fit wins; only when none fits does the usual walk, the
// emptiest of all, run. A task as large as that request walks as usual.
//
// The largest request is the workload's (the request types counted at
// submission, workload in plugins_fgd.go: a device request and CPU), over
// every type seen, however rare: large requests are the rare ones. It
// guards the primary resource of each kind of node, not every resource of
// a node at once (a node with CPU to spare and no memory still counts as
// room).

// roomCut returns the bucket of g from which nodes could hold the largest
// request of g's primary resource seen that g's largest node could hold,
// when that request is larger than o's; 0 when there is none.
func (pl *placer) roomCut(g *group, o *Option) int {
	big := pl.largestSeen(g)
	if big <= o.req[g.primary] {
		return 0
	}
	return g.needBucket(big)
}

// largestSeen is the largest request of g's primary resource among the
// workload's types that g's largest node could hold (cached per group
// until a new type is seen).
func (pl *placer) largestSeen(g *group) int64 {
	c := pl.c
	w := &c.lr.mix
	if g.roomTypes == len(w.types) {
		return g.roomBig
	}
	var big int64
	for _, wt := range w.types {
		var need int64
		switch {
		case g.primary == resource.DimCPU:
			need = wt.cpu
		case wt.dim == g.primary:
			need = wt.milli
		default:
			continue
		}
		if wt.cpu <= g.maxCap[resource.DimCPU] && (wt.dim < 0 || wt.milli <= g.maxCap[wt.dim]) {
			big = max(big, need)
		}
	}
	g.roomTypes, g.roomBig = len(w.types), big
	return big
}

// probeBelow walks g's buckets below cut, emptiest first, for o (at most
// MaxVisit nodes unless the search is complete) and keeps the best fit in
// best; it reports whether it found one (the search of g is then done).
func (pl *placer) probeBelow(sc *searchCtx, t *Task, o *Option, g *group, nb, cut, sample int, best *candidate) bool {
	c := pl.c
	limit := c.cfg.MaxVisit
	if sc.full || c.policy.FullWalk {
		limit = -1
	}
	visited, found := 0, 0
	for b := min(cut, g.max+1) - 1; b >= nb; b-- {
		for _, n := range g.buckets[b] {
			if visited == limit {
				return found > 0
			}
			visited++
			if pl.consider(sc, t, o, n, best) {
				if found++; found >= sample {
					return true
				}
			}
		}
	}
	return found > 0
}
