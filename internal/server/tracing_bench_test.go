package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hetsched/hetsched/internal/loadgen"
	"github.com/hetsched/hetsched/internal/telemetry"
)

// BenchmarkTracing measures single-task POST /api/v1/schedule (leases of
// all tiers, completed right away) at 64 keep-alive connections with
// tracing off (the default: no OTEL_EXPORTER_OTLP_ENDPOINT), on but
// sampling nothing (parentbased_always_off, no client traceparent), and on
// sampling every request and task (always_on; the spans go to an exporter
// that drops them, so what is measured is making them), one server after
// the other in one run.
func BenchmarkTracing(b *testing.B) {
	for _, c := range []struct{ name, sampler string }{{"off", ""}, {"unsampled", "parentbased_always_off"}, {"sampled", "always_on"}} {
		b.Run(c.name, func(b *testing.B) {
			var tr *telemetry.Tracing
			if c.sampler != "" {
				b.Setenv("OTEL_TRACES_SAMPLER", c.sampler)
				var err error
				if tr, err = telemetry.Setup(context.Background(), telemetry.Config{Exporter: tracetest.NewNoopExporter()}); err != nil {
					b.Fatal(err)
				}
				defer tr.Shutdown(context.Background())
			}
			t := &testing.T{}
			s := startWith(t, Options{DataDir: b.TempDir(), Tracing: tr})
			defer s.stop(t)
			b.ResetTimer()
			for k := 0; k < b.N; k++ {
				o := loadgen.Options{Target: s.base, Connections: 64, Duration: 3 * time.Second, Mix: [4]int{1, 4, 30, 65},
					Complete: true, RunID: fmt.Sprintf("%s-%d", c.name, k)}
				st, err := loadgen.Run(context.Background(), o)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(st.RequestRate, "req/s")
				b.ReportMetric(st.All.P99, "p99-µs")
			}
		})
	}
}
