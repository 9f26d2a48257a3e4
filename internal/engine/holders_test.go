package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// nodeView returns the engine's view of node name.
func nodeView(t *testing.T, e *Engine, name string) (NodeView, bool) {
	t.Helper()
	views, err := e.NodeViews(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Name == name {
			return v, true
		}
	}
	return NodeView{}, false
}

// An agent cannot take a node of the static inventory, nor one a live
// agent holds; it can once the holder's heartbeats expire, or once an
// admin released the node.
func TestNodeHoldersRefuseTakeover(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, dir, clk)

	// gpu-a is static with 2 GPUs; an agent registering it (with none) is
	// refused, and the static node keeps its GPUs.
	if err := e.UpsertNode(ctx, gpuNode("gpu-a")); err != nil {
		t.Fatal(err)
	}
	bare := api.Node{Name: "gpu-a", Capacity: gpuNode("x").Capacity}
	_, err := e.Register(ctx, agentapi.Registration{Agent: "evil", Nodes: []api.Node{gpuNode("agn-9"), bare}})
	if errs.CodeOf(err) != errs.Conflict || errs.FieldOf(err) != "nodes[1].name" || !strings.Contains(err.Error(), "static inventory") {
		t.Fatalf("agent registering a static node: %v", err)
	}
	if v, _ := nodeView(t, e, "gpu-a"); len(v.Devices) != 2 || v.Agent != "" {
		t.Fatalf("the static node changed: %+v", v)
	}
	if _, ok := nodeView(t, e, "agn-9"); ok {
		t.Fatal("a refused registration took its other node (all or nothing)")
	}

	// agn-1 is held by a1, whose heartbeats are live: a2 is refused, and
	// the holder's stream and node stay.
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("agn-1")}}); err != nil {
		t.Fatal(err)
	}
	clk.Add(2 * time.Second)
	_, err = e.Register(ctx, agentapi.Registration{Agent: "a2", Nodes: []api.Node{gpuNode("agn-1")}})
	if errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), `agent "a1"`) {
		t.Fatalf("a2 taking a live agent's node: %v", err)
	}
	if _, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "agn-1"}}); err != nil {
		t.Fatalf("the holder lost its node: %v", err)
	}
	// A static upsert of the agent's node is refused too.
	if err := e.UpsertNode(ctx, gpuNode("agn-1")); errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), `"a1"`) {
		t.Fatalf("static upsert of an agent node: %v", err)
	}

	// After a restart the holder is still known, and gets its grace.
	e.Close()
	st.Close()
	e, st = openClock(t, dir, clk)
	defer func() { e.Close(); st.Close() }()
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a2", Nodes: []api.Node{gpuNode("agn-1")}}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("after a restart, a2 took agn-1 during a1's grace: %v", err)
	}

	// a1 stops heartbeating: past the deadline (3 × 1s) a2 may take it.
	clk.Add(4 * time.Second)
	if _, err := e.Summarize(ctx); err != nil { // a step: liveness is judged
		t.Fatal(err)
	}
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a2", Nodes: []api.Node{gpuNode("agn-1")}}); err != nil {
		t.Fatalf("a2 after a1's heartbeats expired: %v", err)
	}
	if v, _ := nodeView(t, e, "agn-1"); v.Agent != "a2" {
		t.Fatalf("agn-1 held by %q, want a2", v.Agent)
	}
	if _, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "agn-1"}}); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("the old holder still heartbeats the node: %v", err)
	}

	// An admin releases the static node: an agent may then register it.
	if _, _, err := e.Submit(ctx, "default", []api.Task{cmdTask("on-a", 2)}); err != nil {
		t.Fatal(err)
	}
	holder, err := e.ReleaseNode(ctx, "gpu-a")
	if err != nil || holder != "" {
		t.Fatalf("release: %q %v", holder, err)
	}
	if _, ok := nodeView(t, e, "gpu-a"); ok {
		t.Fatal("a released node is still listed")
	}
	if _, err := e.ReleaseNode(ctx, "gpu-a"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("releasing twice: %v", err)
	}
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a3", Nodes: []api.Node{gpuNode("gpu-a")}}); err != nil {
		t.Fatalf("registering a released node: %v", err)
	}
	// Released durably: a restart does not bring the static node back
	// under its old holder.
	e.Close()
	st.Close()
	e, st = openClock(t, dir, clk)
	if v, _ := nodeView(t, e, "gpu-a"); v.Agent != "a3" {
		t.Fatalf("after a restart gpu-a is held by %q, want a3", v.Agent)
	}
}

// A stream opened without a generation is refused: it would not be fenced
// when the agent registers again.
func TestStreamNeedsAGeneration(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, t.TempDir(), clk)
	defer st.Close()
	defer e.Close()
	reply, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("g1")}})
	if err != nil {
		t.Fatal(err)
	}
	err = e.AgentStream(ctx, "a1", 0, time.Hour, func(*agentapi.AgentMessage) error { return nil })
	if errs.CodeOf(err) != errs.InvalidArgument || errs.FieldOf(err) != "generation" {
		t.Fatalf("stream without a generation: %v", err)
	}
	sctx, cancel := context.WithCancel(ctx)
	got, ended := make(chan string, 1), make(chan struct{})
	go func() {
		defer close(ended)
		_ = e.AgentStream(sctx, "a1", reply.Generation, time.Hour, func(m *agentapi.AgentMessage) error {
			select {
			case got <- m.Type:
			default:
			}
			return nil
		})
	}()
	if typ := <-got; typ != "snapshot" {
		t.Fatalf("first message %q", typ)
	}
	cancel()
	<-ended
}

// issue 16 §2: a pending task's reason is the same after every restart
// (it grew "X; X; X": the record's reason, which adds why the class waits,
// was restored as the task's own).
func TestPendingReasonStableAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, dir, clk)
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Submit(ctx, "default", []api.Task{cmdTask("big", 4)}); err != nil {
		t.Fatal(err)
	}
	first, _ := e.Task("big")
	if first.State != "pending" || first.Reason == "" {
		t.Fatalf("big: %+v", first)
	}
	for i := range 3 {
		e.Close()
		st.Close()
		e, st = openClock(t, dir, clk)
		if _, err := e.Summarize(ctx); err != nil { // a step after recovery
			t.Fatal(err)
		}
		if r, _ := e.Task("big"); r.Reason != first.Reason {
			t.Fatalf("after restart %d: reason %q, was %q", i+1, r.Reason, first.Reason)
		}
	}
	e.Close()
	st.Close()
}

// issue 41 §5: /cluster counts pending tasks by their own tier, and says
// apart how many of a tier's wait raised one tier up by aging (three
// medium tasks raised were shown as three high ones).
func TestSummaryPendingByOwnTier(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, t.TempDir(), clk)
	defer st.Close()
	defer e.Close()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	var tasks []api.Task
	for i := range 3 {
		tk := cmdTask(fmt.Sprintf("m%d", i), 4) // more GPUs than the node has: they wait
		tk.Priority = prio(api.PriorityMedium)
		tasks = append(tasks, tk)
	}
	high := cmdTask("h", 4)
	tasks = append(tasks, high)
	if _, _, err := e.Submit(ctx, "default", tasks); err != nil {
		t.Fatal(err)
	}
	// Past medium's aging threshold: the medium tasks wait in the high
	// tier's raised band.
	clk.Add(time.Second)
	if _, err := e.Summarize(ctx); err != nil { // a step: the core ages them
		t.Fatal(err)
	}
	s, err := e.Summarize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Pending["medium"] != 3 || s.Pending["high"] != 1 || s.PendingRaised["medium"] != 3 || s.PendingRaised["high"] != 0 {
		t.Errorf("pending %v, raised %v: want 3 medium (all 3 raised) and 1 high", s.Pending, s.PendingRaised)
	}
}

// After a failover (here: a restart on the same store) the new engine has
// no registration of the agents, but knows from the store which agent
// holds which node. A holder's heartbeat is noted (the node's deadline
// starts over) and answered Register; one naming a node the agent does
// not hold notes nothing and is NotFound. Without it, an agent whose
// re-registration took long through leader churn had its node declared
// notready while it was heartbeating.
func TestUnregisteredHolderHeartbeatIsHeard(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, dir, clk)
	for _, a := range []string{"a1", "a2"} {
		if _, err := e.Register(ctx, agentapi.Registration{Agent: a, Nodes: []api.Node{gpuNode("n-" + a)}}); err != nil {
			t.Fatal(err)
		}
	}
	e.Close()
	st.Close()
	e, st = openClock(t, dir, clk)
	defer func() { e.Close(); st.Close() }()

	// 2 s after the restart (deadline 3 s): a1 heartbeats unregistered.
	clk.Add(2 * time.Second)
	reply, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "n-a1"}})
	if err != nil || !reply.Register || reply.Nodes != 1 {
		t.Fatalf("holder's heartbeat after a restart: %+v %v", reply, err)
	}
	// a2 names a1's node with its own: nothing is noted.
	if reply, err := e.Heartbeat(ctx, "a2", []agentapi.Beat{{Node: "n-a2"}, {Node: "n-a1"}}); errs.CodeOf(err) != errs.NotFound || reply.Register {
		t.Fatalf("a heartbeat naming another agent's node: %+v %v", reply, err)
	}
	// 4 s after the restart: a2 (silent) is notready; a1 (heard at 2 s) is not.
	clk.Add(2 * time.Second)
	if _, err := e.Summarize(ctx); err != nil { // a step: liveness is judged
		t.Fatal(err)
	}
	if v, _ := nodeView(t, e, "n-a1"); v.State == api.NodeNotReady {
		t.Fatalf("n-a1 is notready though its holder heartbeat 2 s ago: %+v", v)
	}
	if v, _ := nodeView(t, e, "n-a2"); v.State != api.NodeNotReady {
		t.Fatalf("n-a2 is %q; want notready (its holder was silent past the deadline)", v.State)
	}
	// a1 registers: its heartbeats are ordinary again.
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("n-a1")}}); err != nil {
		t.Fatal(err)
	}
	if reply, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "n-a1"}}); err != nil || reply.Register {
		t.Fatalf("a registered agent's heartbeat: %+v %v", reply, err)
	}
}
