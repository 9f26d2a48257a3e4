package core

import (
	"math"

	"github.com/hetsched/hetsched/internal/resource"
)

// FairShares returns each queue's instantaneous fair share of the cluster's
// schedulable capacity, by resource: what it would hold if every queue's
// current demand (placed plus pending requests) were served in the fair
// order. Per resource and per parent, each child first gets its guarantee
// (up to its demand), then the rest is water-filled by weight, no child
// getting past its demand or its max; a parent's share is what its
// children divide. Pending work counts by its task's own resources
// (alternatives aside); tasks waiting out a retry backoff do not count.
//
// The cost is the number of classes times the tree's depth plus the number
// of queues times the resources: for status pages and metrics, not for
// placement.
func (c *Core) FairShares() map[string]resource.List {
	nodes := allQueueNodes(c)
	demand := make(map[*queueNode]*resource.Vector, len(nodes))
	for _, q := range nodes {
		v := q.used
		demand[q] = &v
	}
	addPending := func(leaf *queueNode, req *resource.Vector, n int64) {
		for q := leaf; q != nil; q = q.parent {
			d := demand[q]
			for i := range req {
				d[i] += n * req[i]
			}
		}
	}
	for _, list := range c.ct.byHash {
		for _, cl := range list {
			for _, cq := range cl.classQueues() {
				if cq != nil && cq.size() > 0 {
					addPending(cl.leaf, &cl.opts[0].req, int64(cq.size()))
				}
			}
		}
	}
	for _, g := range c.gs.wait {
		for _, m := range g.ready {
			addPending(m.leaf, &m.cls.opts[0].req, 1)
		}
	}
	kids := map[*queueNode][]*queueNode{}
	for _, q := range nodes {
		if q.parent != nil {
			kids[q.parent] = append(kids[q.parent], q)
		}
	}
	share := map[*queueNode]*resource.Vector{c.qs.root: &resource.Vector{}}
	*share[c.qs.root] = c.idx.total
	// Parents before children: walk down from the root.
	stack := []*queueNode{c.qs.root}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		ks := kids[p]
		if len(ks) == 0 {
			continue
		}
		out := make([]resource.Vector, len(ks))
		for d := 0; d < c.dims.Len(); d++ {
			divide(share[p][d], d, ks, demand, out)
		}
		for i, k := range ks {
			share[k] = &out[i]
			stack = append(stack, k)
		}
	}
	res := make(map[string]resource.List, len(c.qs.tree))
	for name, q := range c.qs.tree {
		res[name] = c.dims.List(share[q])
	}
	return res
}

// allQueueNodes lists the root, the queues and their own-task leaves.
func allQueueNodes(c *Core) []*queueNode {
	out := []*queueNode{c.qs.root, c.qs.root.self}
	for _, q := range c.qs.tree {
		out = append(out, q, q.self)
	}
	return out
}

func limitOf(ls []dimLimit, d int) (int64, bool) {
	for _, l := range ls {
		if l.dim == d {
			return l.max, true
		}
	}
	return 0, false
}

// divide splits amount of dim d among ks into out[i][d]: guarantees first
// (scaled down when they do not all fit), then water-filling by weight up
// to each child's cap (the smaller of its demand and its max).
func divide(amount int64, d int, ks []*queueNode, demand map[*queueNode]*resource.Vector, out []resource.Vector) {
	caps := make([]float64, len(ks))
	give := make([]float64, len(ks))
	var gsum float64
	for i, k := range ks {
		caps[i] = float64(demand[k][d])
		if m, ok := limitOf(k.limits, d); ok && float64(m) < caps[i] {
			caps[i] = float64(m)
		}
		if g, ok := limitOf(k.guar, d); ok {
			give[i] = math.Min(float64(g), caps[i])
			gsum += give[i]
		}
	}
	left := float64(amount)
	if gsum > left {
		for i := range give {
			give[i] *= left / gsum
		}
		gsum = left
	}
	left -= gsum
	open := make([]bool, len(ks))
	for i := range ks {
		open[i] = give[i] < caps[i]
	}
	for left > 1e-9 {
		var wsum float64
		for i, k := range ks {
			if open[i] {
				wsum += k.weight
			}
		}
		if wsum == 0 {
			break
		}
		capped := false
		for i, k := range ks {
			if open[i] && give[i]+left*k.weight/wsum >= caps[i] {
				left -= caps[i] - give[i]
				give[i] = caps[i]
				open[i] = false
				capped = true
			}
		}
		if capped {
			continue
		}
		for i, k := range ks {
			if open[i] {
				give[i] += left * k.weight / wsum
			}
		}
		left = 0
	}
	for i := range ks {
		out[i][d] = int64(math.Floor(give[i] + 1e-9))
	}
}
