package benchcore

import (
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

// PreemptResult is the urgent-arrival measurement on a full cluster.
type PreemptResult struct {
	Nodes    int `json:"nodes"`
	Running  int `json:"running"`
	Backlog  int `json:"backlog"`
	Tenants  int `json:"tenants"`
	Arrivals int `json:"arrivals"`
	// Placed counts arrivals placed by their own Submit call (victims
	// chosen and evicted within it).
	Placed       int     `json:"placed"`
	VictimsPerOp float64 `json:"victimsPerArrival"`
	P50Ns        int64   `json:"p50Ns"`
	P90Ns        int64   `json:"p90Ns"`
	P99Ns        int64   `json:"p99Ns"`
	MaxNs        int64   `json:"maxNs"`
}

func (r PreemptResult) String() string {
	return fmt.Sprintf("preempt nodes=%d running=%d backlog=%d tenants=%d arrivals=%d placed=%d victimsPerArrival=%.2f p50=%s p90=%s p99=%s max=%s",
		r.Nodes, r.Running, r.Backlog, r.Tenants, r.Arrivals, r.Placed, r.VictimsPerOp,
		time.Duration(r.P50Ns), time.Duration(r.P90Ns), time.Duration(r.P99Ns), time.Duration(r.MaxNs))
}

// Preempt fills the heterogeneous fleet of nodes exactly with low-priority
// preemptible work of the tenant queues (each guaranteed a fifth of every
// resource, so each borrows a little), queues a backlog behind it, and then
// times urgent arrivals one at a time: the core's Submit call, from the
// task's arrival to its placement with its victims chosen and evicted.
// Arrivals alternate between a CPU task, a GPU task and a TPU task, from the
// four tenants in turn. After each measured arrival the urgent task ends
// and the cluster refills (not timed).
//
// With tenants 0 the same work names no queue (the cost of the queue
// machinery is the difference).
func Preempt(opt Options, nodes, arrivals, tenants int) (PreemptResult, error) {
	ns := FleetNodes(nodes)
	now := time.Unix(1_700_000_000, 0)
	cfg := core.DefaultConfig()
	cfg.Policy = opt.Policy
	c, err := newCore(cfg, ns, now)
	if err != nil {
		return PreemptResult{}, err
	}
	var total resource.List = resource.List{}
	for _, n := range ns {
		for k, v := range n.Capacity {
			total[k] += v
		}
		for _, d := range n.Devices {
			total[resource.Name(d.Type)] += 1000
		}
	}
	guar := resource.List{}
	for k, v := range total {
		guar[k] = v / int64(tenants+1)
	}
	for i := 0; i < tenants; i++ {
		if err := c.SetQueue(now, &api.Queue{Name: "tenant-" + strconv.Itoa(i), Guaranteed: guar}); err != nil {
			return PreemptResult{}, err
		}
	}
	low := 3
	gi := q("1Gi")
	// Fillers sized so that each pool's nodes are exactly full.
	cpuTask := api.Task{Priority: &low, NodeSelector: map[string]string{"pool": "cpu"},
		Resources: resource.List{resource.CPU: 8000, resource.Memory: 32 * gi}}
	gpuTask := api.Task{Priority: &low, NodeSelector: map[string]string{"pool": "gpu"},
		Resources: resource.List{resource.CPU: 12000, resource.Memory: 128 * gi, "nvidia.com/gpu": 1000}}
	tpuTask := api.Task{Priority: &low, NodeSelector: map[string]string{"pool": "tpu"},
		Resources: resource.List{resource.CPU: 24000, resource.Memory: 128 * gi, "google.com/tpu": 1000}}
	cpuN, gpuN := nodes*6/10, nodes*3/10
	tpuN := nodes - cpuN - gpuN
	running := cpuN*16 + gpuN*8 + tpuN*4
	backlog := running / 10
	seq := 0
	queueOf := func(i int) string {
		if tenants == 0 {
			return ""
		}
		return "tenant-" + strconv.Itoa(i%tenants)
	}
	submit := func(tmpl api.Task) error {
		spec := tmpl
		spec.ID = "f" + strconv.Itoa(seq)
		spec.Queue = queueOf(seq)
		seq++
		return c.Submit(now, &spec)
	}
	for i := 0; i < cpuN*16+backlog/3; i++ {
		if err := submit(cpuTask); err != nil {
			return PreemptResult{}, err
		}
	}
	for i := 0; i < gpuN*8+backlog/3; i++ {
		if err := submit(gpuTask); err != nil {
			return PreemptResult{}, err
		}
	}
	for i := 0; i < tpuN*4+backlog/3; i++ {
		if err := submit(tpuTask); err != nil {
			return PreemptResult{}, err
		}
	}
	placed := 0
	for {
		now = now.Add(time.Second)
		c.Tick(now)
		n := len(c.TakeOutput().Placements)
		placed += n
		if n == 0 {
			break
		}
	}
	if placed != running {
		return PreemptResult{}, fmt.Errorf("filled %d of %d slots", placed, running)
	}
	urgent := 0
	shapes := []api.Task{
		{Priority: &urgent, Resources: resource.List{resource.CPU: 8000, resource.Memory: 32 * gi}},
		{Priority: &urgent, Resources: resource.List{resource.CPU: 4000, resource.Memory: 64 * gi, "nvidia.com/gpu": 1000}},
		{Priority: &urgent, Resources: resource.List{resource.CPU: 8000, resource.Memory: 64 * gi, "google.com/tpu": 1000}},
	}
	durs := make([]int64, 0, arrivals)
	res := PreemptResult{Nodes: nodes, Running: running, Backlog: backlog / 3 * 3, Tenants: tenants, Arrivals: arrivals}
	victims := 0
	runtime.GC()
	for i := 0; i < arrivals; i++ {
		now = now.Add(time.Second) // past the minimum runtime, if any
		spec := shapes[i%len(shapes)]
		spec.ID = "u" + strconv.Itoa(i)
		spec.Queue = queueOf(i)
		start := time.Now()
		err := c.Submit(now, &spec)
		d := time.Since(start)
		if err != nil {
			return res, err
		}
		durs = append(durs, d.Nanoseconds())
		out := c.TakeOutput()
		for _, p := range out.Placements {
			if p.Task == spec.ID {
				res.Placed++
			}
		}
		victims += len(out.Preemptions)
		// Untimed: the urgent task ends and the cluster refills.
		now = now.Add(time.Millisecond)
		if t, ok := c.Task(spec.ID); ok && !t.State().Terminal() {
			if err := c.TaskFinished(now, spec.ID, core.Result{}); err != nil {
				return res, err
			}
		}
		now = now.Add(time.Second)
		c.Tick(now)
		c.TakeOutput()
	}
	slices.Sort(durs)
	pct := func(p float64) int64 { return durs[min(len(durs)-1, int(p*float64(len(durs))))] }
	res.P50Ns, res.P90Ns, res.P99Ns, res.MaxNs = pct(0.50), pct(0.90), pct(0.99), durs[len(durs)-1]
	res.VictimsPerOp = float64(victims) / float64(arrivals)
	return res, nil
}
