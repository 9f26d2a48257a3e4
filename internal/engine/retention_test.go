package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

func openRetaining(t *testing.T, dir string, clk *fakeClock, after time.Duration, max int) (*Engine, store.Store) {
	t.Helper()
	st, err := store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Core: core.DefaultConfig(), Now: clk.Now, RetainFinished: after, RetainFinishedMax: max}, st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return e, st
}

func cpuTask(id string) api.Task {
	return api.Task{ID: id, Priority: prio(2), Resources: resource.List{resource.CPU: 1000}}
}

// poke runs a step (a submission), so the loop looks at its retention at
// the fake clock's time.
func poke(t *testing.T, e *Engine, id string) {
	t.Helper()
	if _, errsOut, err := e.Submit(context.Background(), "default", []api.Task{cpuTask(id)}); err != nil || errsOut[0] != nil {
		t.Fatal(err, errsOut)
	}
}

// Finished tasks and jobs are kept for RetainFinished after they
// finished, listed and readable; then they are gone from memory and the
// store (a restart does not bring them back); unfinished work stays.
func TestRetentionByAge(t *testing.T) {
	dir := t.TempDir()
	clk := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	e, st := openRetaining(t, dir, clk, time.Hour, 0)
	ctx := context.Background()
	for _, id := range []string{"old", "young", "waiting"} {
		poke(t, e, id)
	}
	if _, err := e.SubmitJob(ctx, "default", api.Job{ID: "j", Tasks: []api.Task{cpuTask("x"), cpuTask("y")}}); err != nil {
		t.Fatal(err)
	}
	if err := e.Cancel(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	if err := e.CancelJob(ctx, "j"); err != nil {
		t.Fatal(err)
	}
	clk.Add(30 * time.Minute)
	if err := e.Cancel(ctx, "young"); err != nil {
		t.Fatal(err)
	}
	clk.Add(29 * time.Minute)
	poke(t, e, "p1")
	for _, id := range []string{"old", "young", "j.x"} {
		if _, ok := e.Task(id); !ok {
			t.Errorf("%s was retired before its hour", id)
		}
	}
	clk.Add(2 * time.Minute) // old and the job: 61 minutes
	poke(t, e, "p2")
	for id, want := range map[string]bool{"old": false, "j.x": false, "j.y": false, "young": true, "waiting": true} {
		if _, ok := e.Task(id); ok != want {
			t.Errorf("after 61 minutes: task %s present %v, want %v", id, ok, want)
		}
	}
	if _, _, ok := e.Job("j"); ok {
		t.Error("the job is still there after 61 minutes")
	}
	if recs, _ := e.List(Filter{}, 0, 100); len(recs) != 4 {
		t.Errorf("listing after retirement: %d tasks, want young, waiting, p1, p2", len(recs))
	}
	if jobs, _ := e.ListJobs(JobFilter{}, 0, 100); len(jobs) != 0 {
		t.Errorf("job listing after retirement: %d", len(jobs))
	}
	e.Close()
	st.Close()
	e, st = openRetaining(t, dir, clk, time.Hour, 0)
	defer st.Close()
	defer e.Close()
	for id, want := range map[string]bool{"old": false, "j.x": false, "young": true, "waiting": true} {
		if _, ok := e.Task(id); ok != want {
			t.Errorf("after a restart: task %s present %v, want %v", id, ok, want)
		}
	}
	// young's hour comes after the restart too.
	clk.Add(31 * time.Minute)
	poke(t, e, "p3")
	if _, ok := e.Task("young"); ok {
		t.Error("young outlived its hour across a restart")
	}
	if _, ok := e.Task("waiting"); !ok {
		t.Error("an unfinished task was retired")
	}
}

// RetainFinishedMax keeps the newest finished items only.
func TestRetentionByCount(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	e, st := openRetaining(t, t.TempDir(), clk, 0, 2)
	defer st.Close()
	defer e.Close()
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		poke(t, e, id)
		clk.Add(time.Second)
		if err := e.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	poke(t, e, "d")
	for id, want := range map[string]bool{"a": false, "b": true, "c": true, "d": true} {
		if _, ok := e.Task(id); ok != want {
			t.Errorf("task %s present %v, want %v", id, ok, want)
		}
	}
}

// taskCountingStore counts the task records committed through it, but
// the new task "after" (its own steps commit it once or twice, as its
// reason arrives).
type taskCountingStore struct {
	store.Store
	mu    sync.Mutex
	tasks int
}

func (c *taskCountingStore) Commit(ctx context.Context, recs []store.Record) error {
	c.mu.Lock()
	for _, r := range recs {
		if r.Kind == KindTask && r.Key != "after" { // the restored tasks only
			c.tasks++
		}
	}
	c.mu.Unlock()
	return c.Store.Commit(ctx, recs)
}

// A restart rewrites no waiting task's record: the reason it was stored
// with stands until the first schedule pass gives it the same again.
func TestRestartRewritesNoWaitingTask(t *testing.T) {
	dir := t.TempDir()
	e, st := open(t, dir)
	var ts []api.Task
	for i := range 50 {
		ts = append(ts, api.Task{ID: fmt.Sprint("p", i), Priority: prio(3), Resources: resource.List{resource.CPU: 100_000_000}})
	}
	if _, _, err := e.Submit(context.Background(), "default", ts); err != nil {
		t.Fatal(err)
	}
	want, _ := e.Task("p7")
	e.Close()
	st.Close()
	disk, err := store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer disk.Close()
	cs := &taskCountingStore{Store: disk}
	e, err = New(Config{Core: core.DefaultConfig()}, cs)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	poke(t, e, "after") // a step: the first schedule pass ran
	cs.mu.Lock()
	n := cs.tasks
	cs.mu.Unlock()
	if n != 0 {
		t.Errorf("the restart and a step committed %d of the restored waiting tasks' records, want none", n)
	}
	if got, _ := e.Task("p7"); got.Reason != want.Reason || got.Reason == "" {
		t.Errorf("p7's reason after the restart: %q, before: %q", got.Reason, want.Reason)
	}
}
