package engine

import (
	"context"
	"testing"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
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
