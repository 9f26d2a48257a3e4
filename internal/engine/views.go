package engine

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

// closedCh is a closed channel.
var closedCh = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Waiting reports whether the task waits for a placement (pending or
// blocked).
func (r *TaskRecord) Waiting() bool { return r.State == stPending || r.State == stBlocked }

var stPending, stBlocked = core.Pending.String(), core.Blocked.String()

// Filter selects tasks in a listing; empty fields match everything.
type Filter struct {
	State, Queue, Node, Tenant, User string
	// States, when set, matches any of them (State is then ignored).
	States []string
	// Job, when set, lists that job's tasks (in the job's order) instead
	// of every task.
	Job string
	// Service, when set, lists that service's replicas (engine id) in
	// submission order instead of every task.
	Service string
	// Selector matches the tasks' metadata.
	Selector api.Selector
	// Newest lists the newest first (else in submission order).
	Newest bool
}

func (f Filter) match(r *TaskRecord) bool {
	if len(f.States) > 0 {
		if !slices.Contains(f.States, r.State) {
			return false
		}
	} else if f.State != "" && r.State != f.State {
		return false
	}
	return (f.Queue == "" || r.Spec.Queue == f.Queue) &&
		(f.Node == "" || r.Node == f.Node) && (f.Tenant == "" || r.Tenant == f.Tenant) && (f.User == "" || r.Spec.User == f.User) &&
		(f.Selector.Empty() || f.Selector.MatchesMap(r.Spec.Metadata))
}

// maxListScan bounds the records one listing call looks at, matching or
// not, so that a rare filter over a million tasks cannot hold the lock.
const maxListScan = 100_000

// ResourceSummary is one resource across the cluster, in canonical units:
// Allocated is what placed tasks hold, AllocatedFraction of the capacity;
// Utilization is what the agents measured in use, as a fraction of the
// capacity of the nodes (or devices) that reported it (absent when none
// did). Until issue 45, "utilization" was the allocated fraction.
type ResourceSummary struct {
	Capacity          int64    `json:"capacity"`
	Allocated         int64    `json:"allocated"`
	AllocatedFraction float64  `json:"allocatedFraction"`
	Utilization       *float64 `json:"utilization,omitempty"`
}

// measured sums the agents' measured use per resource dimension: used
// and the capacity that reported it.
type measured struct{ used, of [resource.MaxDims]float64 }

// node adds a node's heartbeat: its CPU and memory use (not a simulated
// node's) and its devices' utilization by type.
func (m *measured) node(dims *resource.Dims, n *core.Node, u *agentapi.NodeUsage) {
	c := n.Capacity()
	if !u.Simulated {
		if i, ok := dims.Lookup(resource.CPU); ok && c[i] > 0 {
			m.used[i] += u.CPU * float64(c[i])
			m.of[i] += float64(c[i])
		}
		if i, ok := dims.Lookup(resource.Memory); ok && c[i] > 0 && u.MemoryUsed > 0 {
			m.used[i] += float64(u.MemoryUsed)
			m.of[i] += float64(c[i])
		}
	}
	for _, d := range n.Devices() {
		if b, ok := u.Devices[d.ID]; ok {
			if i, ok := dims.Lookup(resource.Name(d.Type)); ok {
				m.used[i] += b.Utilization
				m.of[i]++
			}
		}
	}
}

// fraction is dimension i's measured use, nil when nothing reported it.
func (m *measured) fraction(i int) *float64 {
	if m.of[i] == 0 {
		return nil
	}
	f := min(m.used[i]/m.of[i], 1)
	return &f
}

// Summary is the cluster at a glance (GET /api/v1/cluster).
type Summary struct {
	Policy    string                     `json:"policy"`
	Nodes     map[string]int             `json:"nodes"`
	Resources map[string]ResourceSummary `json:"resources"`
	// Pending counts the waiting tasks by their own tier; PendingRaised
	// says how many of a tier's wait raised one tier up by aging (their
	// turn comes with that tier's, behind its own tasks).
	Pending       map[string]int `json:"pending"`
	PendingRaised map[string]int `json:"pendingRaised"`
	Tasks         int            `json:"tasks"`
	// Devices are the devices by type and model, sorted by both.
	Devices []DeviceSummary `json:"devices"`
	// AsOf is when the loop computed it; Stale marks the last one the
	// loop published, answered because the loop was busy past readWait.
	AsOf  time.Time `json:"asOf"`
	Stale bool      `json:"stale,omitempty"`
}

// DeviceSummary is one device type and model across the fleet. Devices
// counts them all; Unhealthy those marked so; Allocated is in devices (a
// shared device counts its allocated share); Utilization is the mean of
// the agents' latest samples of its devices (Reported of them), absent
// when none reported.
type DeviceSummary struct {
	Type        string   `json:"type"`
	Model       string   `json:"model"`
	Devices     int      `json:"devices"`
	Unhealthy   int      `json:"unhealthy"`
	Allocated   float64  `json:"allocated"`
	Reported    int      `json:"reported"`
	Utilization *float64 `json:"utilization,omitempty"`
}

// loopViews are the reads that need the core's state (which only the
// loop may touch): the cluster summary, the node views, a task's place in
// its queue. Each runs as a loop command, bounded by readWait where a
// stale answer is allowed. The Engine embeds it; the reads of durable
// records need no loop (published.go).
type loopViews struct {
	e *Engine
}

func (lv *loopViews) summarize() *Summary {
	e := lv.e
	s := &Summary{Policy: e.cfg.Core.Policy, Nodes: map[string]int{}, Resources: map[string]ResourceSummary{}, Pending: map[string]int{}, PendingRaised: map[string]int{}}
	dims := e.c.Dims()
	var capSum, allocSum [resource.MaxDims]int64
	type typeModel struct{ typ, model string }
	devs := map[typeModel]*DeviceSummary{}
	utilSum := map[typeModel]float64{}
	var use measured
	for _, n := range e.c.Nodes() {
		c, a := n.Capacity(), n.Allocated()
		for i := 0; i < dims.Len(); i++ {
			capSum[i] += c[i]
			allocSum[i] += a[i]
		}
		s.Nodes[n.State()]++
		u, heard := e.sessions.usage[n.Name()] // the loop writes usage: it reads it without the lock
		if heard {
			use.node(dims, n, &u)
		}
		for _, d := range n.Devices() {
			k := typeModel{d.Type, d.Model}
			ds := devs[k]
			if ds == nil {
				ds = &DeviceSummary{Type: d.Type, Model: d.Model}
				devs[k] = ds
			}
			ds.Devices++
			if !d.Healthy {
				ds.Unhealthy++
			}
			ds.Allocated += float64(d.Used) / 1000
			if b, ok := u.Devices[d.ID]; heard && ok {
				ds.Reported++
				utilSum[k] += b.Utilization
			}
		}
	}
	s.Devices = make([]DeviceSummary, 0, len(devs))
	for k, ds := range devs {
		if ds.Reported > 0 {
			u := utilSum[k] / float64(ds.Reported)
			ds.Utilization = &u
		}
		s.Devices = append(s.Devices, *ds)
	}
	sort.Slice(s.Devices, func(i, j int) bool {
		a, b := s.Devices[i], s.Devices[j]
		return a.Type < b.Type || a.Type == b.Type && a.Model < b.Model
	})
	for i := 0; i < dims.Len(); i++ {
		r := ResourceSummary{Capacity: capSum[i], Allocated: allocSum[i], Utilization: use.fraction(i)}
		if r.Capacity > 0 {
			r.AllocatedFraction = float64(r.Allocated) / float64(r.Capacity)
		}
		s.Resources[string(dims.Name(i))] = r
	}
	native, raised := e.c.PendingByTier()
	for l := range native {
		s.Pending[api.TierNames[l]] = native[l]
		s.PendingRaised[api.TierNames[l]] = raised[l]
	}
	s.Tasks = e.c.NumTasks()
	return s
}

// Summarize returns the cluster summary, computed by the loop.
//
// It waits for the loop at most readWait: past that, while the loop runs a
// long step, it answers the summary the loop published last, marked
// Stale (only the very first summary waits for the loop in full).
func (lv *loopViews) Summarize(ctx context.Context) (*Summary, error) {
	e := lv.e
	cmd := &summaryCmd{}
	err := e.read(ctx, cmd, readWait)
	if err == errBusy {
		if last := e.lastSummary.Load(); last != nil {
			s := *last
			s.Stale = true
			return &s, nil
		}
		err = e.wait(cmd)
	}
	if err != nil {
		return nil, err
	}
	return cmd.out, nil
}

// summaryCmd computes the cluster summary on the loop.
type summaryCmd struct {
	answer
	out *Summary
}

func (c *summaryCmd) run(e *Engine, now time.Time) {
	c.out = e.summarize()
	c.out.AsOf = now
	e.lastSummary.Store(c.out) // readers never change it: Summarize copies before marking
}

// NodeView is a node as GET /api/v1/nodes shows it: its durable spec plus
// what the scheduler holds on it and its latest heartbeat.
type NodeView struct {
	api.Node
	// Allocated is what placed tasks hold, per resource (cpu in
	// millicores, memory in bytes, devices in milli-devices).
	Allocated map[string]int64 `json:"allocated"`
	Tasks     int              `json:"tasks"`
	// DeviceAllocated is each allocated device's share in milli-devices
	// (1000: whole), keyed "type/id"; devices nobody holds are absent.
	DeviceAllocated map[string]int32 `json:"deviceAllocated,omitempty"`
	// Agent serves the node; empty for a node of the static inventory.
	Agent string              `json:"agent,omitempty"`
	Usage *agentapi.NodeUsage `json:"usage,omitempty"`
	// Utilization is the latest heartbeat's use, 0..1, per resource:
	// cpu, memory (of the node's capacity) and each device type (the
	// mean of its devices). Absent for a node that never heartbeat.
	Utilization map[string]float64 `json:"utilization,omitempty"`
	// Simulated is true when any of its devices is declared, not real.
	Simulated bool `json:"simulated,omitempty"`
	// DerivedLabels are the labels the scheduler adds to the node's own
	// (nvidia.com/gpu.model: H100-80GB, hetsched.io/node: NAME), which
	// selectors match too.
	DerivedLabels map[string]string `json:"derivedLabels,omitempty"`
}

// Label is the node's label k, its own or a derived one.
func (v *NodeView) Label(k string) (string, bool) {
	if l, ok := v.Labels[k]; ok {
		return l, true
	}
	l, ok := v.DerivedLabels[k]
	return l, ok
}

// nodeView is node name's view; the caller holds published.mu for reading and
// runs on the loop (usage is written by the loop only).
func (lv *loopViews) nodeView(name string, spec *api.Node, dims *resource.Dims) NodeView {
	e := lv.e
	v := NodeView{Node: *spec, Allocated: map[string]int64{}, Agent: e.owner[name]}
	v.State = stateOf(spec)
	if n, ok := e.c.Node(name); ok {
		a := n.Allocated()
		for i := 0; i < dims.Len(); i++ {
			if a[i] != 0 {
				v.Allocated[string(dims.Name(i))] = a[i]
			}
		}
		v.Tasks = n.TaskCount()
		for _, d := range n.Devices() {
			if d.Used != 0 {
				if v.DeviceAllocated == nil {
					v.DeviceAllocated = map[string]int32{}
				}
				v.DeviceAllocated[d.Type+"/"+d.ID] = d.Used
			}
		}
		n.EachLabel(func(k, l string) {
			if own, ok := spec.Labels[k]; !ok || own != l {
				if v.DerivedLabels == nil {
					v.DerivedLabels = map[string]string{}
				}
				v.DerivedLabels[k] = l
			}
		})
	}
	if u, ok := e.sessions.usage[name]; ok {
		v.Usage = &u
		v.Utilization = utilizationOf(spec, &u)
	}
	for _, d := range spec.Devices {
		v.Simulated = v.Simulated || d.Simulated
	}
	return v
}

// stateOf is a node spec's state, ready when unset.
func stateOf(n *api.Node) string {
	if n.State == "" {
		return api.NodeReady
	}
	return n.State
}

// NodeQuery selects a page of nodes in name order (NodePage).
type NodeQuery struct {
	// After is the name the page starts after ("" from the first).
	After string
	// Limit bounds the page; 0 is no bound.
	Limit int
	// State keeps nodes in that state (ready, notready, cordoned,
	// draining); "" keeps all.
	State string
	// Match, when set, keeps the views it returns true for (a label
	// selector). It runs on the loop: it must be quick and pure.
	Match func(*NodeView) bool
}

// NodePage is a page of nodes in name order: those after q.After that q
// keeps, at most q.Limit; next is the name to continue after ("" at the
// end); total counts every node q keeps, on every page. Without Match
// only the page's views are built.
func (lv *loopViews) NodePage(ctx context.Context, q NodeQuery) (page []NodeView, next string, total int, err error) {
	e := lv.e
	cmd := &nodePageCmd{q: q}
	if err := e.read(ctx, cmd, viewWait); err != nil {
		return nil, "", 0, err
	}
	return cmd.out, cmd.next, cmd.total, nil
}

// nodePageCmd computes a node page on the loop.
type nodePageCmd struct {
	answer
	q     NodeQuery
	out   []NodeView
	next  string
	total int
}

func (c *nodePageCmd) run(e *Engine, _ time.Time) { c.out, c.next, c.total = e.nodePage(c.q) }

// nodePage runs on the loop.
func (lv *loopViews) nodePage(q NodeQuery) (out []NodeView, next string, total int) {
	e := lv.e
	dims := e.c.Dims()
	e.mu.RLock()
	defer e.mu.RUnlock()
	names := make([]string, 0, len(e.nodes))
	for name, spec := range e.nodes {
		if q.State == "" || stateOf(spec) == q.State {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if q.Match == nil {
		from := sort.SearchStrings(names, q.After)
		if from < len(names) && names[from] == q.After && q.After != "" {
			from++
		}
		to := len(names)
		if q.Limit > 0 && from+q.Limit < to {
			to = from + q.Limit
			next = names[to-1]
		}
		out = make([]NodeView, 0, max(to-from, 0))
		for _, name := range names[from:to] {
			out = append(out, e.nodeView(name, e.nodes[name], dims))
		}
		return out, next, len(names)
	}
	for _, name := range names {
		v := e.nodeView(name, e.nodes[name], dims)
		if !q.Match(&v) {
			continue
		}
		total++
		switch {
		case q.After != "" && name <= q.After:
		case q.Limit > 0 && len(out) == q.Limit:
			if next == "" {
				next = out[len(out)-1].Name
			}
		default:
			out = append(out, v)
		}
	}
	return out, next, total
}

// NodeViews returns every node with its allocation and usage, computed by
// the loop, in name order.
func (lv *loopViews) NodeViews(ctx context.Context) ([]NodeView, error) {
	e := lv.e
	page, _, _, err := e.NodePage(ctx, NodeQuery{})
	return page, err
}

// NodeViewOf returns node name's view; false when there is none.
func (lv *loopViews) NodeViewOf(ctx context.Context, name string) (NodeView, bool, error) {
	e := lv.e
	cmd := &nodeViewCmd{name: name}
	if err := e.read(ctx, cmd, viewWait); err != nil {
		return NodeView{}, false, err
	}
	return cmd.out, cmd.ok, nil
}

// nodeViewCmd computes one node's view on the loop.
type nodeViewCmd struct {
	answer
	name string
	out  NodeView
	ok   bool
}

func (c *nodeViewCmd) run(e *Engine, _ time.Time) {
	dims := e.c.Dims()
	e.mu.RLock()
	defer e.mu.RUnlock()
	if spec, ok := e.nodes[c.name]; ok {
		c.out, c.ok = e.nodeView(c.name, spec, dims), true
	}
}

// utilizationOf summarizes a heartbeat per resource (NodeView.Utilization).
func utilizationOf(n *api.Node, u *agentapi.NodeUsage) map[string]float64 {
	out := map[string]float64{}
	if !u.Simulated { // a simulated node's CPU and memory are not measured
		out["cpu"] = u.CPU
		if mem := n.Capacity[resource.Memory]; mem > 0 && u.MemoryUsed > 0 {
			out["memory"] = min(float64(u.MemoryUsed)/float64(mem), 1)
		}
	}
	sum, count := map[string]float64{}, map[string]int{}
	for _, d := range n.Devices {
		if b, ok := u.Devices[d.ID]; ok {
			sum[d.Type] += b.Utilization
			count[d.Type]++
		}
	}
	for typ, total := range sum {
		out[typ] = total / float64(count[typ])
	}
	return out
}

// QueueInfo reports where pending task id stands (core.QueueInfo),
// computed by the loop; false when it is not pending in a class queue.
func (lv *loopViews) QueueInfo(ctx context.Context, id string) (core.QueueInfo, bool, error) {
	e := lv.e
	cmd := &queueInfoCmd{id: id}
	if err := e.read(ctx, cmd, viewWait); err != nil {
		return core.QueueInfo{}, false, err
	}
	return cmd.out, cmd.ok, nil
}

// queueInfoCmd computes one task's core.QueueInfo on the loop.
type queueInfoCmd struct {
	answer
	id  string
	out core.QueueInfo
	ok  bool
}

func (c *queueInfoCmd) run(e *Engine, _ time.Time) { c.out, c.ok = e.c.QueueInfo(c.id) }
