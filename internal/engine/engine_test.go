package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

func open(t *testing.T, dir string) (*Engine, store.Store) {
	t.Helper()
	st, err := store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Core: core.DefaultConfig()}, st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return e, st
}

func gpuNode(name string) api.Node {
	return api.Node{Name: name, Capacity: resource.List{resource.CPU: 8000, resource.Memory: 8 << 30},
		Devices: []api.Device{{Type: "nvidia.com/gpu", ID: "0", Model: "L4"}, {Type: "nvidia.com/gpu", ID: "1", Model: "L4"}}}
}

func prio(p int) *int { return &p }

func TestSubmitIsDurableAndSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	e, st := open(t, dir)
	ctx := context.Background()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	ids, errsOut, err := e.Submit(ctx, "default", []api.Task{
		{ID: "a", Priority: prio(0), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 1000}},
		{ID: "b", Priority: prio(0), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 500}},
		{Priority: prio(0), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 1000}}, // generated id; no GPU left
		{ID: "bad", Priority: prio(9)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if errsOut[0] != nil || errsOut[1] != nil || errsOut[2] != nil {
		t.Fatalf("submit errors: %v", errsOut)
	}
	if errs.FieldOf(errsOut[3]) != "priority" {
		t.Errorf("bad task: %v", errsOut[3])
	}
	if ids[2] == "" {
		t.Fatal("no id generated")
	}
	ra, err := e.WaitPlaced(ctx, "a")
	if err != nil || ra.State != "scheduled" || ra.Node != "g1" || len(ra.Devices) != 1 {
		t.Fatalf("a: %+v %v", ra, err)
	}
	if err := e.Started(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	third, _ := e.Task(ids[2])
	if third.State != "pending" {
		t.Fatalf("third task %s, want pending (no free GPU)", third.State)
	}
	e.Close()
	st.Close()

	// Restart: the same state comes back from disk, allocations included.
	e, st = open(t, dir)
	defer st.Close()
	defer e.Close()
	ra, ok := e.Task("a")
	if !ok || ra.State != "running" || ra.Node != "g1" || ra.Started == nil {
		t.Fatalf("a after restart: %+v", ra)
	}
	rb, _ := e.Task("b")
	if rb.State != "scheduled" || len(rb.Devices) != 1 || rb.Devices[0].Share != 500 {
		t.Fatalf("b after restart: %+v", rb)
	}
	if r, _ := e.Task(ids[2]); r == nil || r.State != "pending" {
		t.Fatalf("third after restart: %+v", r)
	}
	if _, ok := e.Task("bad"); ok {
		t.Error("a rejected task was stored")
	}
	// Capacity held by a is restored: finishing it lets the third run.
	if err := e.Finished(ctx, "a", core.Result{}); err != nil {
		t.Fatal(err)
	}
	r3, err := e.WaitPlaced(ctx, ids[2])
	if err != nil || r3.State != "scheduled" {
		t.Fatalf("third after a finished: %+v %v", r3, err)
	}
	if ra, _ := e.Task("a"); ra.State != "succeeded" || ra.ExitCode == nil || *ra.ExitCode != 0 || ra.Finished == nil {
		t.Errorf("a: %+v", ra)
	}
}

// TestStartedManyInOneCommand: tasks reported started together each get
// their own answer (a task started earlier in the same batch is not
// scheduled any more), and what started is durable.
func TestStartedManyInOneCommand(t *testing.T) {
	dir := t.TempDir()
	e, st := open(t, dir)
	ctx := context.Background()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	tasks := []api.Task{{ID: "x", Priority: prio(1), Resources: resource.List{resource.CPU: 1000}}, {ID: "y", Priority: prio(1), Resources: resource.List{resource.CPU: 1000}}}
	if _, errsOut, err := e.Submit(ctx, "", tasks); err != nil || errsOut[0] != nil || errsOut[1] != nil {
		t.Fatalf("submit: %v %v", err, errsOut)
	}
	for _, id := range []string{"x", "y"} {
		if _, err := e.WaitPlaced(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.StartedMany(ctx, []string{"x", "y", "nope", "x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0] != nil || got[1] != nil || errs.CodeOf(got[2]) != errs.NotFound || errs.CodeOf(got[3]) != errs.Conflict {
		t.Fatalf("answers %v, want nil, nil, not found, conflict", got)
	}
	e.Close()
	st.Close()
	e, st = open(t, dir)
	defer st.Close()
	defer e.Close()
	for _, id := range []string{"x", "y"} {
		if r, ok := e.Task(id); !ok || r.State != "running" || r.Started == nil {
			t.Errorf("%s after restart: %+v", id, r)
		}
	}
}

func TestIdempotentSubmit(t *testing.T) {
	e, st := open(t, t.TempDir())
	defer st.Close()
	defer e.Close()
	ctx := context.Background()
	spec := api.Task{ID: "x", Resources: resource.List{resource.CPU: 1000}}
	for i := 0; i < 2; i++ {
		_, es, err := e.Submit(ctx, "default", []api.Task{spec})
		if err != nil || es[0] != nil {
			t.Fatalf("submit %d: %v %v", i, err, es)
		}
	}
	spec.Resources = resource.List{resource.CPU: 2000}
	_, es, _ := e.Submit(ctx, "default", []api.Task{spec})
	if errs.CodeOf(es[0]) != errs.Conflict {
		t.Fatalf("a different spec under the same id: %v", es[0])
	}
	if n := e.NumTasks(); n != 1 {
		t.Errorf("%d tasks, want 1", n)
	}
}

// failingStore fails every commit after the first n.
type failingStore struct {
	store.Store
	mu sync.Mutex
	n  int
}

func (f *failingStore) Commit(ctx context.Context, recs []store.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == 0 {
		return errors.New("disk on fire")
	}
	f.n--
	return f.Store.Commit(ctx, recs)
}

func TestStoreFailureStopsAcknowledging(t *testing.T) {
	st, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	fs := &failingStore{Store: st, n: 2} // the cluster id at the first open, then the node
	e, err := New(Config{Core: core.DefaultConfig()}, fs)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.Submit(ctx, "default", []api.Task{{ID: "lost", Resources: resource.List{resource.CPU: 1000}}})
	if errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("submit with a failing store: %v", err)
	}
	if _, _, err := e.Submit(ctx, "default", []api.Task{{ID: "later"}}); !errors.Is(err, ErrStopped) {
		t.Fatalf("after a failed commit: %v", err)
	}
	if _, ok := e.Task("lost"); ok {
		t.Error("an unacknowledged task is visible")
	}
	if e.Err() == nil {
		t.Error("Err is nil after a failed commit")
	}
}

// TestConcurrentSubmitsAllDurable submits from many goroutines; every
// acknowledged task is there after a restart, once.
func TestConcurrentSubmitsAllDurable(t *testing.T) {
	dir := t.TempDir()
	e, st := open(t, dir)
	ctx := context.Background()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]bool{}
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				id := fmt.Sprintf("g%d-%d", g, i)
				_, es, err := e.Submit(ctx, "default", []api.Task{{ID: id, Priority: prio(3), Resources: resource.List{resource.CPU: 100}}})
				if err == nil && es[0] == nil {
					mu.Lock()
					acked[id] = true
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	e.Close()
	st.Close()
	e, st = open(t, dir)
	defer st.Close()
	defer e.Close()
	if len(acked) != 500 {
		t.Fatalf("%d of 500 acknowledged", len(acked))
	}
	for id := range acked {
		if _, ok := e.Task(id); !ok {
			t.Errorf("acknowledged %s lost", id)
		}
	}
	if n := e.NumTasks(); n != 500 {
		t.Errorf("%d tasks after restart, want 500", n)
	}
	// The low tier's batch is dispatched by the engine's own timer.
	deadline, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	r, _ := e.WaitPlaced(deadline, "g0-0")
	if r.State != "scheduled" {
		t.Errorf("g0-0 still %s: the engine's timer did not dispatch the batch", r.State)
	}
}

// TestEventSeqContinuesAcrossRestart: event numbers never repeat across a
// restart, a cursor at the previous life's last event resumes with the
// first new one, older cursors are told to list again, future ones are
// rejected.
func TestEventSeqContinuesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	lastSeq := func(e *Engine) uint64 {
		e.events.mu.Lock()
		defer e.events.mu.Unlock()
		return e.events.next - 1
	}
	e, st := open(t, dir)
	if _, _, err := e.Submit(ctx, "default", []api.Task{{ID: "a"}, {ID: "b"}}); err != nil {
		t.Fatal(err)
	}
	seen := lastSeq(e)
	if seen < 2 {
		t.Fatalf("life 1 produced %d events", seen)
	}
	evs, _, err := e.Events(ctx, seen-1, 100)
	if err != nil || len(evs) == 0 || evs[0].Seq != seen {
		t.Fatalf("resume within life 1: %v %v", evs, err)
	}
	e.Close()
	st.Close()
	// The loop may commit more events after Submit returns (the first
	// schedule pass's reasons): life 1's last is the one it had at Close.
	last1 := lastSeq(e)

	e, st = open(t, dir)
	defer func() { e.Close(); st.Close() }()
	if _, _, err := e.Submit(ctx, "default", []api.Task{{ID: "c"}}); err != nil {
		t.Fatal(err)
	}
	// Life 2's events follow life 1's: c's submission, and the reasons
	// the restored waiting tasks get at the first schedule pass.
	evs, _, err = e.Events(ctx, last1, 100)
	sawC := false
	for _, ev := range evs {
		sawC = sawC || ev.ID == "c"
		if ev.Seq <= last1 {
			t.Fatalf("resume from life 1's last event: event %d of life 2 is not after %d", ev.Seq, last1)
		}
	}
	if err != nil || !sawC {
		t.Fatalf("resume from life 1's last event: %v %v", evs, err)
	}
	if _, _, err := e.Events(ctx, last1-1, 100); errs.FieldOf(err) != "since" {
		t.Fatalf("a cursor before this life: %v", err)
	}
	if _, _, err := e.Events(ctx, lastSeq(e)+5, 100); errs.FieldOf(err) != "since" {
		t.Fatalf("a future cursor: %v", err)
	}
}
