package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// BenchmarkRecover measures a restart: opening an engine on a store that
// holds 200,000 pending tasks (no nodes), which loads and decodes every
// record and restores the core.
func BenchmarkRecover(b *testing.B) {
	const n = 200_000
	dir := b.TempDir()
	e, st := open(&testing.T{}, dir)
	ctx := context.Background()
	batch := make([]api.Task, 0, 1000)
	for i := 0; i < n; i++ {
		p := i % 4
		batch = append(batch, api.Task{ID: fmt.Sprintf("p%d", i), Priority: &p,
			Resources: resource.List{resource.CPU: 100, resource.Memory: 64 << 20}})
		if len(batch) == cap(batch) {
			if _, errsOut, err := e.Submit(ctx, "default", batch); err != nil || errsOut[0] != nil {
				b.Fatal(err, errsOut[0])
			}
			batch = batch[:0]
		}
	}
	e.Close()
	st.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		st, err := store.OpenDisk(dir, store.DiskOptions{})
		if err != nil {
			b.Fatal(err)
		}
		e, err := New(Config{Core: core.DefaultConfig()}, st)
		if err != nil {
			b.Fatal(err)
		}
		if got := e.NumTasks(); got != n {
			b.Fatalf("recovered %d tasks, want %d", got, n)
		}
		b.ReportMetric(float64(n)/time.Since(t0).Seconds(), "tasks/s")
		e.Close()
		st.Close()
	}
}
