package core

import (
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// numBuckets is how finely a group's nodes are sorted by free capacity of
// the group's primary resource: bucket b holds nodes with free fraction in
// [b/32, (b+1)/32); bucket 32 holds completely free nodes.
const numBuckets = 33

// group is a set of interchangeable nodes (same labels, taints, capacity and
// device models). Static filters run per group; schedulable nodes sit in
// buckets by free primary resource so that a search starts where a fit is
// possible instead of scanning every node.
type group struct {
	id       int
	key      string
	labels   map[string]string // shared by all members
	taints   []api.Taint
	tmpl     *Node // an empty member: what static filters look at
	capacity resource.Vector
	primary  int // the dim nodes are bucketed by
	buckets  [numBuckets][]*Node
	indexed  int // nodes in buckets
	members  int // all nodes of the group, schedulable or not
	max      int // highest non-empty bucket, -1 when none
	// blocked lists class queues waiting for capacity in this group.
	blocked []blockRef
}

type blockRef struct {
	q   *classQueue
	gen uint32
}

// choosePrimary picks the dim a group is bucketed by: its first device dim,
// else cpu.
func choosePrimary(capacity *resource.Vector, n *Node) int {
	for dim := range n.byDim {
		if len(n.byDim[dim]) > 0 && capacity[dim] > 0 {
			return dim
		}
	}
	return resource.DimCPU
}

// bucketOf returns the bucket for a free amount of the primary resource.
func (g *group) bucketOf(free int64) int {
	c := g.capacity[g.primary]
	if c <= 0 || free <= 0 {
		return 0
	}
	if free >= c {
		return numBuckets - 1
	}
	return int(free * (numBuckets - 1) / c)
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
	g.remove(n)
	g.insert(n)
}

// index is the cluster: nodes by name, groups by key.
type index struct {
	nodes   map[string]*Node
	order   []*Node // insertion order (deterministic iteration)
	groups  map[string]*group
	glist   []*group
	version uint64 // bumps when the set of groups changes
	nodeSeq uint64
	// identity holds the identity label keys; byIdentity maps key, value
	// to the nodes carrying it.
	identity   map[string]bool
	byIdentity map[string]map[string][]*Node
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
		g = &group{id: len(x.glist), key: key, labels: shared, taints: n.taints, capacity: n.capacity, max: -1}
		g.primary = choosePrimary(&n.capacity, n)
		g.tmpl = &Node{name: n.name, labels: shared, taints: n.taints, state: api.NodeReady,
			capacity: n.capacity, byDim: n.byDim, bucket: -1, group: g}
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
