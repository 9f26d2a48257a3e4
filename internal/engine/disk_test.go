package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/metrics"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// tightDisk is a store on disk whose free space the test sets, and whose
// commits fail once fail is set.
type tightDisk struct {
	*store.Disk
	free, reserve uint64
	fail          bool
}

func (d *tightDisk) Space() store.Space {
	return store.Space{Free: d.free, Total: 1 << 40, Reserve: d.reserve, Low: d.free < d.reserve}
}

func (d *tightDisk) Commit(ctx context.Context, recs []store.Record) error {
	if d.fail {
		return errors.New("no space left on device")
	}
	return d.Disk.Commit(ctx, recs)
}

// issue 41 §4: a write whose records, amplified as a disk takes them
// before compaction, would not fit above the reserve is refused (507,
// with the sizes), while a small one goes through; and a loop stopped by
// a failed commit still has its disk gauges refreshed: writable 0.
func TestDiskRoomForTheWholeWrite(t *testing.T) {
	st, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	d := &tightDisk{Disk: st, free: 64<<20 + 1<<20, reserve: 64 << 20} // 1 MiB above the reserve
	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	e, err := New(Config{Core: core.DefaultConfig(), Metrics: m}, d)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	big := make([]api.Task, 400)
	for i := range big {
		big[i] = api.Task{ID: "big-" + strings.Repeat("x", 8) + string(rune('a'+i%26)) + string(rune('a'+i/26)),
			Resources: resource.List{resource.CPU: 1000}, Env: map[string]string{"PAYLOAD": strings.Repeat("p", 2000)}}
	}
	_, _, err = e.Submit(ctx, "default", big)
	if errs.CodeOf(err) != errs.InsufficientStorage || !strings.Contains(err.Error(), "does not fit") || !strings.Contains(err.Error(), "MiB") {
		t.Fatalf("400 tasks of 2 KB, 1 MiB above the reserve: %v", err)
	}
	if _, errsOf, err := e.Submit(ctx, "default", big[:10]); err != nil || errsOf[0] != nil {
		t.Fatalf("10 of them: %v %v", err, errsOf)
	}
	if _, err := e.SubmitJob(ctx, "default", api.Job{ID: "j", Tasks: big[10:]}); errs.CodeOf(err) != errs.InsufficientStorage {
		t.Fatalf("a job of 390 of them: %v", err)
	}
	// The gauges are refreshed every diskGaugeEvery: wait for one.
	for deadline := time.Now().Add(10 * diskGaugeEvery); testutil.ToFloat64(m.StoreWritable) != 1; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("writable %v with room", testutil.ToFloat64(m.StoreWritable))
		}
	}

	d.fail = true
	if _, _, err := e.Submit(ctx, "default", big[10:11]); err == nil {
		t.Fatal("a failed commit acknowledged")
	}
	<-e.Done()
	for deadline := time.Now().Add(10 * diskGaugeEvery); testutil.ToFloat64(m.StoreWritable) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the stopped engine's store still says writable")
		}
	}
}

// issue 41 §2: with PauseCredit the loop does not blame agents for the
// time it could not run. After a 10 s gap between steps (a leader frozen,
// then resumed), a node whose agent heartbeat just before stays ready
// (it was marked notready, and its tasks re-queued); heartbeats that stop
// while the loop runs still make it notready after the deadline.
func TestPauseIsNotBlamedOnAgents(t *testing.T) {
	for _, credit := range []bool{true, false} {
		t.Run(fmt.Sprintf("credit=%v", credit), func(t *testing.T) {
			st, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			clk := &fakeClock{t: time.Unix(1_800_000_000, 0)}
			e, err := New(Config{Core: core.DefaultConfig(), Now: clk.Now, HeartbeatInterval: 2 * time.Second, MissedHeartbeats: 3, PauseCredit: credit}, st)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			ctx := context.Background()
			if _, err := e.Register(ctx, agentapi.Registration{Agent: "a1", Nodes: []api.Node{gpuNode("n1")}}); err != nil {
				t.Fatal(err)
			}
			step := func(d time.Duration) string {
				t.Helper()
				clk.Add(d)
				if _, err := e.Summarize(ctx); err != nil { // a step: liveness is judged
					t.Fatal(err)
				}
				v, ok, err := e.NodeViewOf(ctx, "n1")
				if err != nil || !ok {
					t.Fatal(ok, err)
				}
				return v.State
			}
			step(time.Second)
			if got := step(10 * time.Second); (got == api.NodeReady) != credit {
				t.Fatalf("after a 10 s gap between steps: %s", got)
			}
			if !credit {
				return
			}
			// The loop runs on (steps every half interval), no heartbeat:
			// the deadline passes.
			state := ""
			for range 20 {
				if state = step(time.Second); state == api.NodeNotReady {
					break
				}
			}
			if state != api.NodeNotReady {
				t.Errorf("heartbeats stopped while the loop ran: %s", state)
			}
		})
	}
}
