package autoscale

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/api"
)

var t0 = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)

// cpu is n ready replicas each using use of a request of 1 (cores).
func cpu(n int, use float64) []Sample {
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{Ready: true, Value: use, Request: 1}
	}
	return out
}

func mustNew(t *testing.T, s api.Autoscale) *Autoscaler {
	t.Helper()
	a, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestReplicaCount: the HPA's replica calculator on hand-made cases.
func TestReplicaCount(t *testing.T) {
	seventy := target{percent: 70}
	for _, tc := range []struct {
		name    string
		current int
		t       target
		res     bool
		ss      []Sample
		want    int
		ok      bool
	}{
		{"at target", 4, seventy, true, cpu(4, 0.7), 4, true},
		{"within tolerance", 4, seventy, true, cpu(4, 0.75), 4, true},
		{"double", 4, seventy, true, cpu(4, 1.4), 8, true},
		{"ceil", 3, seventy, true, cpu(3, 0.9), 4, true},
		{"half", 4, seventy, true, cpu(4, 0.35), 2, true},
		{"custom", 2, target{value: 100}, false, []Sample{{Ready: true, Value: 300}, {Ready: true, Value: 300}}, 6, true},
		{"no ready", 2, seventy, true, []Sample{{Missing: true}, {Ready: false, Value: 1, Request: 1}}, 0, false},
		// Scaling up: a missing replica counts as idle, which keeps the
		// ratio above 1 here: 2 ready at 140 % and one at 0 → 93 % of
		// 70 → ceil(1.33 × 3) = 4.
		{"missing up", 3, seventy, true, append(cpu(2, 1.4), Sample{Missing: true}), 4, true},
		// Scaling down: a missing one counts at the target: 2 at 35 %,
		// one at 70 % → 47 % → ceil(0.67 × 3) = 2.
		{"missing down", 3, seventy, true, append(cpu(2, 0.35), Sample{Missing: true}), 2, true},
		// A not-ready replica counted idle turns a small scale-up into
		// tolerance: 1 at 80 % (1.14) and one not ready → 40 %: the
		// direction turns, the count stays.
		{"unready turns", 2, seventy, true, append(cpu(1, 0.8), Sample{Ready: false, Value: 0.9, Request: 1}), 2, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, _, ok := replicaCount(tc.current, tc.t, tc.res, tc.ss)
			if ok != tc.ok || ok && n != tc.want {
				t.Errorf("replicaCount = %d, %v; want %d, %v", n, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestScaleDownWaitsForTheWindow: a load that drops is followed down only
// once the window's higher recommendations have aged out, and up at once,
// within the default rate (100 % or 4 replicas per 15 s, the more).
func TestScaleDownWaitsForTheWindow(t *testing.T) {
	a := mustNew(t, api.Autoscale{Min: 2, Max: 10, Metrics: []api.AutoscaleMetric{{Resource: "cpu", Target: "70%"}}})
	d := a.Evaluate(t0, 2, [][]Sample{cpu(2, 3.5)}) // 500 % of 70: asks for 10
	if d.Replicas != 6 || d.Limited != "ScaleUpLimit" || d.Recommendation != 10 {
		t.Fatalf("from 2 at 500 %%: %+v, want 6 (2 + 4 in 15 s), limited by ScaleUpLimit", d)
	}
	d = a.Evaluate(t0.Add(10*time.Second), 6, [][]Sample{cpu(6, 3.5)})
	if d.Replicas != 6 || d.Limited != "ScaleUpLimit" {
		t.Fatalf("10 s later: %+v, want 6 (the period's allowance used)", d)
	}
	d = a.Evaluate(t0.Add(20*time.Second), 6, [][]Sample{cpu(6, 3.5)})
	if d.Replicas != 10 {
		t.Fatalf("20 s later: %+v, want 10", d)
	}
	low := [][]Sample{cpu(10, 0.07)} // 10 %: asks for 2
	for s := 30; s < 320; s += 30 {
		d = a.Evaluate(t0.Add(time.Duration(s)*time.Second), 10, low)
		if s < 320 && d.Replicas != 10 {
			t.Fatalf("at %d s, within 5 min of asking for 10: %+v, want 10", s, d)
		}
	}
	if d.Limited != "ScaleDownStabilized" {
		t.Errorf("held by %q, want ScaleDownStabilized", d.Limited)
	}
	d = a.Evaluate(t0.Add(330*time.Second), 10, low)
	if d.Replicas != 2 || d.Reason != "ScaleDown" {
		t.Fatalf("after the window: %+v, want 2", d)
	}
}

// TestHPARuleProperties: whatever the loads and times, the count stays
// within min and max, a scale-down never goes below the highest
// recommendation of the scale-down window (nor below the current count
// while one was higher), and a scale-up never passes the rate policies'
// allowance for the period.
func TestHPARuleProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		lo := rapid.IntRange(1, 5).Draw(rt, "min")
		hi := rapid.IntRange(lo, 40).Draw(rt, "max")
		window := time.Duration(rapid.IntRange(0, 600).Draw(rt, "window")) * time.Second
		spec := api.Autoscale{Min: lo, Max: hi, Metrics: []api.AutoscaleMetric{{Resource: "cpu", Target: rapid.SampledFrom([]string{"50%", "70%", "90%"}).Draw(rt, "target")}},
			Behavior: api.ScaleBehavior{ScaleDown: &api.ScaleRules{StabilizationWindow: durationPtr(window)}}}
		a, err := New(spec)
		if err != nil {
			rt.Fatal(err)
		}
		current := rapid.IntRange(lo, hi).Draw(rt, "current")
		now := t0
		var recs, changes []stamped
		for step := range rapid.IntRange(1, 40).Draw(rt, "steps") {
			now = now.Add(time.Duration(rapid.IntRange(1, 120).Draw(rt, "gap")) * time.Second)
			use := rapid.Float64Range(0, 4).Draw(rt, "use")
			ss := cpu(current, use)
			if rapid.Bool().Draw(rt, "missing") && len(ss) > 1 {
				ss[0] = Sample{Missing: true}
			}
			// The default scale-up policies, counted here: 100 % or 4
			// replicas more than at the start of the last 15 s.
			start := current
			for _, e := range changes {
				if e.at.After(now.Add(-15 * time.Second)) {
					start -= e.n
				}
			}
			allow := max(current, 2*start, start+4)
			d := a.Evaluate(now, current, [][]Sample{ss})
			if d.Replicas < lo || d.Replicas > hi {
				rt.Fatalf("step %d: %d replicas, outside [%d, %d]", step, d.Replicas, lo, hi)
			}
			highest := d.Recommendation
			for _, r := range recs {
				if r.at.After(now.Add(-window)) {
					highest = max(highest, r.n)
				}
			}
			if d.Replicas < current && d.Replicas < min(current, highest) {
				rt.Fatalf("step %d: scaled down %d → %d below the window's highest recommendation %d", step, current, d.Replicas, highest)
			}
			if d.Replicas > current && d.Replicas > allow {
				rt.Fatalf("step %d: scaled up %d → %d past the allowance %d", step, current, d.Replicas, allow)
			}
			recs = append(recs, stamped{now, d.Recommendation})
			if d.Replicas != current {
				changes = append(changes, stamped{now, d.Replicas - current})
			}
			current = d.Replicas
		}
	})
}
