package core

import (
	"math/bits"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// numBuckets is how finely a group's nodes are sorted by the free amount
// of the group's primary resource. Buckets are logarithmic with four steps
// per power of two (as in an HDR histogram), so the order is exact to 25 %
// whatever the nodes' sizes: a group may hold nodes of different capacity.
const numBuckets = 4 * 64

// group is a set of nodes alike for static filters: same labels (identity
// labels aside), taints, resource types and device models; capacities may
// differ. Static filters run per group; schedulable nodes sit in buckets by
// free primary resource so that a search starts where a fit is possible
// instead of scanning every node.
type group struct {
	id     int
	key    string
	labels map[string]string // shared by all members
	taints []api.Taint
	tmpl   *Node // what static filters look at: labels, taints, and a
	// capacity of MaxValue for each resource type the group has
	primary int // the dim nodes are bucketed by
	buckets [numBuckets][]*Node
	indexed int // nodes in buckets
	members int // all nodes of the group, schedulable or not
	// maxCap is the largest capacity of any member per resource (never
	// lowered when members leave or shrink: a bound, not a statistic).
	maxCap resource.Vector
	max    int // highest non-empty bucket, -1 when none
	// blocked lists class queues waiting for capacity in this group.
	blocked []blockRef
	ix      *index
	// models holds, by device dim, the sorted distinct "type=model" of
	// the group's devices of that dim, made on first use (groupModels).
	models map[int]string
	// roomBig is the largest request of the primary resource seen that
	// the group's largest node could hold, made when the workload had
	// roomTypes request types (strand.go).
	roomBig   int64
	roomTypes int
}

type blockRef struct {
	q   *classQueue
	gen uint32
}

// choosePrimary picks the dim a group is bucketed by: its first device dim,
// else cpu.
func choosePrimary(n *Node) int {
	for dim := range n.byDim {
		if len(n.byDim[dim]) > 0 {
			return dim
		}
	}
	return resource.DimCPU
}

// bucketOf returns the bucket for a free amount of the primary resource:
// monotonic in free, four buckets per power of two.
func (g *group) bucketOf(free int64) int {
	if free <= 0 {
		return 0
	}
	e := bits.Len64(uint64(free)) // 1..63
	sub := 0
	if e > 2 {
		sub = int(uint64(free)>>(e-3)) & 3
	} else {
		sub = int(uint64(free)<<(3-e)) & 3
	}
	return e*4 + sub
}

// needBucket returns the lowest bucket that may hold a node with at least
// need free.
func (g *group) needBucket(need int64) int {
	if need <= 0 {
		return 0
	}
	return g.bucketOf(need)
}

func (g *group) insert(n *Node) {
	b := g.bucketOf(n.freeDim(g.primary))
	n.bucket = int32(b)
	n.pos = int32(len(g.buckets[b]))
	g.buckets[b] = append(g.buckets[b], n)
	g.indexed++
	g.ix.total.Add(&n.capacity)
	g.ix.totalChanged = true
	g.ix.countFree(n, g.ix.nd)
	if b > g.max {
		g.max = b
	}
}

func (g *group) remove(n *Node) {
	b := int(n.bucket)
	if b < 0 {
		return
	}
	bk := g.buckets[b]
	last := len(bk) - 1
	if int(n.pos) != last {
		bk[n.pos] = bk[last]
		bk[n.pos].pos = n.pos
	}
	bk[last] = nil
	g.buckets[b] = bk[:last]
	n.bucket, n.pos = -1, -1
	g.indexed--
	g.ix.total.Sub(&n.capacity)
	g.ix.totalChanged = true
	g.ix.uncountFree(n)
	if b == g.max {
		for g.max >= 0 && len(g.buckets[g.max]) == 0 {
			g.max--
		}
	}
}

// rebucket moves n after its allocation changed.
func (g *group) rebucket(n *Node) {
	if n.bucket < 0 {
		return
	}
	if g.bucketOf(n.freeDim(g.primary)) == int(n.bucket) {
		return
	}
	ch := g.ix.totalChanged // the capacity stays: total does not change
	g.remove(n)
	g.insert(n)
	g.ix.totalChanged = ch
}

// index is the cluster: nodes by name, groups by key.
type index struct {
	nodes   map[string]*Node
	order   []*Node // insertion order (deterministic iteration)
	groups  map[string]*group
	glist   []*group
	version uint64 // bumps when the set of groups changes
	// members bumps whenever a node joins or leaves a group (every node
	// added, removed or replaced): what reads the nodes themselves, not
	// only their groups, caches against it (spread's domains).
	members uint64
	nodeSeq uint64
	// identity holds the identity label keys; byIdentity maps key, value
	// to the nodes carrying it.
	identity   map[string]bool
	byIdentity map[string]map[string][]*Node
	// total is the capacity of the schedulable nodes (those in buckets);
	// totalChanged is set when it changes.
	total        resource.Vector
	totalChanged bool
	// free is the free capacity of the schedulable nodes, each node's
	// counted none negative (a bound on what any set of placements can
	// take: placeGangs skips a gang it cannot hold). Every change of a
	// node's allocation (rawAdd) or of its being indexed keeps it.
	free resource.Vector
	// nd is how many resource dims the nodes' capacities may use (the
	// dims table's length when the last node was attached).
	nd int
}

// countFree brings n's share of x.free up to date in the dims below nd
// (the others have not changed since it was last counted).
func (x *index) countFree(n *Node, nd int) {
	for i := 0; i < nd; i++ {
		f := max(0, n.capacity[i]-n.alloc[i])
		x.free[i] += f - n.counted[i]
		n.counted[i] = f
	}
}

// uncountFree takes n's share out of x.free.
func (x *index) uncountFree(n *Node) {
	x.free.Sub(&n.counted)
	n.counted = resource.Vector{}
}

func newIndex(identityLabels []string) *index {
	x := &index{nodes: map[string]*Node{}, groups: map[string]*group{},
		identity: map[string]bool{NodeNameLabel: true}, byIdentity: map[string]map[string][]*Node{}}
	for _, k := range identityLabels {
		x.identity[k] = true
	}
	return x
}

// attach puts n into its group (creating the group when new) and into the
// group's buckets when schedulable.
func (x *index) attach(n *Node, dims *resource.Dims) {
	x.nd = max(x.nd, dims.Len())
	for k, v := range n.labels {
		if x.identity[k] {
			m := x.byIdentity[k]
			if m == nil {
				m = map[string][]*Node{}
				x.byIdentity[k] = m
			}
			m[v] = append(m[v], n)
		}
	}
	key := n.groupKey(dims, x.identity)
	g, ok := x.groups[key]
	if !ok {
		shared := make(map[string]string, len(n.labels))
		for k, v := range n.labels {
			if !x.identity[k] {
				shared[k] = v
			}
		}
		g = &group{id: len(x.glist), key: key, labels: shared, taints: n.taints, max: -1, ix: x}
		g.primary = choosePrimary(n)
		g.tmpl = &Node{name: n.name, labels: shared, taints: n.taints, state: api.NodeReady,
			byDim: n.byDim, bucket: -1, group: g}
		for i := range n.capacity {
			if n.capacity[i] > 0 || len(n.byDim[i]) > 0 {
				g.tmpl.capacity[i] = resource.MaxValue
			}
		}
		g.tmpl.devices = append([]Device(nil), n.devices...)
		for i := range g.tmpl.devices {
			g.tmpl.devices[i].Used = 0
		}
		x.groups[key] = g
		x.glist = append(x.glist, g)
		x.version++
	}
	n.group = g
	g.members++
	x.members++
	for i := range n.capacity {
		if n.capacity[i] > g.maxCap[i] {
			g.maxCap[i] = n.capacity[i]
		}
	}
	if n.state == api.NodeReady {
		g.insert(n)
	}
}

// detach takes n out of its group.
func (x *index) detach(n *Node) {
	g := n.group
	if g == nil {
		return
	}
	g.remove(n)
	g.members--
	x.members++
	n.group = nil
	for k, v := range n.labels {
		if !x.identity[k] {
			continue
		}
		list := x.byIdentity[k][v]
		for i, m := range list {
			if m == n {
				list[i] = list[len(list)-1]
				list[len(list)-1] = nil
				list = list[:len(list)-1]
				break
			}
		}
		if len(list) == 0 {
			delete(x.byIdentity[k], v)
		} else {
			x.byIdentity[k][v] = list
		}
	}
}
