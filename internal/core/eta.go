package core

import (
	"slices"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/resource"
)

// Where a pending task stands: its place in its class queue, the work
// served before it, and an estimated start from the running tasks'
// expected ends. A read for one task's view (GET /tasks/{id}), not a
// scheduling input: its walks are bounded (maxPositionScan, maxETANodes,
// maxETATasks), and past a bound it says less rather than walking on.

// estimator walks the class queues and the running tasks' expected ends
// for QueueInfo and HeadEstimates: reads, bounded, never inputs.
type estimator struct {
	c *Core
}

// QueueInfo is where a pending task stands.
type QueueInfo struct {
	// Position is the task's place (1 = next) among the waiting tasks of
	// its scheduling class at its level: identical requests, served in
	// this order. PositionAtMost marks a queue too long to count: then
	// Position is an upper bound.
	Position       int  `json:"position"`
	PositionAtMost bool `json:"positionAtMost,omitempty"`
	// Ahead counts the tasks waiting at more important levels, served
	// first wherever they fit.
	Ahead int `json:"ahead"`
	// EstimatedStart is when Position tasks of its class fit, with those
	// of its class waiting in more important bands, assuming
	// the running tasks on the nodes it may use end when expected (their
	// declared or learned runtimes) and nothing more important takes the
	// capacity first; zero when there is no estimate (a fleet or queue
	// past the walks' bounds, or capacity that no running task's end
	// frees). It counts capacity only: a task its queue's max holds back
	// may start later than this.
	EstimatedStart time.Time `json:"estimatedStart,omitzero"`
}

const (
	maxPositionScan = 100_000 // class-queue entries counted for a position
	maxETANodes     = 20_000  // nodes looked at for an estimate
	maxETATasks     = 200_000 // nodes and running tasks looked at for one task's estimate
)

// QueueInfo reports where pending task id stands (false: no such pending
// task in a class queue: unknown, not pending, or a gang member).
func (c *Core) QueueInfo(id string) (QueueInfo, bool) {
	t, ok := c.tasks[id]
	if !ok || t.state != Pending || t.cq == nil || t.gready {
		return QueueInfo{}, false
	}
	var info QueueInfo
	info.Position, info.PositionAtMost = queuePosition(t.cq, t)
	for l := 0; l < int(t.level); l++ {
		info.Ahead += c.lv.tiers[l].count
	}
	// Its class's tasks in the bands served before its own go first.
	budget := maxETATasks
	if ns, ok := c.eta.estimateStart(t, info.Position+sameClassAhead(t), &budget, nil); ok {
		info.EstimatedStart = time.Unix(0, ns)
	}
	return info, true
}

// sameClassAhead counts the tasks of t's class waiting in the bands served
// before t's.
func sameClassAhead(t *Task) int {
	n := 0
	for l := range t.cls.queues {
		for _, q := range t.cls.queues[l] {
			if q != nil && q.band < t.cq.band {
				n += q.size()
			}
		}
	}
	return n
}

// queuePosition is t's 1-based place in q, and whether it is only an
// upper bound (q too long to count).
func queuePosition(q *classQueue, t *Task) (int, bool) {
	if !q.heap {
		start := q.first
		if int(t.cqpos)-start > maxPositionScan {
			return int(t.cqpos) - start + 1, true // holes included: at most
		}
		n := 1
		for _, x := range q.tasks[start:t.cqpos] {
			if x != nil {
				n++
			}
		}
		return n, false
	}
	if len(q.tasks) > maxPositionScan {
		return len(q.tasks), true
	}
	n := 1
	for _, x := range q.tasks {
		if x != t && taskLess(x, t) {
			n++
		}
	}
	return n, false
}

// release is one running task's expected end on one of the nodes an
// estimate looks at: its resources come back to free at end.
type release struct {
	end  int64
	node int // index into the estimate's free vectors
	req  *resource.Vector
}

// estimateStart is when position tasks of t's class fit on the nodes its
// options may use, if the running tasks there end when expected: the
// earliest over its options (QueueInfo.EstimatedStart). budget bounds the
// nodes and running tasks it looks at (and is lowered by them): past it,
// there is no estimate.
func (es *estimator) estimateStart(t *Task, position int, budget *int, walks etaWalks) (int64, bool) {
	best, found := int64(0), false
	for oi := range t.cls.opts {
		o := &t.cls.opts[oi]
		if len(o.unknown) > 0 {
			continue
		}
		if at, ok := es.estimateOption(t, o, position, budget, walks); ok && (!found || at < best) {
			best, found = at, true
		}
	}
	return best, found
}

// etaWalk is what an estimate reads of the nodes of one set of groups:
// their free vectors and their running tasks' releases, sorted by
// expected end. One HeadEstimates call shares it between the classes
// that may use the same groups.
type etaWalk struct {
	free []resource.Vector
	rels []release
}

// etaWalks caches the walks of one call, by the groups' ids.
type etaWalks map[string]*etaWalk

// walkFor returns the walk of o's groups (cached in walks when not nil),
// lowering budget by the nodes and tasks a new walk looks at; nil past
// the budget.
func (es *estimator) walkFor(o *Option, walks etaWalks, budget *int) *etaWalk {
	c := es.c
	var key []byte
	if walks != nil {
		for _, g := range o.groups {
			key = strconv.AppendInt(append(key, ','), int64(g.id), 10)
		}
		if w, ok := walks[string(key)]; ok {
			return w
		}
	}
	var nodes []*Node
	for _, g := range o.groups {
		for b := range g.buckets {
			nodes = append(nodes, g.buckets[b]...)
			if len(nodes) > maxETANodes || len(nodes) > *budget {
				*budget = 0
				return nil
			}
		}
	}
	*budget -= len(nodes)
	nd := c.dims.Len()
	w := &etaWalk{free: make([]resource.Vector, len(nodes))}
	for i, n := range nodes {
		for d := 0; d < nd; d++ {
			w.free[i][d] = n.capacity[d] - n.alloc[d]
		}
		for _, rt := range n.tasks {
			ro := &rt.cls.opts[optIndex(rt.chosen)]
			end := rt.started + int64(c.lr.expectedOn(rt, ro, n))
			w.rels = append(w.rels, release{end: max(end, c.now), node: i, req: &ro.req})
		}
		if len(w.rels) > *budget {
			*budget = 0
			return nil
		}
	}
	*budget -= len(w.rels)
	slices.SortFunc(w.rels, func(a, b release) int {
		switch {
		case a.end < b.end:
			return -1
		case a.end > b.end:
			return 1
		}
		return 0
	})
	if walks != nil {
		walks[string(key)] = w
	}
	return w
}

// estimateOption is estimateStart for one option.
func (es *estimator) estimateOption(t *Task, o *Option, position int, budget *int, walks etaWalks) (int64, bool) {
	c := es.c
	c.pl.refreshGroups(t, o) // the cache an attempt would refresh the same way
	w := es.walkFor(o, walks, budget)
	if w == nil {
		return 0, false
	}
	free := slices.Clone(w.free) // the walk's stay as they are, for the next class
	fits := 0
	for i := range free {
		fits += fitCount(&free[i], &o.req, o.reqLen)
	}
	if fits >= position {
		return c.now, true
	}
	nd := c.dims.Len()
	for _, r := range w.rels {
		f := &free[r.node]
		before := fitCount(f, &o.req, o.reqLen)
		for d := 0; d < nd; d++ {
			f[d] += r.req[d]
		}
		if fits += fitCount(f, &o.req, o.reqLen) - before; fits >= position {
			return r.end, true
		}
	}
	return 0, false
}

// fitCount is how many requests req fit in free (by vector; a request of
// nothing fits once).
func fitCount(free, req *resource.Vector, reqLen int) int {
	n, any := -1, false
	for d := 0; d < reqLen; d++ {
		if req[d] <= 0 {
			continue
		}
		any = true
		k := int(max(free[d], 0) / req[d])
		if n < 0 || k < n {
			n = k
		}
	}
	if !any {
		return 1
	}
	return n
}

// HeadEstimate is the estimated start of the first task of one blocked
// class queue (Core.HeadEstimates).
type HeadEstimate struct {
	Task  string
	Start time.Time
}

// HeadEstimates estimates, for the first task of each class queue blocked
// on capacity, when it starts (as QueueInfo.EstimatedStart), until budget
// nodes and running tasks have been looked at (classes that may use the
// same groups share one look): the queues past it, and those without an
// estimate, are left out. For an aggregate by queue
// (the driver maps each task to its queue).
func (c *Core) HeadEstimates(budget int) []HeadEstimate {
	var out []HeadEstimate
	walks := etaWalks{}
	for _, r := range c.wk.all {
		if budget <= 0 {
			break
		}
		q := r.q
		if !q.blocked || q.gen != r.gen || q.size() == 0 {
			continue
		}
		t := q.head()
		if ns, ok := c.eta.estimateStart(t, 1+sameClassAhead(t), &budget, walks); ok {
			out = append(out, HeadEstimate{Task: t.id, Start: time.Unix(0, ns)})
		}
	}
	return out
}
