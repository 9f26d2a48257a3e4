package engine

import (
	"context"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
)

// blockCmd holds the loop until release is closed (a step that takes
// long: a bulk submission).
type blockCmd struct {
	answer
	running, release chan struct{}
}

func (c *blockCmd) run(*Engine, time.Time) { close(c.running); <-c.release }

// A heartbeat is recorded while the loop is busy with a long step (issue
// 41 §3: a bulk submission's step made agents miss their deadline), and
// the liveness check that follows counts it: the node stays ready. A
// heartbeat that must change something durable (a device's health) still
// goes through the loop.
func TestHeartbeatsDoNotWaitForTheLoop(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, t.TempDir(), clk)
	defer st.Close()
	defer e.Close()
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("g1")}}); err != nil {
		t.Fatal(err)
	}
	block := &blockCmd{running: make(chan struct{}), release: make(chan struct{})}
	if err := e.send(ctx, block); err != nil {
		t.Fatal(err)
	}
	<-block.running
	// 5 s pass in the step (deadline 3 s); heartbeats come at 2 s and 4 s.
	beaten := make(chan error, 1)
	go func() {
		for range 2 {
			clk.Add(2 * time.Second)
			if _, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "g1", CPU: 0.5}}); err != nil {
				beaten <- err
				return
			}
		}
		beaten <- nil
	}()
	select {
	case err := <-beaten:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(block.release)
		t.Fatal("a heartbeat waited for the loop's step")
	}
	// A health change waits for the loop.
	sick := make(chan error, 1)
	go func() {
		_, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "g1", CPU: 0.5, Devices: map[string]agentapi.DeviceBeat{"0": {Healthy: new(false)}}}})
		sick <- err
	}()
	select {
	case err := <-sick:
		t.Fatalf("a device's health changed without the loop: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	clk.Add(time.Second)
	close(block.release)
	if err := <-sick; err != nil {
		t.Fatal(err)
	}
	if err := e.wait(block); err != nil {
		t.Fatal(err)
	}
	v, _ := nodeView(t, e, "g1") // a step: liveness is judged at 5 s
	if v.State == api.NodeNotReady || !v.Devices[0].Unhealthy || v.Usage == nil || v.Usage.CPU != 0.5 {
		t.Fatalf("g1 after heartbeats during a long step: %+v", v)
	}
}

// While the loop runs a long step, a summary is answered within the read
// budget from the last one the loop computed, marked stale; a node page
// is answered "busy" (503) after its wait instead of waiting for the
// step; the per-node metrics give up at their timeout. Once the step
// ends, answers are fresh again.
func TestReadsDoNotWaitForALongStep(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, t.TempDir(), clk)
	defer st.Close()
	defer e.Close()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	first, err := e.Summarize(ctx)
	if err != nil || first.Stale || first.Nodes["ready"] != 1 {
		t.Fatalf("summary: %+v %v", first, err)
	}
	block := &blockCmd{running: make(chan struct{}), release: make(chan struct{})}
	if err := e.send(ctx, block); err != nil {
		t.Fatal(err)
	}
	<-block.running

	t0 := time.Now()
	s, err := e.Summarize(ctx)
	if err != nil || !s.Stale || !s.AsOf.Equal(first.AsOf) || s.Nodes["ready"] != 1 {
		t.Fatalf("summary during a long step: %+v %v", s, err)
	}
	if first.Stale {
		t.Fatal("the stale answer changed the published summary")
	}
	if _, _, _, err := e.NodePage(ctx, NodeQuery{Limit: 10}); err != errBusy {
		t.Fatalf("node page during a long step: %v, want errBusy", err)
	}
	if took := time.Since(t0); took > 10*time.Second {
		t.Fatalf("the reads took %s", took)
	}
	close(block.release)
	if err := e.wait(block); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	if s, err := e.Summarize(ctx); err != nil || s.Stale || !s.AsOf.After(first.AsOf) {
		t.Fatalf("summary after the step: %+v %v", s, err)
	}
}
