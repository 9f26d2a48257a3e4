package core

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

func restoreFixture(t *testing.T) (*Core, []api.Node, []api.Task) {
	t.Helper()
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	nodes := []api.Node{
		{Name: "g", Capacity: resource.List{resource.CPU: 8000, resource.Memory: 8 << 30}, Devices: []api.Device{
			{Type: "nvidia.com/gpu", ID: "0", Model: "A100"}, {Type: "nvidia.com/gpu", ID: "1", Model: "A100"}}},
		{Name: "c", Capacity: resource.List{resource.CPU: 2000, resource.Memory: 2 << 30}},
	}
	p := func(v int) *int { return &v }
	tasks := []api.Task{
		{ID: "share", Priority: p(0), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 500}},
		{ID: "whole", Priority: p(0), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 1000}, Timeout: api.Duration(time.Minute)},
		{ID: "cpu", Priority: p(1), Resources: resource.List{resource.CPU: 2000}},
		{ID: "done", Priority: p(0), Resources: resource.List{resource.CPU: 100}},
		{ID: "after", Priority: p(0), Resources: resource.List{resource.CPU: 100}, Depends: []string{"done"}},
		{ID: "waits", Priority: p(0), Resources: resource.List{resource.CPU: 100}, Depends: []string{"whole"}},
		{ID: "big", Priority: p(1), Resources: resource.List{resource.CPU: 64000}},
		{ID: "lease", Priority: p(0), Resources: resource.List{resource.CPU: 500}, Lease: api.Duration(30 * time.Second)},
	}
	now := time.Unix(1000, 0)
	for i := range nodes {
		if err := c.UpsertNode(now, &nodes[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range tasks {
		if tasks[i].ID == "after" {
			if err := c.TaskFinished(now, "done", Result{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Submit(now, &tasks[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.TaskStarted(now, "whole"); err != nil {
		t.Fatal(err)
	}
	return c, nodes, tasks
}

// TestRestoreRebuildsTheSameState saves every task of a core and restores
// them into a fresh core on the same nodes: states, nodes and devices match
// and the invariants hold.
func TestRestoreRebuildsTheSameState(t *testing.T) {
	a, nodes, tasks := restoreFixture(t)
	b, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	later := time.Unix(2000, 0)
	for i := range nodes {
		if err := b.UpsertNode(later, &nodes[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range tasks {
		s, ok := a.SavedState(tasks[i].ID)
		if !ok {
			t.Fatalf("no saved state for %s", tasks[i].ID)
		}
		if err := b.Restore(later, &tasks[i], s); err != nil {
			t.Fatalf("restore %s: %v", tasks[i].ID, err)
		}
	}
	if out := b.TakeOutput(); len(out.Placements)+len(out.Transitions) != 0 {
		t.Errorf("restore decided something: %+v", out)
	}
	for i := range tasks {
		sa, _ := a.SavedState(tasks[i].ID)
		sb, _ := b.SavedState(tasks[i].ID)
		sa.Started, sb.Started = time.Time{}, time.Time{}
		if d := cmp.Diff(sa, sb); d != "" {
			t.Errorf("%s differs after restore (-before +after):\n%s", tasks[i].ID, d)
		}
	}
	if err := checkInvariants(b); err != nil {
		t.Fatal(err)
	}
	for _, n := range a.Nodes() {
		m, _ := b.Node(n.Name())
		if *m.Allocated() != *n.Allocated() {
			t.Errorf("node %s allocation differs", n.Name())
		}
	}
	// The first tick places nothing that did not fit before.
	b.Tick(later.Add(time.Second))
	if out := b.TakeOutput(); len(out.Placements) != 0 {
		t.Errorf("tick after restore placed %+v", out.Placements)
	}
	// The running task's timeout still counts from its start (t=1000s).
	b.Tick(later.Add(time.Minute))
	if tk, _ := b.Task("whole"); tk.State() != Timeout {
		t.Errorf("whole: %s, want timeout", tk.State())
	}
}

func TestRestoreMovesTasksWhoseNodeIsGone(t *testing.T) {
	a, nodes, tasks := restoreFixture(t)
	b, _ := New(DefaultConfig())
	later := time.Unix(2000, 0)
	// Only the CPU node comes back.
	if err := b.UpsertNode(later, &nodes[1]); err != nil {
		t.Fatal(err)
	}
	for i := range tasks {
		s, _ := a.SavedState(tasks[i].ID)
		if err := b.Restore(later, &tasks[i], s); err != nil {
			t.Fatal(err)
		}
	}
	out := b.TakeOutput()
	moved := map[string]bool{}
	for _, tr := range out.Transitions {
		if tr.To == Pending && strings.Contains(tr.Reason, "node g is gone") && tr.Attempt == 1 {
			moved[tr.Task] = true
		}
	}
	if !moved["share"] || !moved["whole"] {
		t.Errorf("tasks on the lost node not re-queued: %+v", out.Transitions)
	}
	if tk, _ := b.Task("share"); tk.State() != Pending {
		t.Errorf("share: %s", tk.State())
	}
	if err := checkInvariants(b); err != nil {
		t.Fatal(err)
	}
}

func TestRestoreRejectsBadInput(t *testing.T) {
	c, _ := New(DefaultConfig())
	spec := api.Task{ID: "x", Resources: resource.List{resource.CPU: 1}}
	if err := c.Restore(time.Unix(1, 0), &spec, Saved{State: Preempted}); err == nil {
		t.Error("restoring a preempted state succeeded")
	}
	if err := c.Restore(time.Unix(1, 0), &spec, Saved{State: Pending}); err != nil {
		t.Fatal(err)
	}
	if err := c.Restore(time.Unix(1, 0), &spec, Saved{State: Pending}); err == nil {
		t.Error("restoring a duplicate id succeeded")
	}
}

// Replace gives the room of the tasks it cancels to the restored task
// before any waiting task can take it: here a waiting high-tier task
// would take the GPU first if the cancel came alone.
func TestReplaceTakesTheRoomItFrees(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	node := api.Node{Name: "g", Capacity: resource.List{resource.CPU: 8000, resource.Memory: 8 << 30},
		Devices: []api.Device{{Type: "nvidia.com/gpu", ID: "0"}}}
	if err := c.UpsertNode(now, &node); err != nil {
		t.Fatal(err)
	}
	p := func(v int) *int { return &v }
	gpu := resource.List{resource.CPU: 1000, "nvidia.com/gpu": 1000}
	placed := api.Task{ID: "placed", Priority: p(1), Resources: gpu}
	waiting := api.Task{ID: "waiting", Priority: p(1), Resources: gpu}
	for _, tk := range []*api.Task{&placed, &waiting} {
		if err := c.Submit(now, tk); err != nil {
			t.Fatal(err)
		}
	}
	if st, _ := c.SavedState("placed"); st.State != Scheduled {
		t.Fatalf("placed is %s", st.State)
	}
	kept := api.Task{ID: "kept", Priority: p(3), Resources: gpu, Preemptible: new(bool)}
	s := Saved{State: Running, Node: "g", Devices: []DeviceRef{{Type: "nvidia.com/gpu", ID: "0", Share: 1000}}, Chosen: -1, Started: now}
	if err := c.Replace(now, []string{"placed"}, "displaced", &kept, s); err != nil {
		t.Fatal(err)
	}
	got := map[string]State{}
	for _, id := range []string{"placed", "waiting", "kept"} {
		st, _ := c.SavedState(id)
		got[id] = st.State
	}
	want := map[string]State{"placed": Cancelled, "waiting": Pending, "kept": Running}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("states (-want +got):\n%s", d)
	}
	if err := checkInvariants(c); err != nil {
		t.Error(err)
	}
}

// TestRestoreKeepsAttainedService: the service a task attained before a
// restart counts after it, so srtf ranks a restored task by what it has
// left, not by its whole estimate.
func TestRestoreKeepsAttainedService(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy = "srtf"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	spec := api.Task{ID: "resumed", Resources: resource.List{resource.CPU: 1000}, Duration: api.Duration(10 * time.Minute)}
	if err := c.Restore(now, &spec, Saved{State: Pending, Attempt: 2, Served: 8 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	task, _ := c.Task("resumed")
	if got := c.policy.TimeShare.Rank(task); got != int64(2*time.Minute) {
		t.Errorf("restored rank %v, want 2m left of 10m after 8m served", time.Duration(got))
	}
}
