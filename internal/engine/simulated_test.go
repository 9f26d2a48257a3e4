package engine

import (
	"context"
	"testing"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestSimulatedNodesShowNoCPU (issue 45 §5): a simulated node's heartbeat
// (hetsched up's fleet, whose agents run on this machine) gives it no CPU
// or memory utilization; a real node's does.
func TestSimulatedNodesShowNoCPU(t *testing.T) {
	e, st := open(t, t.TempDir())
	defer st.Close()
	defer e.Close()
	ctx := context.Background()
	for _, n := range []string{"sim", "real"} {
		if _, err := e.Register(ctx, agentapi.Registration{Agent: "a-" + n, Nodes: []api.Node{gpuNode(n)}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Heartbeat(ctx, "a-sim", []agentapi.Beat{{Node: "sim", Simulated: true, CPU: 0.9, MemoryUsed: 1 << 30}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Heartbeat(ctx, "a-real", []agentapi.Beat{{Node: "real", CPU: 0.9, MemoryUsed: 1 << 30}}); err != nil {
		t.Fatal(err)
	}
	sim, _, err := e.NodeViewOf(ctx, "sim")
	if err != nil {
		t.Fatal(err)
	}
	real, _, err := e.NodeViewOf(ctx, "real")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := sim.Utilization["cpu"]; ok {
		t.Errorf("simulated node's utilization %v, want no cpu", sim.Utilization)
	}
	if real.Utilization["cpu"] != 0.9 {
		t.Errorf("real node's utilization %v, want cpu 0.9", real.Utilization)
	}
}

// TestClusterUtilizationIsMeasured (issue 45 §4): the cluster summary's
// utilization is what the agents measured, its allocated fraction is the
// allocation; they were one number, the allocation, under the wrong name.
func TestClusterUtilizationIsMeasured(t *testing.T) {
	e, st := open(t, t.TempDir())
	defer st.Close()
	defer e.Close()
	ctx := context.Background()
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a", Nodes: []api.Node{gpuNode("g")}}); err != nil {
		t.Fatal(err)
	}
	s, err := e.Summarize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if u := s.Resources["cpu"].Utilization; u != nil {
		t.Errorf("before any heartbeat: cpu utilization %v, want none", *u)
	}
	if _, err := e.Heartbeat(ctx, "a", []agentapi.Beat{{Node: "g", CPU: 0.25, Devices: map[string]agentapi.DeviceBeat{"0": {Utilization: 0.5}, "1": {Utilization: 0.1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, errs, err := e.Submit(ctx, DefaultTenant, []api.Task{{ID: "x", Priority: prio(1), Resources: resource.List{resource.CPU: 4000}}}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if r, err := e.WaitPlaced(ctx, "x"); err != nil || r.Waiting() {
		t.Fatal(err, r)
	}
	if s, err = e.Summarize(ctx); err != nil {
		t.Fatal(err)
	}
	cpu, gpu := s.Resources["cpu"], s.Resources["nvidia.com/gpu"]
	if cpu.AllocatedFraction != 0.5 || cpu.Utilization == nil || *cpu.Utilization != 0.25 {
		t.Errorf("cpu: %+v, want allocated 0.5 and measured 0.25", cpu)
	}
	if gpu.AllocatedFraction != 0 || gpu.Utilization == nil || *gpu.Utilization != 0.3 {
		t.Errorf("gpu: %+v, want allocated 0 and measured 0.3 (the mean of 0.5 and 0.1)", gpu)
	}
}
