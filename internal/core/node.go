package core

import (
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// NodeNameLabel is the derived label holding a node's name (when the name
// is a valid label value): nodeSelector {hetsched.io/node: gpu-a} pins a
// task to a node.
const NodeNameLabel = api.NodeNameLabel

// Device is one device of a node as the core tracks it. Used is the share
// allocated in milli-units (0..1000).
type Device struct {
	ID     string
	Type   string
	Model  string
	Memory int64
	NUMA   string
	Domain string // NVLink or ICI domain; "" when none
	// Classes are the device classes it belongs to (api.Device.Classes).
	Classes []string
	Healthy bool
	dim     int
	Used    int32
}

// Free is the unallocated share of the device in milli-units.
func (d *Device) Free() int32 { return 1000 - d.Used }

// Node is a node as the core tracks it. Plugins read it through its methods;
// only the core mutates it.
type Node struct {
	// Hot fields first: a placement check reads capacity and alloc, and
	// touches the bucket position and task list only on commit.
	capacity resource.Vector // healthy capacity
	alloc    resource.Vector
	group    *group
	bucket   int32 // bucket in group; -1 when not indexed
	pos      int32 // position in the bucket
	tasks    []*Task
	devices  []Device
	state    string
	name     string
	labels   map[string]string // own labels plus derived <type>.model labels
	taints   []api.Taint
	seq      uint64 // insertion order
	orderPos int    // index in index.order
	load     loadStats
	byDim    [resource.MaxDims][]int32 // device indexes per resource dim
	// allocByPrio is the allocation of preemptible tasks per native priority.
	allocByPrio [4]resource.Vector
	// counted is what index.free counts of this node while it is indexed:
	// its free capacity per resource, none negative.
	counted resource.Vector
	// hold is a gang reservation's hold on the node (gangreserve.go).
	hold *gangHold
}

// Name returns the node's name.
func (n *Node) Name() string { return n.name }

// Label returns a label value.
func (n *Node) Label(k string) (string, bool) { v, ok := n.labels[k]; return v, ok }

// EachLabel calls fn for every label selectors match: the node's own and
// the derived ones (<device type>.model where all its devices of a type
// are one model, hetsched.io/node).
func (n *Node) EachLabel(fn func(k, v string)) {
	for k, v := range n.labels {
		fn(k, v)
	}
}

// Capacity returns the node's healthy capacity vector (do not modify).
func (n *Node) Capacity() *resource.Vector { return &n.capacity }

// Allocated returns the node's allocation vector (do not modify).
func (n *Node) Allocated() *resource.Vector { return &n.alloc }

// Devices returns the node's devices (do not modify).
func (n *Node) Devices() []Device { return n.devices }

// TaskCount returns the number of tasks placed on the node.
func (n *Node) TaskCount() int { return len(n.tasks) }

// State returns the node's state (ready, notready, cordoned, draining).
func (n *Node) State() string { return n.state }

// Schedulable reports whether new work may be placed on the node.
func (n *Node) Schedulable() bool { return n.state == api.NodeReady }

// freeDim is the unallocated amount of one dim.
func (n *Node) freeDim(d int) int64 { return n.capacity[d] - n.alloc[d] }

// allocFraction is the allocated fraction of dim d (0 when capacity is 0).
func (n *Node) allocFraction(d int) float64 {
	if n.capacity[d] <= 0 {
		return 0
	}
	return float64(n.alloc[d]) / float64(n.capacity[d])
}

// buildNode converts a validated api.Node. Device dims are interned in dims.
func buildNode(spec *api.Node, dims *resource.Dims) (*Node, error) {
	n := &Node{name: spec.Name, state: spec.State, bucket: -1}
	if n.state == "" {
		n.state = api.NodeReady
	}
	capList := resource.List{}
	for k, v := range spec.Capacity {
		capList[k] = v
	}
	models := map[string]map[string]bool{}
	for _, d := range spec.Devices {
		dev := Device{ID: d.ID, Type: d.Type, Model: d.Model, Memory: int64(d.Memory), Healthy: !d.Unhealthy, Classes: slices.Clone(d.Classes)}
		dev.NUMA = d.Topology[api.TopologyNUMA]
		dev.Domain = d.Topology[api.TopologyNVLink]
		if dev.Domain == "" {
			dev.Domain = d.Topology[api.TopologyICI]
		}
		// One string per domain on the node: device picking compares
		// domains per device, and equal strings that share their bytes
		// compare without reading them.
		for j := range n.devices {
			if n.devices[j].Domain == dev.Domain {
				dev.Domain = n.devices[j].Domain
				break
			}
		}
		n.devices = append(n.devices, dev)
		if models[d.Type] == nil {
			models[d.Type] = map[string]bool{}
		}
		if d.Model != "" {
			models[d.Type][d.Model] = true
		}
	}
	// Device-backed capacity is the count of healthy devices (in milli).
	for t := range models {
		capList[resource.Name(t)] = 0
	}
	for _, d := range n.devices {
		if d.Healthy {
			capList[resource.Name(d.Type)] += 1000
		}
	}
	v, err := dims.Vector(capList)
	if err != nil {
		return nil, err
	}
	n.capacity = v
	for i := range n.devices {
		dim, _ := dims.Lookup(resource.Name(n.devices[i].Type))
		n.devices[i].dim = dim
		n.byDim[dim] = append(n.byDim[dim], int32(i))
	}
	n.labels = make(map[string]string, len(spec.Labels)+len(models))
	for k, v := range spec.Labels {
		n.labels[k] = v
	}
	for t, ms := range models {
		if len(ms) == 1 {
			for m := range ms {
				if _, ok := n.labels[t+".model"]; !ok {
					n.labels[t+".model"] = m
				}
			}
		}
	}
	if api.ValidateLabelValue(spec.Name) == nil {
		n.labels[NodeNameLabel] = spec.Name
	}
	for _, s := range spec.Taints {
		t, err := api.ParseTaint(s)
		if err != nil {
			return nil, err
		}
		n.taints = append(n.taints, t)
	}
	return n, nil
}

// recomputeCapacity refreshes device-backed capacity after a health change.
func (n *Node) recomputeCapacity() {
	for dim, idxs := range n.byDim {
		if len(idxs) == 0 {
			continue
		}
		var c int64
		for _, i := range idxs {
			if n.devices[i].Healthy {
				c += 1000
			}
		}
		n.capacity[dim] = c
	}
}

// groupKey is the static signature of nodes alike for static filters:
// labels (identity labels aside), taints, the resource types present and
// the device types, models and classes. Capacities are left out, so machines that
// differ by a few bytes of memory, or by failed devices, share a group.
func (n *Node) groupKey(dims *resource.Dims, identity map[string]bool) string {
	var b strings.Builder
	writePairs(&b, n.labels, identity)
	b.WriteByte('|')
	for _, t := range n.taints {
		b.WriteString(t.String())
		b.WriteByte(';')
	}
	b.WriteByte('|')
	for i := 0; i < dims.Len(); i++ {
		if n.capacity[i] > 0 || len(n.byDim[i]) > 0 {
			b.WriteString(strconv.Itoa(i))
			b.WriteByte(',')
		}
	}
	b.WriteByte('|')
	ms := make([]string, 0, len(n.devices))
	for _, d := range n.devices {
		m := d.Type + "=" + d.Model
		if len(d.Classes) > 0 {
			cs := slices.Clone(d.Classes)
			sort.Strings(cs)
			m += "{" + strings.Join(cs, ",") + "}"
		}
		ms = append(ms, m)
	}
	sort.Strings(ms)
	for i, m := range ms {
		if i == 0 || m != ms[i-1] {
			b.WriteString(m)
			b.WriteByte(',')
		}
	}
	return b.String()
}

// writePairs writes m as "k=v;" in key order, leaving out keys in skip.
func writePairs(b *strings.Builder, m map[string]string, skip map[string]bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		if !skip[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(m[k])
		b.WriteByte(';')
	}
}

// HasClass reports whether the device carries class c ("" is any).
func (d *Device) HasClass(c string) bool { return c == "" || slices.Contains(d.Classes, c) }

// hasDeviceClass reports whether the node has a device of dim carrying
// class c.
func (n *Node) hasDeviceClass(dim int, c string) bool {
	for _, i := range n.byDim[dim] {
		if n.devices[i].HasClass(c) {
			return true
		}
	}
	return false
}
