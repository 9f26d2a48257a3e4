package engine

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/metrics"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// TestNodeCollector: the per-node and per-device series show a node's
// allocation in base units, each device's allocated share and health, and
// its agent's heartbeat; a fleet past the limit exports none of them and
// says so; a missing engine (a standby) exports nothing.
func TestNodeCollector(t *testing.T) {
	ctx := context.Background()
	e, st := open(t, t.TempDir())
	defer st.Close()
	defer e.Close()
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("g1")}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Submit(ctx, "default", []api.Task{{ID: "t", Priority: prio(0), Resources: resource.List{resource.CPU: 1500, "nvidia.com/gpu": 500}}}); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Task("t"); r.State != "scheduled" {
		t.Fatalf("t is %s", r.State)
	}
	if _, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "g1", CPU: 0.25, MemoryUsed: 1 << 30,
		Devices: map[string]agentapi.DeviceBeat{"0": {Utilization: 0.75, MemoryUsed: 2 << 30}, "1": {Healthy: new(false), Reason: "XID 79"}}}}); err != nil {
		t.Fatal(err)
	}
	r, _ := e.Task("t")
	dev := r.Devices[0].ID
	other := map[string]string{"0": "1", "1": "0"}[dev]

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NodeCollector(func() *Engine { return e }, 10, 5*time.Second))
	want := `
# HELP hetsched_node_resource_allocated A node's allocated resources by resource, in base units (as hetsched_node_resource_capacity).
# TYPE hetsched_node_resource_allocated gauge
hetsched_node_resource_allocated{node="g1",resource="cpu"} 1.5
hetsched_node_resource_allocated{node="g1",resource="memory"} 0
hetsched_node_resource_allocated{node="g1",resource="nvidia.com/gpu"} 0.5
# HELP hetsched_node_device_allocated_ratio The allocated share of one device, 0..1 (a whole device is 1).
# TYPE hetsched_node_device_allocated_ratio gauge
hetsched_node_device_allocated_ratio{device="` + dev + `",model="L4",node="g1",type="nvidia.com/gpu"} 0.5
hetsched_node_device_allocated_ratio{device="` + other + `",model="L4",node="g1",type="nvidia.com/gpu"} 0
# HELP hetsched_node_device_healthy 1 while a device is healthy, 0 while it is not (unhealthy devices take no new work).
# TYPE hetsched_node_device_healthy gauge
hetsched_node_device_healthy{device="0",model="L4",node="g1",type="nvidia.com/gpu"} 1
hetsched_node_device_healthy{device="1",model="L4",node="g1",type="nvidia.com/gpu"} 0
# HELP hetsched_node_cpu_utilization_ratio The fraction of a node's CPU in use, from its agent's latest heartbeat (absent without an agent).
# TYPE hetsched_node_cpu_utilization_ratio gauge
hetsched_node_cpu_utilization_ratio{node="g1"} 0.25
# HELP hetsched_node_device_utilization_ratio A device's utilization, 0..1, from its agent's latest heartbeat (absent when not reported).
# TYPE hetsched_node_device_utilization_ratio gauge
hetsched_node_device_utilization_ratio{device="0",node="g1",type="nvidia.com/gpu"} 0.75
hetsched_node_device_utilization_ratio{device="1",node="g1",type="nvidia.com/gpu"} 0
# HELP hetsched_node_device_memory_used_bytes A device's memory in use, from its agent's latest heartbeat (absent when not reported).
# TYPE hetsched_node_device_memory_used_bytes gauge
hetsched_node_device_memory_used_bytes{device="0",node="g1",type="nvidia.com/gpu"} 2.147483648e+09
# HELP hetsched_node_series_capped 1 when the fleet has more nodes than the per-node series limit (--node-metrics-limit), so that no per-node or per-device series is exported; 0 otherwise.
# TYPE hetsched_node_series_capped gauge
hetsched_node_series_capped 0
`
	names := []string{"hetsched_node_resource_allocated", "hetsched_node_device_allocated_ratio", "hetsched_node_device_healthy",
		"hetsched_node_cpu_utilization_ratio", "hetsched_node_device_utilization_ratio", "hetsched_node_device_memory_used_bytes", "hetsched_node_series_capped"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}

	// The cluster summary's devices by type and model say the same.
	sum, err := e.Summarize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	util := 0.375 // the mean of 0.75 and 0
	if want := []DeviceSummary{{Type: "nvidia.com/gpu", Model: "L4", Devices: 2, Unhealthy: 1, Allocated: 0.5, Reported: 2, Utilization: &util}}; !cmp.Equal(sum.Devices, want) {
		t.Errorf("summary devices: %s", cmp.Diff(want, sum.Devices))
	}

	// Past the limit: only the flag.
	if err := e.UpsertNode(ctx, gpuNode("g2")); err != nil {
		t.Fatal(err)
	}
	capped := prometheus.NewPedanticRegistry()
	capped.MustRegister(NodeCollector(func() *Engine { return e }, 1, 5*time.Second))
	if n, err := testutil.GatherAndCount(capped); err != nil || n != 1 {
		t.Errorf("past the limit: %d series (%v), want only hetsched_node_series_capped", n, err)
	}
	if v := testutil.ToFloat64(NodeCollector(func() *Engine { return e }, 1, 5*time.Second)); v != 1 {
		t.Errorf("hetsched_node_series_capped %v, want 1", v)
	}
	standby := prometheus.NewPedanticRegistry()
	standby.MustRegister(NodeCollector(func() *Engine { return nil }, 10, 5*time.Second))
	if n, err := testutil.GatherAndCount(standby); err != nil || n != 0 {
		t.Errorf("without an engine: %d series (%v), want none", n, err)
	}
}

// TestAttemptLatencyObserved: a placement and an attempt that found no
// place are each observed once in the decision-latency histogram, under
// their tier and result; with a frozen clock the latency is the core's
// part alone (0 here: both were decided at their submission).
func TestAttemptLatencyObserved(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := prometheus.NewPedanticRegistry()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, err := New(Config{Core: core.DefaultConfig(), Now: clk.Now, Metrics: metrics.New(reg)}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	gpus := func(id string) api.Task {
		return api.Task{ID: id, Priority: prio(0), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 2000}}
	}
	if _, _, err := e.Submit(ctx, "default", []api.Task{gpus("fits"), gpus("waits")}); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "hetsched_scheduling_attempt_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var tier, result string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "tier":
					tier = l.GetValue()
				case "result":
					result = l.GetValue()
				}
			}
			h := m.GetHistogram()
			if h.GetSampleCount() > 0 {
				got[tier+"/"+result] = h.GetSampleCount()
				if h.GetSampleSum() != 0 {
					t.Errorf("%s/%s: sum %v with a frozen clock, want 0", tier, result, h.GetSampleSum())
				}
			}
		}
	}
	if want := map[string]uint64{"urgent/scheduled": 1, "urgent/unschedulable": 1}; !maps.Equal(got, want) {
		t.Errorf("attempts observed %v, want %v", got, want)
	}
}

// BenchmarkNodeCollector: one scrape of the per-node series of 1,000
// (the default limit) and 2,000 nodes of eight GPUs: the loop's walk, and
// the whole gather.
func BenchmarkNodeCollector(b *testing.B) {
	for _, size := range []int{1000, 2000} {
		b.Run(strconv.Itoa(size), func(b *testing.B) { benchNodeCollector(b, size) })
	}
}

// benchFleet is an engine on a store on disk holding size nodes of eight
// H100s (80 GiB each); it closes when b ends.
func benchFleet(b *testing.B, size int) *Engine {
	st, err := store.OpenDisk(b.TempDir(), store.DiskOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	e, err := New(Config{Core: core.DefaultConfig()}, st)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	nodes := make([]api.Node, size)
	for i := range nodes {
		n := api.Node{Name: "n" + strconv.Itoa(i), Capacity: resource.List{resource.CPU: 64000, resource.Memory: 512 << 30}}
		for d := 0; d < 8; d++ {
			n.Devices = append(n.Devices, api.Device{Type: "nvidia.com/gpu", ID: strconv.Itoa(d), Model: "H100", Memory: 80 << 30})
		}
		nodes[i] = n
	}
	if _, err := e.UpsertNodes(context.Background(), nodes); err != nil {
		b.Fatal(err)
	}
	return e
}

func benchNodeCollector(b *testing.B, size int) {
	ctx := context.Background()
	e := benchFleet(b, size)
	b.Run("loop", func(b *testing.B) { // the loop's part: the walk
		for b.Loop() {
			if err := e.do(ctx, &nodeSnapshotCmd{limit: size}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gather", func(b *testing.B) { gatherNodes(b, e, size) })
}

func gatherNodes(b *testing.B, e *Engine, size int) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(NodeCollector(func() *Engine { return e }, size, 5*time.Second))
	series := 0
	for b.Loop() {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		series = 0
		for _, mf := range mfs {
			series += len(mf.GetMetric())
		}
	}
	b.ReportMetric(float64(series), "series")
}

// BenchmarkEstimateCollector: the loop's part of one scrape of
// hetsched_queue_next_start_seconds on 1,000 nodes of eight GPUs, every GPU
// held by a running task, with 20 classes blocked, by budget.
func BenchmarkEstimateCollector(b *testing.B) {
	ctx := context.Background()
	const size = 1000
	e := benchFleet(b, size)
	var tasks []api.Task
	for i := 0; i < size*8; i++ {
		tasks = append(tasks, api.Task{ID: "r" + strconv.Itoa(i), Priority: prio(1), Duration: api.Duration(time.Duration(i+1) * time.Second),
			Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 1000}})
	}
	for c := 0; c < 20; c++ {
		tasks = append(tasks, api.Task{ID: "w" + strconv.Itoa(c), Priority: prio(1), Resources: resource.List{resource.CPU: int64(1000 + c), "nvidia.com/gpu": 1000}})
	}
	if _, _, err := e.Submit(ctx, "default", tasks); err != nil {
		b.Fatal(err)
	}
	for _, budget := range []int{20_000, EstimateBudget} {
		b.Run(strconv.Itoa(budget), func(b *testing.B) {
			var cmd *queueEstimatesCmd
			for b.Loop() {
				cmd = &queueEstimatesCmd{budget: budget}
				if err := e.do(ctx, cmd); err != nil {
					b.Fatal(err)
				}
			}
			if len(cmd.out) != 1 {
				b.Fatalf("estimates %v, want the default queue's", cmd.out)
			}
		})
	}
}
