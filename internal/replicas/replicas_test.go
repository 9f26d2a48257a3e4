package replicas

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

var t0 = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)

// TestBackoff: 10 s doubling to 5 minutes, reset by a long run.
func TestBackoff(t *testing.T) {
	var h History
	var got []time.Duration
	for range 7 {
		h.Failed(t0, time.Second)
		got = append(got, h.Backoff())
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	if !slices.Equal(got, want) {
		t.Errorf("backoffs %v, want %v", got, want)
	}
	h.Failed(t0, 11*time.Minute)
	if h.Backoff() != BackoffFirst {
		t.Errorf("after a replica ran 11 minutes the backoff is %v, want %v", h.Backoff(), BackoffFirst)
	}
	p := Reconcile(t0.Add(5*time.Second), Spec{Replicas: 2, Revision: "a", MaxSurge: 1, MaxUnavailable: 1}, []Replica{{ID: "x", Revision: "a", Running: true, Ready: true}}, h)
	if p.Create != 0 || !p.RetryAt.Equal(t0.Add(10*time.Second)) {
		t.Errorf("5 s after a failure: %+v, want no start and a retry at 10 s", p)
	}
	if p := Reconcile(t0.Add(10*time.Second), Spec{Replicas: 2, Revision: "a", MaxSurge: 1, MaxUnavailable: 1}, []Replica{{ID: "x", Revision: "a", Running: true, Ready: true}}, h); p.Create != 1 {
		t.Errorf("once the backoff passed: %+v, want one start", p)
	}
}

// TestScaleDownStopsTheLeastUseful: pending, then not ready, then the
// newest go first.
func TestScaleDownStopsTheLeastUseful(t *testing.T) {
	live := []Replica{
		{ID: "old-ready", Revision: "a", Running: true, Ready: true, Created: t0},
		{ID: "new-ready", Revision: "a", Running: true, Ready: true, Created: t0.Add(time.Hour)},
		{ID: "unready", Revision: "a", Running: true, Created: t0},
		{ID: "pending", Revision: "a", Created: t0},
	}
	p := Reconcile(t0, Spec{Replicas: 1, Revision: "a", MaxSurge: 1, MaxUnavailable: 1}, live, History{})
	if want := []string{"pending", "unready", "new-ready"}; !slices.Equal(p.Stop, want) || p.Create != 0 {
		t.Errorf("scaling 4 to 1: %+v, want stops %v", p, want)
	}
}

// TestRolloutProperties: from any mix of replicas of an old and the
// current revision, each plan keeps the total within the count asked for
// plus the surge (by its starts) and the available count at least the
// count less maxUnavailable (by its stops), never starts more of the
// current revision than asked for, and stops only live replicas, each
// once; played out (started replicas ready at the next step, stopped ones
// gone), the service reaches the count asked for, all current.
func TestRolloutProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		spec := Spec{Replicas: rapid.IntRange(0, 12).Draw(rt, "replicas"), Revision: "new",
			MaxSurge: rapid.IntRange(0, 3).Draw(rt, "surge"), MaxUnavailable: rapid.IntRange(0, 3).Draw(rt, "unavailable")}
		if spec.MaxSurge == 0 && spec.MaxUnavailable == 0 {
			spec.MaxSurge = 1
		}
		var live []Replica
		for i := range rapid.IntRange(0, 15).Draw(rt, "live") {
			r := Replica{ID: fmt.Sprint("r", i), Revision: rapid.SampledFrom([]string{"old", "new"}).Draw(rt, "rev"), Created: t0.Add(time.Duration(i) * time.Second)}
			r.Running = rapid.Bool().Draw(rt, "running")
			r.Ready = r.Running && rapid.Bool().Draw(rt, "ready")
			live = append(live, r)
		}
		next := len(live)
		for step := range 60 {
			p := Reconcile(t0, spec, live, History{})
			total, cur, avail := len(live), 0, 0
			ids := map[string]bool{}
			for _, r := range live {
				ids[r.ID] = true
				if r.Revision == spec.Revision {
					cur++
				}
				if r.Running && r.Ready {
					avail++
				}
			}
			if p.Create < 0 || p.Create > 0 && (total+p.Create > spec.Replicas+spec.MaxSurge || cur+p.Create > spec.Replicas) {
				rt.Fatalf("step %d: %d live (%d current) of %+v, starts %d", step, total, cur, spec, p.Create)
			}
			after := avail
			for _, id := range p.Stop {
				if !ids[id] {
					rt.Fatalf("step %d: stops %s, not live or twice", step, id)
				}
				delete(ids, id)
				i := slices.IndexFunc(live, func(r Replica) bool { return r.ID == id })
				if live[i].Running && live[i].Ready {
					after--
				}
			}
			if after < min(avail, spec.Replicas-spec.MaxUnavailable) {
				rt.Fatalf("step %d: stops take the available count from %d to %d, below %d", step, avail, after, spec.Replicas-spec.MaxUnavailable)
			}
			if p.Create == 0 && len(p.Stop) == 0 && !slices.ContainsFunc(live, func(r Replica) bool { return !r.Ready }) {
				break // nothing to do, and nothing to wait for
			}
			// Play it out: stopped ones go, the others become ready, the
			// started ones join (not running yet).
			live = slices.DeleteFunc(live, func(r Replica) bool { return slices.Contains(p.Stop, r.ID) })
			for i := range live {
				live[i].Running, live[i].Ready = true, true
			}
			for range p.Create {
				live = append(live, Replica{ID: fmt.Sprint("r", next), Revision: spec.Revision, Created: t0.Add(time.Duration(next) * time.Second)})
				next++
			}
		}
		if len(live) != spec.Replicas || slices.ContainsFunc(live, func(r Replica) bool { return r.Revision != spec.Revision }) {
			rt.Fatalf("settled with %d replicas (%v), want %d of the current revision", len(live), live, spec.Replicas)
		}
	})
}
