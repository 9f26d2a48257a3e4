package core

import (
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestAttemptWaitLeavesOutTheWaitForCapacity: an attempt's wait counts from
// the task's entry or from the wake of its class queue, whichever is
// later: a task that waited ten seconds for capacity is placed with an
// attempt wait of 0 at the release that woke it, while its Delay is ten
// seconds; a batched low task's attempt wait is its batch window; an
// attempt that finds no place is reported as Unfit.
func TestAttemptWaitLeavesOutTheWaitForCapacity(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	node := api.Node{Name: "n1", Capacity: resource.List{resource.CPU: 1000, resource.Memory: 1 << 30}}
	if err := c.UpsertNode(now, &node); err != nil {
		t.Fatal(err)
	}
	urgent, low := api.PriorityUrgent, 3
	submit := func(id string, prio *int) {
		t.Helper()
		if err := c.Submit(now, &api.Task{ID: id, Priority: prio, Resources: resource.List{resource.CPU: 1000}}); err != nil {
			t.Fatal(err)
		}
	}
	submit("a", &urgent)
	submit("b", &urgent)
	out := c.TakeOutput()
	if len(out.Placements) != 1 || out.Placements[0].Task != "a" || out.Placements[0].AttemptWait != 0 {
		t.Fatalf("placements %+v, want a with no attempt wait", out.Placements)
	}
	if len(out.Unfit) != 1 || out.Unfit[0].Task != "b" || out.Unfit[0].Priority != urgent || out.Unfit[0].Wait != 0 {
		t.Fatalf("unfit %+v, want b's attempt", out.Unfit)
	}

	now = now.Add(10 * time.Second)
	if err := c.TaskFinished(now, "a", Result{}); err != nil {
		t.Fatal(err)
	}
	out = c.TakeOutput()
	if len(out.Placements) != 1 || out.Placements[0].Task != "b" {
		t.Fatalf("placements %+v, want b", out.Placements)
	}
	if p := out.Placements[0]; p.Delay != 10*time.Second || p.AttemptWait != 0 {
		t.Errorf("b: delay %v, attempt wait %v; want 10s and 0", p.Delay, p.AttemptWait)
	}
	if len(out.Unfit) != 0 {
		t.Errorf("unfit %+v, want none", out.Unfit)
	}

	// A low task waits for its tier's batch window, which is part of its
	// attempt; the node is full, so it is parked at the window's end.
	submit("l", &low)
	if out = c.TakeOutput(); len(out.Unfit)+len(out.Placements) != 0 {
		t.Fatalf("the low task was tried before its window: %+v", out)
	}
	window := DefaultConfig().Tiers[low].Window
	now = now.Add(window)
	c.Tick(now)
	out = c.TakeOutput()
	if len(out.Unfit) != 1 || out.Unfit[0].Task != "l" || out.Unfit[0].Wait != window {
		t.Fatalf("unfit %+v, want l after its window %v", out.Unfit, window)
	}
}

// TestQueueInfo: positions count the identical tasks ahead, Ahead the
// more important waiting work, and the estimated start is when enough of
// the running tasks' expected ends free room for the task and those ahead
// of it; with no release left to free it, there is no estimate.
func TestQueueInfo(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	node := api.Node{Name: "n1", Capacity: resource.List{resource.CPU: 2000, resource.Memory: 1 << 30}}
	if err := c.UpsertNode(now, &node); err != nil {
		t.Fatal(err)
	}
	urgent, low := api.PriorityUrgent, 3
	submit := func(id string, prio *int, d time.Duration) {
		t.Helper()
		if err := c.Submit(now, &api.Task{ID: id, Priority: prio, Duration: api.Duration(d), Resources: resource.List{resource.CPU: 1000}}); err != nil {
			t.Fatal(err)
		}
	}
	submit("a", &urgent, 10*time.Minute)
	submit("b", &urgent, 20*time.Minute)
	for _, id := range []string{"c", "d", "e"} {
		submit(id, &urgent, time.Minute)
	}
	submit("l", &low, time.Minute)
	c.Tick(now.Add(DefaultConfig().Tiers[low].Window)) // l's batch is tried: it waits for capacity
	if _, ok := c.QueueInfo("a"); ok {
		t.Error("a running task has a queue position")
	}
	for _, tc := range []struct {
		id       string
		position int
		ahead    int
		start    time.Time // zero: none
	}{
		{"c", 1, 0, now.Add(10 * time.Minute)},
		{"d", 2, 0, now.Add(20 * time.Minute)},
		{"e", 3, 0, time.Time{}},
		{"l", 1, 3, time.Time{}}, // behind c, d and e, of its class: no release left for it
	} {
		info, ok := c.QueueInfo(tc.id)
		if !ok {
			t.Errorf("%s: no queue info", tc.id)
			continue
		}
		if info.Position != tc.position || info.PositionAtMost || info.Ahead != tc.ahead {
			t.Errorf("%s: %+v, want position %d, ahead %d", tc.id, info, tc.position, tc.ahead)
		}
		if !info.EstimatedStart.Equal(tc.start) {
			t.Errorf("%s: estimated start %v, want %v", tc.id, info.EstimatedStart, tc.start)
		}
	}
}
