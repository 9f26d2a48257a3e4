package engine

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

func openAccounting(t *testing.T, dir string, clk *fakeClock, retain time.Duration) (*Engine, store.Store) {
	t.Helper()
	st, err := store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Core: core.DefaultConfig(), Now: clk.Now, RetainFinished: time.Minute, RetainAccounting: retain}, st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	return e, st
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// issue 45 §2: a finished task's accounting record outlives the task
// (retired after a minute here): who, queue, devices and model, node,
// times, exit, attempts, CPU- and GPU-hours; History pages and filters
// it; the usage report clips runs to its range and counts running work
// until now; a restart keeps the records, and RetainAccounting deletes
// them.
func TestAccountingOutlivesRetention(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	clk := &fakeClock{t: t0}
	e, st := openAccounting(t, dir, clk, 48*time.Hour)
	ctx := context.Background()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	run := func(id, user string, gpu int64, hours time.Duration, exit int) {
		t.Helper()
		task := api.Task{ID: id, User: user, Priority: prio(0), Resources: resource.List{resource.CPU: 2000, "nvidia.com/gpu": gpu}, Command: []string{"x"}}
		if _, perTask, err := e.Submit(ctx, "default", []api.Task{task}); err != nil || perTask[0] != nil {
			t.Fatal(err, perTask)
		}
		if r, err := e.WaitPlaced(ctx, id); err != nil || r.State != "scheduled" {
			t.Fatalf("%s: %v %v", id, r, err)
		}
		if err := e.Started(ctx, id); err != nil {
			t.Fatal(err)
		}
		clk.Add(hours)
		if exit >= 0 {
			if err := e.Finished(ctx, id, core.Result{ExitCode: exit}); err != nil {
				t.Fatal(err)
			}
		}
	}
	run("train", "ann", 1000, 2*time.Hour, 0) // t0 .. t0+2h, one GPU
	run("eval", "bob", 500, time.Hour, 3)     // t0+2h .. t0+3h, half a GPU, fails
	if _, perTask, err := e.Submit(ctx, "default", []api.Task{{ID: "huge", User: "ann", Resources: resource.List{"nvidia.com/gpu": 3000}, Command: []string{"x"}}}); err != nil || perTask[0] != nil {
		t.Fatal(err, perTask)
	}
	if err := e.Cancel(ctx, "huge"); err != nil {
		t.Fatal(err)
	}
	run("serve", "ann", 1000, time.Hour, -1) // from t0+3h, still running at t0+4h
	clk.Add(2 * time.Minute)
	poke(t, e, "p1") // the finished ones are retired
	if _, ok := e.Task("train"); ok {
		t.Fatal("train was not retired")
	}

	check := func(e *Engine) {
		t.Helper()
		all, next, err := e.Accounting().History(ctx, AccountingQuery{Since: t0, Limit: 100})
		if err != nil || next != "" || len(all) != 3 {
			t.Fatalf("history: %d records, next %q, %v", len(all), next, err)
		}
		train, eval, huge := all[0], all[1], all[2]
		if train.ID != "train" || train.User != "ann" || train.Queue != "default" || train.State != "succeeded" ||
			train.ExitCode == nil || *train.ExitCode != 0 || train.Node != "g1" || train.Model != "L4" || train.Attempts != 1 ||
			!near(train.CPUHours, 4) || !near(train.DeviceHours["nvidia.com/gpu"], 2) || !train.Finished.Equal(t0.Add(2*time.Hour)) ||
			train.Started == nil || len(train.Runs) != 1 {
			t.Errorf("train's record: %+v", train)
		}
		if eval.ID != "eval" || eval.State != "failed" || *eval.ExitCode != 3 || !near(eval.DeviceHours["nvidia.com/gpu"], 0.5) {
			t.Errorf("eval's record: %+v", eval)
		}
		if huge.ID != "huge" || huge.State != "cancelled" || huge.Attempts != 0 || len(huge.Runs) != 0 || huge.CPUHours != 0 {
			t.Errorf("huge's record: %+v", huge)
		}
		// Pages of one, and filters.
		page, next, err := e.Accounting().History(ctx, AccountingQuery{Since: t0, Limit: 1})
		if err != nil || len(page) != 1 || page[0].ID != "train" || next == "" {
			t.Fatalf("page 1: %v %q %v", page, next, err)
		}
		page, _, _ = e.Accounting().History(ctx, AccountingQuery{Since: t0, Limit: 1, Cursor: next})
		if len(page) != 1 || page[0].ID != "eval" {
			t.Errorf("page 2: %v", page)
		}
		bob, _, _ := e.Accounting().History(ctx, AccountingQuery{Since: t0, Limit: 100, User: "bob"})
		failed, _, _ := e.Accounting().History(ctx, AccountingQuery{Since: t0, Limit: 100, States: []string{"failed", "cancelled"}})
		later, _, _ := e.Accounting().History(ctx, AccountingQuery{Since: t0.Add(150 * time.Minute), Limit: 100})
		if len(bob) != 1 || bob[0].ID != "eval" || len(failed) != 2 || len(later) != 2 {
			t.Errorf("filtered: bob %v, failed or cancelled %d, finished after 2.5h %d", bob, len(failed), len(later))
		}
		// Usage from t0+1h: train's second hour, eval's hour, serve's
		// 62 minutes so far.
		serve := 62.0 / 60
		rep, err := e.Accounting().UsageReport(ctx, AccountingQuery{Since: t0.Add(time.Hour), By: []string{"user", "model"}})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][3]float64{"ann": {2, 2 * (1 + serve), 1 + serve}, "bob": {1, 2, 0.5}} // tasks, CPU-hours, GPU-hours
		if len(rep.Rows) != 2 {
			t.Fatalf("usage rows: %+v", rep.Rows)
		}
		for _, row := range rep.Rows {
			w := want[row.Group["user"]]
			if row.Group["model"] != "L4" || float64(row.Tasks) != w[0] || !near(row.CPUHours, w[1]) || !near(row.DeviceHours["nvidia.com/gpu"], w[2]) {
				t.Errorf("usage row %+v, want tasks, CPU-, GPU-hours %v", row, w)
			}
		}
		if rep.Total.Tasks != 3 || !near(rep.Total.DeviceHours["nvidia.com/gpu"], 1.5+serve) {
			t.Errorf("usage total: %+v", rep.Total)
		}
	}
	check(e)
	e.Close()
	st.Close()
	e, st = openAccounting(t, dir, clk, 48*time.Hour)
	check(e)
	// Two days later the records are deleted.
	clk.Add(48 * time.Hour)
	poke(t, e, "p2")
	e.Close()
	st.Close()
	e, st = openAccounting(t, dir, clk, 48*time.Hour)
	defer st.Close()
	defer e.Close()
	if all, _, err := e.Accounting().History(ctx, AccountingQuery{Since: t0, Limit: 100}); err != nil || len(all) != 0 {
		t.Errorf("after 48 hours: %d records, %v", len(all), err)
	}
}
