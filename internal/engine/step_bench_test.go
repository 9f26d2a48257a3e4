package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// nullStore commits nothing (it counts the commits): the benchmarks below
// measure the engine's own cost per command (send, step, encode, publish,
// answer), not a disk's fsync.
type nullStore struct{ commits *atomic.Int64 }

func (s nullStore) Commit(context.Context, []store.Record) error {
	s.commits.Add(1)
	return nil
}
func (nullStore) Get(context.Context, string, string) ([]byte, bool, error) {
	return nil, false, nil
}
func (nullStore) Load(context.Context, string, func(string, []byte) error) error { return nil }
func (nullStore) Close() error                                                   { return nil }

// BenchmarkSubmitStep submits one lease per call from parallel callers, on
// a store that commits nothing: each task is staged, placed, encoded,
// published and answered by the loop's group commit. With tracing off
// (no tracer, the default), with a tracer that samples nothing, and with
// one that samples every submission (its spans dropped by the exporter):
// a traced task's submission, placement and commit spans.
func BenchmarkSubmitStep(b *testing.B) {
	for _, c := range []struct {
		name    string
		sampler sdktrace.Sampler // nil: no tracer
	}{{"tracing=off", nil}, {"tracing=unsampled", sdktrace.NeverSample()}, {"tracing=sampled", sdktrace.AlwaysSample()}} {
		b.Run(c.name, func(b *testing.B) {
			var tracer trace.Tracer
			if c.sampler != nil {
				tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(c.sampler), sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				defer tp.Shutdown(context.Background())
				tracer = tp.Tracer("bench")
			}
			benchSubmitStep(b, tracer)
		})
	}
}

func benchSubmitStep(b *testing.B, tracer trace.Tracer) {
	st := nullStore{commits: new(atomic.Int64)}
	e, err := New(Config{Core: core.DefaultConfig(), Tracer: tracer}, st)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	for i := 0; i < 16; i++ {
		n := api.Node{Name: fmt.Sprintf("n%d", i), Capacity: resource.List{resource.CPU: 1 << 40, resource.Memory: 1 << 50}}
		if err := e.UpsertNode(ctx, n); err != nil {
			b.Fatal(err)
		}
	}
	var seq atomic.Int64
	commits0 := st.commits.Load()
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p := 1
			t := api.Task{ID: fmt.Sprintf("t%d", seq.Add(1)), Priority: &p, Resources: resource.List{resource.CPU: 1, resource.Memory: 1 << 20}}
			if _, perTask, err := e.Submit(ctx, "default", []api.Task{t}); err != nil || perTask[0] != nil {
				b.Fatal(err, perTask[0])
			}
		}
	})
	b.ReportMetric(float64(st.commits.Load()-commits0)/float64(b.N), "commits/op")
}
