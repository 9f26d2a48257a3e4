package core

import (
	"fmt"
	"slices"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// Tenant queues: a tree root → tenant → sub-queue.
//
//   - Max caps what the placed tasks of a queue and of its descendants
//     hold, per resource. A placement that would pass the max of the
//     task's queue or of any ancestor does not fit, with the reason "queue
//     team-a max reached: nvidia.com/gpu 14 used + 4 asked > 16 max".
//   - Below its max a queue may use any idle capacity: it borrows beyond
//     its guarantee. Reclaim (preempt.go) takes borrowed capacity back for
//     a queue under its guarantee.
//   - Fair order: within a band (a tier's native or raised work, queue.go),
//     the pending work of the queues is served in weighted
//     dominant-resource-fair order, hierarchically. At each queue, its
//     children (and the queue's own tasks, as a leaf of
//     weight 1) are ordered: those below their guarantee first, then by
//     dominant share (the largest fraction of the cluster's schedulable
//     capacity of any resource the subtree holds) divided by weight, then
//     the one served least recently. Each band keeps, per queue, a heap of
//     its children with active work (lane), and per leaf a heap of its
//     active class queues; a pick walks from the root down, so its cost is
//     the tree's depth times log(fan-out), never the number of queues.
//
// Contracts: every task belongs to a leaf (the own-task leaf of its queue,
// or of the root when it names no queue the core knows); used is the sum of
// the requests of the placed tasks below a queue, kept by allocate and
// release (less, during a preemption what-if, what it evicts: journal.go); share and under follow used at once (the lanes are re-ordered on
// each change), and the cluster's capacity when it changes (at the next
// schedule). A class refused by a max is woken when a task of a queue that
// hit its max releases (wakeAll: rare, only after a refusal).

// queues is the tenant queue tree: the quotas, the usage below each
// queue, and the fair order of the bands' pending work. The core calls it
// at named points: leafOf when a task is admitted, queueCheck and
// overQueueMax in a placement search, queueAdd when a placement is made or
// released (journaled in a what-if), laneJoin and laneLeave when a class
// queue's pending work appears or drains, top when a band dispatches.
type queues struct {
	c     *Core
	tree  map[string]*queueNode
	root  *queueNode
	seq   int
	dirty bool // recompute shares and re-order lanes at the next schedule
}

func newQueues() queues {
	return queues{tree: map[string]*queueNode{}, root: newRootQueue()}
}

type queueNode struct {
	name   string
	parent *queueNode
	self   *queueNode // the leaf holding the queue's own tasks (nil on a leaf)
	leaf   bool
	order  int // creation order: the last tie-break
	limits []dimLimit
	guar   []dimLimit // the guarantee, per resource it names
	weight float64
	used   resource.Vector
	hit    bool         // a placement was refused by this queue's max since the last release
	share  float64      // dominant share of the cluster / weight
	under  bool         // below its guarantee in some resource it names
	picked uint64       // when a placement last went below this queue
	ln     [nBands]lane // pending work by band (queue.go)
	// backoff counts the leaf's tasks waiting out a retry backoff.
	backoff int
}

type dimLimit struct {
	dim int
	max int64
}

// lane is the pending work of one queue node in one band (queue.go): for a
// leaf, its active class queues (by head task); otherwise its children
// whose lanes are not empty (by fair order).
type lane struct {
	node *queueNode
	band int8
	pos  int32 // in the parent's kids; -1 when not there
	cqs  []*classQueue
	kids []*lane
}

func newQueueNode(name string, parent *queueNode, leaf bool, order int) *queueNode {
	n := &queueNode{name: name, parent: parent, leaf: leaf, weight: 1, order: order}
	for l := range n.ln {
		n.ln[l] = lane{node: n, band: int8(l), pos: -1}
	}
	return n
}

// newRootQueue returns the root with its own-task leaf (where tasks that
// name no queue wait).
func newRootQueue() *queueNode {
	r := newQueueNode(api.RootQueue, nil, false, 0)
	r.self = newQueueNode(api.RootQueue, r, true, 0)
	return r
}

// leafOf returns the leaf where a task of queue name waits.
func (qs *queues) leafOf(name string) *queueNode {
	if q := qs.tree[name]; q != nil {
		return q.self
	}
	return qs.root.self
}

// SetQueue adds or updates a queue (its parent first). Unknown resource
// names in max and guaranteed are interned. Moving a queue under another
// parent carries its usage and its pending work along.
func (c *Core) SetQueue(now time.Time, q *api.Queue) error {
	c.advance(now)
	parent := c.qs.root
	if q.Parent != "" && q.Parent != api.RootQueue {
		if parent = c.qs.tree[q.Parent]; parent == nil {
			return errs.Invalid("parent", "no queue %q", q.Parent)
		}
	}
	if q.Name == "" || q.Name == api.RootQueue {
		return errs.Invalid("name", "must name a queue other than the root")
	}
	n := c.qs.tree[q.Name]
	for p := parent; p != nil; p = p.parent {
		if n != nil && p == n {
			return errs.Invalid("parent", "queue %q cannot move under its own descendant %q", q.Name, q.Parent)
		}
	}
	limits, err := c.qs.dimLimits("max", q.Max)
	if err != nil {
		return err
	}
	guar, err := c.qs.dimLimits("guaranteed", q.Guaranteed)
	if err != nil {
		return err
	}
	if n == nil {
		c.qs.seq++
		n = newQueueNode(q.Name, parent, false, c.qs.seq)
		n.self = newQueueNode(q.Name, n, true, c.qs.seq)
		c.qs.tree[q.Name] = n
	} else if n.parent != parent {
		c.qs.reparent(n, parent)
	}
	n.limits, n.guar = limits, guar
	n.weight = q.Weight
	if n.weight <= 0 {
		n.weight = 1
	}
	c.qs.dirty = true
	// A raised max may let refused classes in.
	c.wk.wakeAll()
	c.schedule()
	return nil
}

func (qs *queues) dimLimits(field string, l resource.List) ([]dimLimit, error) {
	c := qs.c
	var out []dimLimit
	names := make([]resource.Name, 0, len(l))
	for name := range l {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		d, err := c.dims.Intern(name)
		if err != nil {
			return nil, errs.Invalid(field+"."+string(name), "%v", err)
		}
		out = append(out, dimLimit{d, l[name]})
	}
	return out, nil
}

// reparent moves n (with its usage and its lanes) under p.
func (qs *queues) reparent(n, p *queueNode) {
	for l := range n.ln {
		if n.ln[l].pos >= 0 {
			qs.laneLeave(&n.ln[l])
		}
	}
	for a := n.parent; a != nil; a = a.parent {
		a.used.Sub(&n.used)
	}
	n.parent = p
	for a := p; a != nil; a = a.parent {
		a.used.Add(&n.used)
	}
	for l := range n.ln {
		if len(n.ln[l].kids) > 0 {
			qs.laneJoin(&n.ln[l])
		}
	}
}

// queueCheck reports whether o fits under the max of t's queue and of its
// ancestors.
func (qs *queues) queueCheck(t *Task, o *Option) *Status {
	c := qs.c
	for q := t.leaf; q != nil; q = q.parent {
		for _, l := range q.limits {
			if q.used[l.dim]+o.req[l.dim] > l.max {
				q.hit = true
				return NewUnresolvable(fmt.Sprintf("queue %s max reached: %s %s used + %s asked > %s max", q.name,
					c.dims.Name(l.dim), c.formatQty(l.dim, q.used[l.dim]), c.formatQty(l.dim, o.req[l.dim]),
					c.formatQty(l.dim, l.max)))
			}
		}
	}
	return nil
}

// overQueueMax reports whether every option of t is over a queue max, so
// that an attempt fails before walking any node.
func (qs *queues) overQueueMax(t *Task) bool {
	if t.leaf.parent == qs.root && len(qs.root.limits) == 0 {
		return false // a task of no queue: no max applies
	}
	for oi := range t.cls.opts {
		if qs.queueCheck(t, &t.cls.opts[oi]) == nil {
			return false
		}
	}
	return true
}

// queueAdd charges (sign 1) or refunds (sign -1) o's request to t's queue
// and its ancestors and re-orders their lanes; a refund to a queue that
// refused a placement wakes the blocked classes.
func (qs *queues) queueAdd(t *Task, o *Option, sign int64) {
	c := qs.c
	wake := false
	for q := t.leaf; q != nil; q = q.parent {
		for i := range o.req {
			q.used[i] += sign * o.req[i]
		}
		if sign < 0 && q.hit {
			q.hit = false
			wake = true
		}
		if sign > 0 {
			q.picked = c.stats.Placed
		}
		qs.refreshShare(q)
	}
	if wake {
		c.wk.wakeAll()
	}
}

// refreshShare recomputes q's share and re-orders it among its siblings.
func (qs *queues) refreshShare(q *queueNode) {
	if q.parent == nil {
		return
	}
	q.share, q.under = qs.shareOf(q)
	qs.reorderLanes(q)
}

// reorderLanes restores q's place among its siblings in every band's lane
// after its share or guarantee flag changed.
func (qs *queues) reorderLanes(q *queueNode) {
	if q.parent == nil {
		return
	}
	for l := range q.ln {
		ln := &q.ln[l]
		if ln.pos < 0 {
			continue
		}
		if kids := q.parent.ln[l].kids; len(kids) > 1 {
			heapFix[*lane, byFair](kids, int(ln.pos))
		}
	}
}

// shareOf returns q's weighted dominant share of the cluster's schedulable
// capacity, and whether q is below its guarantee.
func (qs *queues) shareOf(q *queueNode) (float64, bool) {
	c := qs.c
	var dom float64
	tot := &c.idx.total
	for i := 0; i < c.dims.Len(); i++ {
		if tot[i] > 0 && q.used[i] > 0 {
			if f := float64(q.used[i]) / float64(tot[i]); f > dom {
				dom = f
			}
		}
	}
	under := false
	for _, g := range q.guar {
		if q.used[g.dim] < g.max {
			under = true
			break
		}
	}
	return dom / q.weight, under
}

// refreshAllShares recomputes every share and re-orders every lane (the
// cluster's capacity or a queue's weight or guarantee changed).
func (qs *queues) refreshAllShares() {
	c := qs.c
	qs.dirty = false
	all := allQueueNodes(c)
	for _, q := range all {
		if q.parent != nil {
			q.share, q.under = qs.shareOf(q)
		}
	}
	for _, q := range all {
		for l := range q.ln {
			kids := q.ln[l].kids // empty on leaves
			for i := len(kids)/2 - 1; i >= 0; i-- {
				heapDown[*lane, byFair](kids, i)
			}
		}
	}
}

// byFair orders the children of a lane: below guarantee first, then the
// smallest weighted dominant share, then the least recently served.
type byFair struct{}

func (byFair) less(a, b *lane) bool {
	x, y := a.node, b.node
	if x.under != y.under {
		return x.under
	}
	if x.share != y.share {
		return x.share < y.share
	}
	if x.picked != y.picked {
		return x.picked < y.picked
	}
	if x.order != y.order {
		return x.order < y.order
	}
	return y.leaf && !x.leaf
}
func (byFair) setPos(x *lane, i int) { x.pos = int32(i) }

// laneJoin links a lane that became non-empty into its parent's, and on
// up while the parents were empty.
func (qs *queues) laneJoin(ln *lane) {
	for ln.node.parent != nil {
		p := &ln.node.parent.ln[ln.band]
		ln.pos = int32(len(p.kids))
		p.kids = append(p.kids, ln)
		heapUp[*lane, byFair](p.kids, int(ln.pos))
		if len(p.kids) > 1 {
			return
		}
		ln = p
	}
}

// laneLeave unlinks a lane that became empty from its parent's, and on up
// while the parents become empty.
func (qs *queues) laneLeave(ln *lane) {
	for ln.node.parent != nil && ln.pos >= 0 {
		p := &ln.node.parent.ln[ln.band]
		p.kids = heapRemove[*lane, byFair](p.kids, int(ln.pos))
		ln.pos = -1
		if len(p.kids) > 0 {
			return
		}
		ln = p
	}
}

// hpush makes q active: it joins its leaf's lane in its band.
func (qs *queues) hpush(q *classQueue) {
	ln := &q.cls.leaf.ln[q.band]
	q.hpos = int32(len(ln.cqs))
	ln.cqs = append(ln.cqs, q)
	heapUp[*classQueue, byHead](ln.cqs, int(q.hpos))
	if len(ln.cqs) == 1 {
		qs.laneJoin(ln)
	}
}

// hremove takes an active q out of its leaf's lane.
func (qs *queues) hremove(q *classQueue) {
	ln := &q.cls.leaf.ln[q.band]
	ln.cqs = heapRemove[*classQueue, byHead](ln.cqs, int(q.hpos))
	q.hpos = -1
	if len(ln.cqs) == 0 {
		qs.laneLeave(ln)
	}
}

// hfix restores order after q's head changed.
func (qs *queues) hfix(q *classQueue) {
	heapFix[*classQueue, byHead](q.cls.leaf.ln[q.band].cqs, int(q.hpos))
}

// hasActive reports whether band b has an active class queue.
func (qs *queues) hasActive(b int) bool { return len(qs.root.ln[b].kids) > 0 }

// top returns the class queue band b serves next: the fair-order walk
// from the root to a leaf, then the leaf's first head. Band b must have
// an active class queue.
func (qs *queues) top(b int) *classQueue {
	ln := &qs.root.ln[b]
	for !ln.node.leaf {
		ln = ln.kids[0]
	}
	return ln.cqs[0]
}

// QueueUsage returns what the placed tasks of a queue (and its
// descendants) hold, by resource.
func (c *Core) QueueUsage(name string) (resource.List, bool) {
	q := c.qs.tree[name]
	if q == nil {
		return nil, false
	}
	return c.dims.List(&q.used), true
}
