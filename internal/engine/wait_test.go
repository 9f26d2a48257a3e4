package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestWaitersShareOneChannel: many callers waiting for one task share one
// channel; the commit that places the task wakes them all and forgets the
// channel.
func TestWaitersShareOneChannel(t *testing.T) {
	e, st := open(t, t.TempDir())
	defer st.Close()
	defer e.Close()
	ctx := context.Background()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	// The node's two GPUs are taken; "w" waits for one.
	if _, errsOut, err := e.Submit(ctx, "default", []api.Task{{ID: "hold", Priority: prio(0), Resources: resource.List{"nvidia.com/gpu": 2000}}}); err != nil || errsOut[0] != nil {
		t.Fatal(err, errsOut)
	}
	if _, errsOut, err := e.Submit(ctx, "default", []api.Task{{ID: "w", Priority: prio(0), Resources: resource.List{"nvidia.com/gpu": 1000}}}); err != nil || errsOut[0] != nil {
		t.Fatal(err, errsOut)
	}
	const n = 50
	var wg sync.WaitGroup
	got := make([]*TaskRecord, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.WaitPlaced(ctx, "w")
			if err != nil {
				t.Error(err)
			}
			got[i] = r
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		e.waitMu.Lock()
		k := len(e.waiters)
		e.waitMu.Unlock()
		if k == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d waiter channels", k)
		}
		time.Sleep(time.Millisecond)
	}
	if ch1, ch2 := e.WaitChange("w"), e.WaitChange("w"); ch1 != ch2 {
		t.Error("two waits for one task got two channels")
	}
	if err := e.Finished(ctx, "hold", core.Result{}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, r := range got {
		if r == nil || r.State != "scheduled" {
			t.Fatalf("waiter %d: %+v", i, r)
		}
	}
	e.waitMu.Lock()
	defer e.waitMu.Unlock()
	if len(e.waiters) != 0 {
		t.Errorf("%d waiter channels left", len(e.waiters))
	}
}

// TestCommandAfterCloseFails: a command sent while or after the engine
// closes is answered with ErrStopped, never left waiting.
func TestCommandAfterCloseFails(t *testing.T) {
	e, st := open(t, t.TempDir())
	defer st.Close()
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				if err := e.UpsertNode(context.Background(), gpuNode("g1")); err == ErrStopped {
					return
				}
			}
		}()
	}
	time.Sleep(time.Millisecond)
	e.Close()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("commands sent around Close were never answered")
	}
	if err := e.Renew(context.Background(), "x"); err != ErrStopped {
		t.Fatalf("after Close: %v", err)
	}
	select {
	case <-e.Stopped():
	default:
		t.Fatal("Stopped is open after Close")
	}
}
