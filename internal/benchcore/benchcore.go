// Package benchcore holds the core's benchmark shapes, shared by
// `go test -bench` and `hetsched-bench core`: the heterogeneous fleet (10,000
// nodes: CPU-only, 8-GPU of three models, 4-TPU) with mixed four-tier work,
// and the peer shape of YuniKorn core's in-process benchmark (2 queues, tasks
// of {cpu 1, memory 10}, nodes sized so the cluster ends nearly full).
package benchcore

import (
	"fmt"
	"runtime"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

// Options choose how a shape runs.
type Options struct {
	Policy string
	// Presize sets core.Config.TaskCapacityHint to the task count.
	Presize bool
}

// Result is one shape's measurement.
type Result struct {
	Shape            string  `json:"shape"`
	Policy           string  `json:"policy"`
	Presized         bool    `json:"presized"`
	Nodes            int     `json:"nodes"`
	Tasks            int     `json:"tasks"`
	Pending          int     `json:"pendingBeforeDispatch"`
	Placements       int     `json:"placements"`
	Seconds          float64 `json:"seconds"`
	PlacementsPerSec float64 `json:"placementsPerSec"`
	NsPerPlacement   float64 `json:"nsPerPlacement"`
	// DispatchNsPerPlacement is the dispatch alone (tasks already queued).
	DispatchNsPerPlacement float64 `json:"dispatchNsPerPlacement"`
	HeapBytesPerPending    float64 `json:"heapBytesPerPendingTask,omitempty"`
	// Gangs is the gang shape's own measurement (Gangs).
	Gangs *GangResult `json:"gangs,omitempty"`
}

func (r Result) String() string {
	if r.Gangs != nil {
		return r.Gangs.String() + " policy=" + r.Policy
	}
	s := fmt.Sprintf("%-6s policy=%s presized=%v nodes=%d tasks=%d pending=%d placements=%d placementsPerSec=%.0f nsPerPlacement=%.0f dispatchNsPerPlacement=%.0f",
		r.Shape, r.Policy, r.Presized, r.Nodes, r.Tasks, r.Pending, r.Placements, r.PlacementsPerSec, r.NsPerPlacement, r.DispatchNsPerPlacement)
	if r.HeapBytesPerPending > 0 {
		s += fmt.Sprintf(" heapBytesPerPendingTask=%.0f", r.HeapBytesPerPending)
	}
	return s
}

func q(s string) int64 {
	v, err := resource.ParseQuantity(s, resource.Units)
	if err != nil {
		panic(err)
	}
	return v
}

// FleetNodes builds the heterogeneous fleet scaled to n nodes: 60% CPU-only,
// 30% with 8 GPUs (H100, A100 and L4 in equal parts, two NVLink domains of
// four), 10% with 4 TPUs.
func FleetNodes(n int) []api.Node {
	nodes := make([]api.Node, 0, n)
	cpuN, gpuN := n*6/10, n*3/10
	models := []string{"H100-80GB", "A100-40GB", "L4"}
	for i := 0; i < n; i++ {
		nd := api.Node{Name: "node-" + strconv.Itoa(i)}
		switch {
		case i < cpuN:
			nd.Capacity = resource.List{resource.CPU: 128000, resource.Memory: q("512Gi")}
			nd.Labels = map[string]string{"pool": "cpu"}
		case i < cpuN+gpuN:
			m := models[(i-cpuN)%3]
			nd.Capacity = resource.List{resource.CPU: 96000, resource.Memory: q("1Ti")}
			nd.Labels = map[string]string{"pool": "gpu"}
			for d := 0; d < 8; d++ {
				nd.Devices = append(nd.Devices, api.Device{Type: "nvidia.com/gpu", ID: strconv.Itoa(d), Model: m,
					Memory: api.Bytes(q("80Gi")), Topology: map[string]string{"nvlink": "nv" + strconv.Itoa(d/4), "numa": strconv.Itoa(d / 4)}})
			}
		default:
			nd.Capacity = resource.List{resource.CPU: 96000, resource.Memory: q("512Gi")}
			nd.Labels = map[string]string{"pool": "tpu"}
			for d := 0; d < 4; d++ {
				nd.Devices = append(nd.Devices, api.Device{Type: "google.com/tpu", ID: strconv.Itoa(d), Model: "v5e",
					Topology: map[string]string{"ici": "ici0"}})
			}
		}
		nodes = append(nodes, nd)
	}
	return nodes
}

// fleetShapes is the mix of work: mostly CPU tasks, some whole and shared
// GPU tasks, a few TPU tasks, some with a GPU-or-TPU alternative.
func fleetShapes() []api.Task {
	p := func(v int) *int { return &v }
	return []api.Task{
		{Resources: resource.List{resource.CPU: 500, resource.Memory: q("1Gi")}},
		{Resources: resource.List{resource.CPU: 250, resource.Memory: q("512Mi")}},
		{Resources: resource.List{resource.CPU: 1000, resource.Memory: q("2Gi")}},
		{Resources: resource.List{resource.CPU: 1000, resource.Memory: q("4Gi"), "nvidia.com/gpu": 250}},
		{Resources: resource.List{resource.CPU: 2000, resource.Memory: q("8Gi"), "nvidia.com/gpu": 1000},
			Alternatives: []api.Alternative{{Resources: resource.List{resource.CPU: 2000, "google.com/tpu": 1000}, Speed: 1.2}}},
		{Resources: resource.List{resource.CPU: 1000, resource.Memory: q("2Gi"), "google.com/tpu": 1000}, Priority: p(1)},
	}
}

// shape index for task i: 94.7% CPU, 4% quarter-GPU shares, 1% whole GPU
// (or a TPU), 0.3% TPU. At 1M tasks on the 10,000-node fleet this asks for
// 20,000 of 24,000 GPUs and 3,000 of 4,000 TPUs: everything fits.
func fleetShapeOf(i int) int {
	switch r := i % 1000; {
	case r < 310:
		return 0
	case r < 620:
		return 1
	case r < 947:
		return 2
	case r < 987:
		return 3
	case r < 997:
		return 4
	default:
		return 5
	}
}

// tierOf spreads tasks over the four tiers: 1% urgent, 4% high, 30%
// medium, 65% low.
func tierOf(i int) int {
	switch r := i % 100; {
	case r < 1:
		return 0
	case r < 5:
		return 1
	case r < 35:
		return 2
	default:
		return 3
	}
}

// benchConfig holds medium and low tasks until an explicit Tick so that a
// known number is pending before the dispatch is measured.
func benchConfig(opt Options, tasks int) core.Config {
	cfg := core.DefaultConfig()
	cfg.Policy = opt.Policy
	if opt.Presize {
		cfg.TaskCapacityHint = tasks
	}
	for l := 2; l < 4; l++ {
		cfg.Tiers[l].BatchSize = 1 << 20
		cfg.Tiers[l].Window = time.Hour
		cfg.Tiers[l].AgingAfter = 0
	}
	return cfg
}

// newCore builds a core holding nodes.
func newCore(cfg core.Config, nodes []api.Node, now time.Time) (*core.Core, error) {
	c, err := core.New(cfg)
	if err != nil {
		return nil, err
	}
	for i := range nodes {
		if err := c.UpsertNode(now, &nodes[i]); err != nil {
			return nil, err
		}
	}
	c.TakeOutput()
	return c, nil
}

// fill ticks c every step from now until a Tick places nothing, appending
// the placed tasks to running; it returns running and the clock.
func fill(c *core.Core, now time.Time, step time.Duration, running []string) ([]string, time.Time) {
	for {
		now = now.Add(step)
		c.Tick(now)
		out := c.TakeOutput()
		for _, p := range out.Placements {
			running = append(running, p.Task)
		}
		if len(out.Placements) == 0 {
			return running, now
		}
	}
}

// Fleet submits tasks mixed tasks to the fleet of nodes and places them
// all: urgent and high at once, medium and low in one dispatch.
func Fleet(opt Options, nodes, tasks int) (Result, error) {
	shapes := fleetShapes()
	specs := make([]api.Task, tasks)
	for i := range specs {
		specs[i] = shapes[fleetShapeOf(i)]
		specs[i].ID = "t" + strconv.Itoa(i)
		if specs[i].Priority == nil {
			p := tierOf(i)
			specs[i].Priority = &p
		}
	}
	return run("fleet", opt, FleetNodes(nodes), specs, true)
}

// Peer is YuniKorn core's benchmark shape: m nodes, n tasks of {cpu 1,
// memory 10} in 2 queues, nodes sized so the cluster ends nearly full.
func Peer(opt Options, m, n int) (Result, error) {
	per := (n + m - 1) / m
	nodes := make([]api.Node, m)
	for i := range nodes {
		nodes[i] = api.Node{Name: "node-" + strconv.Itoa(i),
			Capacity: resource.List{resource.CPU: int64(per) * 1000, resource.Memory: int64(per) * 10}}
	}
	low := 3
	specs := make([]api.Task, n)
	for i := range specs {
		specs[i] = api.Task{ID: "t" + strconv.Itoa(i), Queue: "root.q" + strconv.Itoa(i%2), Priority: &low,
			Resources: resource.List{resource.CPU: 1000, resource.Memory: 10}}
	}
	return run("peer", opt, nodes, specs, false)
}

func run(shape string, opt Options, nodes []api.Node, specs []api.Task, measureHeap bool) (Result, error) {
	now := time.Unix(1_700_000_000, 0)
	c, err := newCore(benchConfig(opt, len(specs)), nodes, now)
	if err != nil {
		return Result{}, err
	}
	var before runtime.MemStats
	runtime.GC() // the setup's garbage is not the measurement's
	if measureHeap {
		runtime.ReadMemStats(&before)
	}
	start := time.Now()
	placed := 0
	for i := range specs {
		if err := c.Submit(now, &specs[i]); err != nil {
			return Result{}, fmt.Errorf("task %d: %w", i, err)
		}
		if i%4096 == 4095 {
			placed += len(c.TakeOutput().Placements)
		}
	}
	submitDur := time.Since(start)
	placed += len(c.TakeOutput().Placements)
	p := c.Pending()
	pending := p[0] + p[1] + p[2] + p[3]
	res := Result{Shape: shape, Policy: opt.Policy, Presized: opt.Presize, Nodes: len(nodes), Tasks: len(specs), Pending: pending}
	if measureHeap && pending > 0 {
		var after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&after)
		if d := int64(after.HeapAlloc) - int64(before.HeapAlloc); d > 0 {
			res.HeapBytesPerPending = float64(d) / float64(len(specs))
		}
	}
	d0 := time.Now()
	t := now.Add(2 * time.Hour)
	dispatched := 0
	for {
		c.Tick(t)
		n := len(c.TakeOutput().Placements)
		dispatched += n
		next, ok := c.NextWakeup()
		if !ok || (n == 0 && next.After(t)) {
			break
		}
		if next.After(t) {
			t = next // a search that ran out of budget resumes
		}
	}
	dispatch := time.Since(d0)
	placed += dispatched
	total := submitDur + dispatch
	res.Placements = placed
	res.Seconds = total.Seconds()
	if placed > 0 {
		res.PlacementsPerSec = float64(placed) / total.Seconds()
		res.NsPerPlacement = float64(total.Nanoseconds()) / float64(placed)
	}
	if dispatched > 0 {
		res.DispatchNsPerPlacement = float64(dispatch.Nanoseconds()) / float64(dispatched)
	}
	return res, nil
}

// Spec names one measurement: a shape on a node count with a task count.
type Spec struct {
	Shape string
	Nodes int
	Tasks int
}

// DefaultSpecs are the shapes of the scheduling-core issue: the fleet of
// 10,000 nodes with 10k, 100k and 1M tasks pending before the dispatch, the
// peer shape at (500, 10k), (5k, 10k) and (10k, 40k), and the steady state
// of a full 10,000-node cluster with 10k, 100k and 1M tasks waiting (one
// finish, one placement; nsPerPlacement is per such cycle).
func DefaultSpecs() []Spec {
	return []Spec{
		{"fleet", 10000, 10_000}, {"fleet", 10000, 100_000}, {"fleet", 10000, 1_000_000},
		{"peer", 500, 10_000}, {"peer", 5000, 10_000}, {"peer", 10000, 40_000},
		{"churn", 10000, 10_000}, {"churn", 10000, 100_000}, {"churn", 10000, 1_000_000},
	}
}

// RunSpec runs one spec.
func RunSpec(opt Options, s Spec) (Result, error) {
	if s.Nodes < 1 || s.Nodes > 1_000_000 {
		return Result{}, fmt.Errorf("nodes: must be 1..1000000, got %d", s.Nodes)
	}
	if s.Tasks < 1 || s.Tasks > 20_000_000 {
		return Result{}, fmt.Errorf("tasks: must be 1..20000000, got %d", s.Tasks)
	}
	switch s.Shape {
	case "fleet":
		return Fleet(opt, s.Nodes, s.Tasks)
	case "peer":
		return Peer(opt, s.Nodes, s.Tasks)
	case "churn":
		r, err := Churn(opt, s.Nodes, s.Tasks, 20000)
		if err != nil {
			return Result{}, err
		}
		return Result{Shape: "churn", Policy: opt.Policy, Presized: opt.Presize, Nodes: r.Nodes, Tasks: r.Pending,
			Pending: r.Pending, Placements: r.PlacedInCycle, Seconds: r.NsPerCycle * float64(r.Cycles) / 1e9,
			PlacementsPerSec: 1e9 / r.NsPerCycle, NsPerPlacement: r.NsPerCycle}, nil
	case "gangs":
		r, err := Gangs(opt, s.Nodes, s.Tasks)
		if err != nil {
			return Result{}, err
		}
		return Result{Shape: "gangs", Policy: opt.Policy, Presized: opt.Presize, Nodes: r.Nodes, Tasks: r.Members,
			Pending: r.Members - r.Placed, Placements: r.Placed, Seconds: r.Seconds,
			PlacementsPerSec: float64(r.Placed) / r.Seconds, Gangs: &r}, nil
	}
	return Result{}, fmt.Errorf("shape: must be fleet, peer, churn or gangs, got %q", s.Shape)
}

// ChurnResult is the steady-state cost on a full cluster: one task
// finishes and one of the pending tasks takes its place.
type ChurnResult struct {
	Nodes         int     `json:"nodes"`
	Pending       int     `json:"pending"`
	Classes       int     `json:"classes"`
	Cycles        int     `json:"cycles"`
	NsPerCycle    float64 `json:"nsPerCycle"`
	PlacedInCycle int     `json:"placed"`
}

func (r ChurnResult) String() string {
	return fmt.Sprintf("churn  nodes=%d pending=%d classes=%d cycles=%d nsPerFinishAndPlace=%.0f", r.Nodes, r.Pending, r.Classes, r.Cycles, r.NsPerCycle)
}

// Churn fills nodes (16 cpu each) with tasks of 4 classes, queues pending
// more behind them (blocked), then measures cycles of "a running task
// finishes, the scheduler places a waiting one".
func Churn(opt Options, nodes, pending, cycles int) (ChurnResult, error) {
	ns := make([]api.Node, nodes)
	for i := range ns {
		ns[i] = api.Node{Name: "node-" + strconv.Itoa(i), Capacity: resource.List{resource.CPU: 16000, resource.Memory: q("64Gi")}}
	}
	now := time.Unix(1_700_000_000, 0)
	// Default tiers: the low tier dispatches 20ms after a release wakes it.
	cfg := core.DefaultConfig()
	cfg.Policy = opt.Policy
	if opt.Presize {
		cfg.TaskCapacityHint = nodes*16 + pending
	}
	c, err := newCore(cfg, ns, now)
	if err != nil {
		return ChurnResult{}, err
	}
	prio := 3
	mk := func(i int) api.Task {
		// 4 classes: 1 cpu with 1/2/3/4 GiB.
		return api.Task{ID: "t" + strconv.Itoa(i), Priority: &prio,
			Resources: resource.List{resource.CPU: 1000, resource.Memory: int64(1+i%4) << 30}}
	}
	total := nodes*16 + pending
	running := make([]string, 0, nodes*16)
	for i := 0; i < total; i++ {
		spec := mk(i)
		if err := c.Submit(now, &spec); err != nil {
			return ChurnResult{}, err
		}
	}
	running, now = fill(c, now, time.Hour, running)
	if len(running) != nodes*16 {
		return ChurnResult{}, fmt.Errorf("filled %d of %d slots", len(running), nodes*16)
	}
	if cycles > len(running) {
		cycles = len(running)
	}
	placed := 0
	runtime.GC() // the fill's garbage is not the steady state's
	start := time.Now()
	for i := 0; i < cycles; i++ {
		now = now.Add(time.Millisecond)
		if err := c.TaskFinished(now, running[i], core.Result{}); err != nil {
			return ChurnResult{}, err
		}
		c.Tick(now.Add(20 * time.Millisecond)) // the low tier's window
		placed += len(c.TakeOutput().Placements)
	}
	el := time.Since(start)
	return ChurnResult{Nodes: nodes, Pending: pending, Classes: 4, Cycles: cycles, NsPerCycle: float64(el.Nanoseconds()) / float64(cycles), PlacedInCycle: placed}, nil
}
