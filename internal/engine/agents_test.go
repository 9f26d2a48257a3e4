package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// fakeClock is a settable clock for the engine.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func openClock(t *testing.T, dir string, clk *fakeClock) (*Engine, store.Store) {
	t.Helper()
	st, err := store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Core: core.DefaultConfig(), Now: clk.Now, HeartbeatInterval: time.Second, MissedHeartbeats: 3}, st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return e, st
}

// streamed collects an agent stream's messages.
type streamed struct {
	mu   sync.Mutex
	msgs []agentapi.AgentMessage
	ch   chan struct{}
}

func follow(t *testing.T, e *Engine, agent string) (*streamed, func()) {
	t.Helper()
	s := &streamed{ch: make(chan struct{}, 1024)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var gen uint64
	e.sessions.mu.RLock()
	if a := e.sessions.agents[agent]; a != nil {
		gen = a.gen // the stream of the agent's latest registration
	}
	e.sessions.mu.RUnlock()
	go func() {
		defer close(done)
		_ = e.AgentStream(ctx, agent, gen, time.Hour, func(m *agentapi.AgentMessage) error {
			s.mu.Lock()
			s.msgs = append(s.msgs, *m)
			s.mu.Unlock()
			s.ch <- struct{}{}
			return nil
		})
	}()
	return s, func() { cancel(); <-done }
}

// next waits for message i.
func (s *streamed) next(t *testing.T, i int) agentapi.AgentMessage {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		s.mu.Lock()
		if len(s.msgs) > i {
			m := s.msgs[i]
			s.mu.Unlock()
			return m
		}
		s.mu.Unlock()
		select {
		case <-s.ch:
		case <-deadline:
			t.Fatalf("no message %d; got %+v", i, s.msgs)
		}
	}
}

func cmdTask(id string, gpus int64) api.Task {
	return api.Task{ID: id, Priority: prio(1), Command: []string{"true"},
		Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": gpus * 1000}}
}

func TestAgentProtocol(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, t.TempDir(), clk)
	defer st.Close()
	defer e.Close()

	// Heartbeats and streams of an unknown agent say "register".
	if _, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "g1"}}); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("heartbeat before register: %v", err)
	}
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("g1"), gpuNode("g1")}}); errs.FieldOf(err) != "nodes[1].name" {
		t.Fatalf("duplicate node: %v", err)
	}
	reply, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("g1")}, Logs: "http://127.0.0.1:1"})
	if err != nil || reply.MissedHeartbeats != 3 || time.Duration(reply.HeartbeatInterval) != time.Second {
		t.Fatalf("register: %+v %v", reply, err)
	}
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a2", Nodes: []api.Node{gpuNode("g2")}}); err != nil {
		t.Fatal(err)
	}

	// A task placed before the stream opens comes in the snapshot; one
	// placed after comes as an assign. Leases never reach agents.
	if _, _, err := e.Submit(ctx, "default", []api.Task{cmdTask("t1", 1)}); err != nil {
		t.Fatal(err)
	}
	lease := cmdTask("lease", 1)
	lease.Command = nil
	if _, _, err := e.Submit(ctx, "default", []api.Task{lease}); err != nil {
		t.Fatal(err)
	}
	s1, stop1 := follow(t, e, "a1")
	defer stop1()
	snap := s1.next(t, 0)
	if snap.Type != "snapshot" {
		t.Fatalf("first message %+v", snap)
	}
	onA1 := map[string]bool{}
	for _, a := range snap.Assignments {
		onA1[a.Task] = true
		if a.Task == "lease" {
			t.Fatalf("a lease was assigned to an agent: %+v", a)
		}
	}
	r1, _ := e.Task("t1")
	if (r1.Node == "g1") != onA1["t1"] {
		t.Fatalf("t1 on %s, a1 snapshot %+v", r1.Node, snap)
	}

	// Force the next task onto g1 so a1's stream sees it.
	t2 := cmdTask("t2", 1)
	t2.NodeSelector = map[string]string{api.NodeNameLabel: "g1"}
	if _, _, err := e.Submit(ctx, "default", []api.Task{t2}); err != nil {
		t.Fatal(err)
	}
	m := s1.next(t, 1)
	if m.Type != "assign" || m.Assignment.Task != "t2" || m.Assignment.Node != "g1" || len(m.Assignment.Devices) != 1 || m.Assignment.Command[0] != "true" {
		t.Fatalf("assign: %+v", m)
	}

	// Status: running, then a stale report (wrong attempt) is ignored, and
	// a report from the wrong agent too.
	res, err := e.AgentStatus(ctx, "a1", []agentapi.StatusUpdate{{Task: "t2", Attempt: 0, State: "running"}, {Task: "t2", Attempt: 5, State: "failed"}})
	if err != nil || !res[0].Applied || res[1].Applied {
		t.Fatalf("status: %+v %v", res, err)
	}
	res, err = e.AgentStatus(ctx, "a2", []agentapi.StatusUpdate{{Task: "t2", Attempt: 0, State: "succeeded"}})
	if err != nil || res[0].Applied {
		t.Fatalf("other agent's report applied: %+v %v", res, err)
	}
	if r, _ := e.Task("t2"); r.State != "running" {
		t.Fatalf("t2 %s", r.State)
	}
	if _, err := e.AgentStatus(ctx, "a1", []agentapi.StatusUpdate{{Task: "t2", State: "exploded"}}); errs.FieldOf(err) != "updates[0].state" {
		t.Fatalf("bad state: %v", err)
	}

	// Cancelling revokes it.
	if err := e.Cancel(ctx, "t2"); err != nil {
		t.Fatal(err)
	}
	m = s1.next(t, 2)
	if m.Type != "revoke" || m.Task != "t2" || m.Attempt != 0 {
		t.Fatalf("revoke: %+v", m)
	}

	// A device health flip moves the task on it (t1 leaves first, so
	// both of g1's GPUs are free).
	if err := e.Cancel(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	t3 := cmdTask("t3", 2)
	t3.NodeSelector = map[string]string{api.NodeNameLabel: "g1"}
	if _, _, err := e.Submit(ctx, "default", []api.Task{t3}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r3, err := e.WaitPlaced(wctx, "t3")
	if err != nil || r3.Node != "g1" {
		t.Fatalf("t3: %+v %v", r3, err)
	}
	clk.Add(500 * time.Millisecond)
	if _, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "g1", CPU: 0.5, Devices: map[string]agentapi.DeviceBeat{"0": {Utilization: 0.5}, "1": {Healthy: new(false), Reason: "XID 79"}}}}); err != nil {
		t.Fatal(err)
	}
	r3, _ = e.Task("t3")
	if r3.State != "pending" || r3.Attempt != 1 || len(r3.Attempts) != 1 || r3.Attempts[0].Node != "g1" || r3.Attempts[0].ExitCode != nil {
		t.Fatalf("t3 after its device failed: %+v", r3)
	}
	// The moved attempt's outcome, reported after it ended, goes into its
	// history, once, and only from the agent of the node it ran on.
	res, err = e.AgentStatus(ctx, "a2", []agentapi.StatusUpdate{{Task: "t3", Attempt: 0, State: "failed", ExitCode: 143}})
	if err != nil || res[0].Applied {
		t.Fatalf("another agent's report of t3's attempt 0: %+v %v", res, err)
	}
	res, err = e.AgentStatus(ctx, "a1", []agentapi.StatusUpdate{{Task: "t3", Attempt: 0, State: "failed", ExitCode: 143}, {Task: "t3", Attempt: 0, State: "failed", ExitCode: 1}})
	if err != nil || !res[0].Applied || res[1].Applied {
		t.Fatalf("a1's report of t3's attempt 0: %+v %v", res, err)
	}
	if r3, _ = e.Task("t3"); r3.Attempts[0].ExitCode == nil || *r3.Attempts[0].ExitCode != 143 || r3.ExitCode != nil || r3.State != "pending" {
		t.Fatalf("t3 after its attempt 0's outcome: %+v", r3)
	}
	views, err := e.NodeViews(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		if v.Name == "g1" && (!v.Devices[1].Unhealthy || v.Usage == nil || v.Usage.CPU != 0.5 || v.Agent != "a1") {
			t.Fatalf("g1 view %+v", v)
		}
	}

	// a2 stops heartbeating: after 3 intervals g2 is notready and its
	// command tasks go back to pending; a1 kept beating and stays ready.
	t4 := cmdTask("t4", 1)
	t4.NodeSelector = map[string]string{api.NodeNameLabel: "g2"}
	if _, _, err := e.Submit(ctx, "default", []api.Task{t4}); err != nil {
		t.Fatal(err)
	}
	if r, err := e.WaitPlaced(wctx, "t4"); err != nil || r.Node != "g2" {
		t.Fatalf("t4: %+v %v", r, err)
	}
	for i := 0; i < 4; i++ {
		clk.Add(time.Second)
		if _, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "g1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Summarize(ctx); err != nil { // a step: liveness is judged (heartbeats take their own lane)
		t.Fatal(err)
	}
	if r, _ := e.Task("t4"); r.State != "pending" || r.Attempt != 1 {
		t.Fatalf("t4 after its node went silent: %+v", r)
	}
	nodes := e.Nodes()
	if nodes[0].State != "" || nodes[1].State != api.NodeNotReady {
		t.Fatalf("node states %q %q", nodes[0].State, nodes[1].State)
	}
	// It beats again: ready, and t4 is placed there again.
	if _, err := e.Heartbeat(ctx, "a2", []agentapi.Beat{{Node: "g2"}}); err != nil {
		t.Fatal(err)
	}
	if r, err := e.WaitPlaced(wctx, "t4"); err != nil || r.Node != "g2" || r.Attempt != 1 {
		t.Fatalf("t4 again: %+v %v", r, err)
	}

	// A lost run is re-queued with attempt + 1.
	res, err = e.AgentStatus(ctx, "a2", []agentapi.StatusUpdate{{Task: "t4", Attempt: 1, State: "lost", Reason: "fenced"}})
	if err != nil || !res[0].Applied {
		t.Fatalf("lost: %+v %v", res, err)
	}
	if r, _ := e.Task("t4"); r.Attempt != 2 {
		t.Fatalf("t4 after lost: %+v", r)
	}

	// Registering again supersedes the old stream.
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("g1")}}); err != nil {
		t.Fatal(err)
	}
	stop1()
	if err := e.AgentStream(ctx, "a1", 1, time.Hour, func(*agentapi.AgentMessage) error { return nil }); err != ErrSuperseded {
		t.Fatalf("stream of an old generation: %v", err)
	}
}

func TestAgentNodesGetAGraceAfterRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, dir, clk)
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("g1")}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Submit(ctx, "default", []api.Task{cmdTask("t1", 1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AgentStatus(ctx, "a1", []agentapi.StatusUpdate{{Task: "t1", State: "running"}}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	st.Close()

	// The server was down for a minute: far past the deadline, but the
	// node is judged from the restart on.
	clk.Add(time.Minute)
	e, st = openClock(t, dir, clk)
	defer st.Close()
	defer e.Close()
	if r, _ := e.Task("t1"); r.State != "running" || r.Node != "g1" {
		t.Fatalf("t1 after restart: %+v", r)
	}
	// Reports before the agent registered again are refused (kept by the
	// agent), not dropped as stale.
	if _, err := e.AgentStatus(ctx, "a1", []agentapi.StatusUpdate{{Task: "t1", State: "succeeded"}}); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("report before register: %v", err)
	}
	clk.Add(2 * time.Second)
	if _, err := e.Summarize(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Task("t1"); r.State != "running" {
		t.Fatalf("t1 2s after restart: %+v", r)
	}
	clk.Add(2 * time.Second)
	if _, err := e.Summarize(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Task("t1"); r.State != "pending" || r.Attempt != 1 {
		t.Fatalf("t1 4s after restart without its agent: %+v", r)
	}
}

// TestStatusBatchIsCheckedAgainstTheCore: in one report, "lost" for
// attempt 0 moves the task on, so a later update for attempt 0 in the
// same batch is stale, not applied to attempt 1.
func TestStatusBatchIsCheckedAgainstTheCore(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, t.TempDir(), clk)
	defer st.Close()
	defer e.Close()
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("g1")}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Submit(ctx, "default", []api.Task{cmdTask("x", 1)}); err != nil {
		t.Fatal(err)
	}
	res, err := e.AgentStatus(ctx, "a1", []agentapi.StatusUpdate{{Task: "x", State: "lost"}, {Task: "x", State: "running"}, {Task: "x", State: "failed", ExitCode: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Applied || res[1].Applied || res[2].Applied {
		t.Fatalf("results %+v", res)
	}
	if r, _ := e.Task("x"); r.State != "scheduled" || r.Attempt != 1 {
		t.Fatalf("x %+v", r)
	}
}

// TestNotReadyKeepsAnAdminsCordon: a cordoned node that goes silent and
// comes back is cordoned again, not ready.
func TestNotReadyKeepsAnAdminsCordon(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	e, st := openClock(t, t.TempDir(), clk)
	defer st.Close()
	defer e.Close()
	if _, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("g1")}}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetNodeState(ctx, "g1", api.NodeCordoned); err != nil {
		t.Fatal(err)
	}
	clk.Add(4 * time.Second)
	if _, err := e.Summarize(ctx); err != nil {
		t.Fatal(err)
	}
	if n := e.Nodes()[0]; n.State != api.NodeNotReady {
		t.Fatalf("silent node %q", n.State)
	}
	if _, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "g1"}}); err != nil {
		t.Fatal(err)
	}
	if n := e.Nodes()[0]; n.State != api.NodeCordoned {
		t.Fatalf("node back from silence: %q, want cordoned", n.State)
	}
	// Uncordoned, silent again, back: ready.
	if err := e.SetNodeState(ctx, "g1", api.NodeReady); err != nil {
		t.Fatal(err)
	}
	clk.Add(4 * time.Second)
	if _, err := e.Summarize(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Heartbeat(ctx, "a1", []agentapi.Beat{{Node: "g1"}}); err != nil {
		t.Fatal(err)
	}
	if n := e.Nodes()[0]; n.State != "" {
		t.Fatalf("node back from silence: %q, want ready", n.State)
	}
}

// TestGangJobSurvivesRestart: a gang placed before a restart is restored
// as one: a member failing after the restart restarts the gang (the other
// member is re-queued), and retries and failures are counted across it.
func TestGangJobSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e, st := open(t, dir)
	for _, n := range []string{"g1", "g2"} {
		if err := e.UpsertNode(ctx, gpuNode(n)); err != nil {
			t.Fatal(err)
		}
	}
	job := api.Job{ID: "tr", Retries: &api.Retries{Limit: 1, Backoff: api.Duration(time.Hour)},
		Gang: &api.Gang{MinMember: 2}, Tasks: []api.Task{
			{ID: "w0", Priority: prio(1), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 2000}},
			{ID: "w1", Priority: prio(1), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 2000}},
		}}
	if _, err := e.SubmitJob(ctx, "default", job); err != nil {
		t.Fatal(err)
	}
	r0, _ := e.Task("tr.w0")
	r1, _ := e.Task("tr.w1")
	if r0.State != "scheduled" || r1.State != "scheduled" || r0.Node == r1.Node {
		t.Fatalf("gang not placed on two nodes: %+v %+v", r0, r1)
	}
	e.Close()
	st.Close()

	e, st = open(t, dir)
	defer st.Close()
	defer e.Close()
	if err := e.Finished(ctx, "tr.w1", core.Result{ExitCode: 2}); err != nil {
		t.Fatal(err)
	}
	r0, _ = e.Task("tr.w0")
	r1, _ = e.Task("tr.w1")
	if r1.State != "pending" || r1.Failures != 1 || r1.Attempt != 1 {
		t.Fatalf("failed member: %+v", r1)
	}
	if r0.State != "pending" || r0.Attempt != 1 {
		t.Fatalf("the other member was not re-queued with the gang: %+v", r0)
	}
	e.Close()
	st.Close()
	e2, st2 := open(t, dir)
	defer st2.Close()
	defer e2.Close()
	if r, _ := e2.Task("tr.w1"); r.Failures != 1 {
		t.Fatalf("failures after a restart: %+v", r)
	}
}

// TestQueueMaxHoldsAcrossRestart: a queue's max keeps a task waiting, with
// the reason, before and after a restart (usage is rebuilt from the
// restored placements).
func TestQueueMaxHoldsAcrossRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	e, st := open(t, dir)
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	if err := e.PutQueue(ctx, "", api.Queue{Name: "team-a", Max: resource.List{"nvidia.com/gpu": 1000}}); err != nil {
		t.Fatal(err)
	}
	gpu := func(id string) api.Task {
		return api.Task{ID: id, Queue: "team-a", Priority: prio(1), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 1000}}
	}
	if _, _, err := e.Submit(ctx, "default", []api.Task{gpu("q1"), gpu("q2")}); err != nil {
		t.Fatal(err)
	}
	r1, _ := e.Task("q1")
	r2, _ := e.Task("q2")
	if r1.State != "scheduled" || r2.State != "pending" || !strings.Contains(r2.Reason, "queue team-a max reached: nvidia.com/gpu 1 used + 1 asked > 1 max") {
		t.Fatalf("q1 %s, q2 %s %q", r1.State, r2.State, r2.Reason)
	}
	e.Close()
	st.Close()
	e, st = open(t, dir)
	defer st.Close()
	defer e.Close()
	if _, err := e.Summarize(ctx); err != nil {
		t.Fatal(err)
	}
	if r2, _ = e.Task("q2"); r2.State != "pending" {
		t.Fatalf("q2 after restart: %s (the queue's usage was lost)", r2.State)
	}
	if err := e.Finished(ctx, "q1", core.Result{}); err != nil {
		t.Fatal(err)
	}
	if r2, _ = e.Task("q2"); r2.State != "scheduled" {
		t.Fatalf("q2 after q1 ended: %s %q", r2.State, r2.Reason)
	}
}
