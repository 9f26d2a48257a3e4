package engine

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/metrics"
)

// series reads v's series as label value → gauge value.
func series(t *testing.T, v *prometheus.GaugeVec) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 16)
	go func() { v.Collect(ch); close(ch) }()
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		out[pb.GetLabel()[0].GetValue()] = pb.GetGauge().GetValue()
	}
	return out
}

// TestGaugeSeriesKeepsThenSweeps: a series set again keeps its value with
// no moment where it is gone; a series not set again is deleted by sweep.
func TestGaugeSeriesKeepsThenSweeps(t *testing.T) {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "x", Help: "x"}, []string{"q"})
	var g gaugeSeries
	g.set(v, 1, "a")
	g.set(v, 2, "b")
	g.sweep()
	if got := series(t, v); len(got) != 2 {
		t.Fatalf("after the first round: %v, want a and b", got)
	}
	g.set(v, 3, "a")
	// Mid-round (what a scrape would see): b is still there.
	if got := series(t, v); len(got) != 2 || got["b"] != 2 {
		t.Fatalf("during a round: %v, want b still there (no gap)", got)
	}
	g.sweep()
	if got := series(t, v); len(got) != 1 || got["a"] != 3 {
		t.Fatalf("after the sweep: %v, want only a=3", got)
	}
	g.sweep() // an empty round removes everything
	if got := series(t, v); len(got) != 0 {
		t.Fatalf("after an empty round: %v, want none", got)
	}
}

// TestCoreEventsCountWhatTheCoreCounted: hetsched_scheduler_events_total
// grows by what the core's counters gained between steps, each event
// apart, and not again for counts already exported.
func TestCoreEventsCountWhatTheCoreCounted(t *testing.T) {
	m := metrics.New(prometheus.NewRegistry())
	g := gauges{m: m}
	g.coreEvents(core.Stats{Starved: 2, GangReserved: 1})
	g.coreEvents(core.Stats{Starved: 5, GangReserved: 1, Promoted: 3})
	g.coreEvents(core.Stats{Starved: 5, GangReserved: 1, Promoted: 3})
	for event, want := range map[string]float64{"starved": 5, "las_promoted": 3, "gang_reserved": 1} {
		if got := testutil.ToFloat64(m.CoreEvents.WithLabelValues(event)); got != want {
			t.Errorf("%s: %v, want %v", event, got, want)
		}
	}
}
