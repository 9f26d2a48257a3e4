package kube

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStartBatchGathersAndKeepsOrder: tasks added while the loop waits
// go to the engine together, each once; a flush reports what is queued at
// once and returns only after the batch in flight was reported.
func TestStartBatchGathersAndKeepsOrder(t *testing.T) {
	var mu sync.Mutex
	var batches [][]string
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	var released atomic.Bool
	b := newStartBatch(func(_ context.Context, ids []string) {
		mu.Lock()
		first := len(batches) == 0
		batches = append(batches, slices.Clone(ids))
		mu.Unlock()
		entered <- struct{}{}
		if first {
			<-release // the first batch is held in flight
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.add("a")
	b.add("b") // both queued before the loop runs: one batch
	done := make(chan struct{})
	go func() { defer close(done); b.run(ctx) }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop never reported the batch")
	}
	b.add("c")
	flushed := make(chan bool)
	go func() {
		b.flush(ctx)
		flushed <- released.Load()
	}()
	released.Store(true)
	close(release)
	if !<-flushed {
		t.Error("flush returned while the batch before it was in flight")
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	var all []string
	for _, batch := range batches {
		all = append(all, batch...)
	}
	if !slices.Equal(all, []string{"a", "b", "c"}) {
		t.Errorf("reported %v, want a, b and c once each, in order", batches)
	}
	if len(batches) == 0 || !slices.Equal(batches[0], []string{"a", "b"}) {
		t.Errorf("first batch %v, want a and b together", batches)
	}
}
