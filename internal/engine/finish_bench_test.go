package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// BenchmarkFinish ends placed tasks, 16 callers at once, on a Pebble
// store: ns per durable finish (the final state's record, and from issue
// 45 its accounting record, in the step's one commit).
func BenchmarkFinish(b *testing.B) {
	st, err := store.OpenDisk(b.TempDir(), store.DiskOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	e, err := New(Config{Core: core.DefaultConfig()}, st)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	for i := 0; i < 64; i++ {
		n := gpuNode(fmt.Sprintf("n%d", i))
		n.Capacity[resource.CPU] = 1 << 40
		if err := e.UpsertNode(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	ids := make([]string, b.N)
	tasks := make([]api.Task, 0, 1000)
	flush := func() {
		if _, perTask, err := e.Submit(ctx, "default", tasks); err != nil || perTask[0] != nil {
			b.Fatal(err, perTask)
		}
		tasks = tasks[:0]
	}
	for i := range ids {
		ids[i] = fmt.Sprintf("t%d", i)
		tasks = append(tasks, api.Task{ID: ids[i], User: "ann", Priority: prio(0), Command: []string{"x"},
			Resources: resource.List{resource.CPU: 100, "nvidia.com/gpu": 1}})
		if len(tasks) == cap(tasks) {
			flush()
		}
	}
	if len(tasks) > 0 {
		flush()
	}
	for _, id := range ids {
		if r, err := e.WaitPlaced(ctx, id); err != nil || r.State != "scheduled" {
			b.Fatal(id, r, err)
		}
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	next := make(chan string, len(ids))
	for _, id := range ids {
		next <- id
	}
	close(next)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				if err := e.Finished(ctx, id, core.Result{}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
