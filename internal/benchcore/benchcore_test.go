package benchcore

import (
	"testing"
	"time"
)

// TestShapesPlaceEverything checks the shapes themselves: on a fleet sized
// for the work, every task is placed.
func TestShapesPlaceEverything(t *testing.T) {
	for _, policy := range []string{"least-allocated", "binpack", "round-robin"} {
		r, err := Fleet(Options{Policy: policy}, 1000, 20000)
		if err != nil {
			t.Fatal(err)
		}
		if r.Placements != r.Tasks {
			t.Errorf("%s fleet: placed %d of %d", policy, r.Placements, r.Tasks)
		}
		if r.Pending == 0 {
			t.Errorf("%s fleet: nothing was pending before the dispatch", policy)
		}
	}
	r, err := Peer(Options{Policy: "binpack"}, 50, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if r.Placements != 1000 {
		t.Errorf("peer: placed %d of 1000", r.Placements)
	}
}

func benchFleet(b *testing.B, tasks int) {
	for i := 0; i < b.N; i++ {
		r, err := Fleet(Options{Policy: "least-allocated"}, 10000, tasks)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.NsPerPlacement, "ns/placement")
		b.ReportMetric(r.DispatchNsPerPlacement, "dispatch-ns/placement")
		b.ReportMetric(r.PlacementsPerSec, "placements/s")
	}
}

func BenchmarkFleet10k(b *testing.B)  { benchFleet(b, 10_000) }
func BenchmarkFleet100k(b *testing.B) { benchFleet(b, 100_000) }
func BenchmarkFleet1M(b *testing.B)   { benchFleet(b, 1_000_000) }

func benchPeer(b *testing.B, m, n int) {
	for i := 0; i < b.N; i++ {
		r, err := Peer(Options{Policy: "least-allocated"}, m, n)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.NsPerPlacement, "ns/placement")
		b.ReportMetric(r.PlacementsPerSec, "placements/s")
	}
}

func BenchmarkPeer500x10k(b *testing.B) { benchPeer(b, 500, 10_000) }
func BenchmarkPeer5kx10k(b *testing.B)  { benchPeer(b, 5000, 10_000) }
func BenchmarkPeer10kx40k(b *testing.B) { benchPeer(b, 10_000, 40_000) }

func TestChurnReplacesEveryFinishedTask(t *testing.T) {
	r, err := Churn(Options{Policy: "least-allocated"}, 100, 5000, 500)
	if err != nil {
		t.Fatal(err)
	}
	// Each finished task frees 1 cpu and 1..4 GiB: a waiting task of the
	// same or a smaller class fits; at least one per finish.
	if r.PlacedInCycle < r.Cycles {
		t.Errorf("placed %d in %d cycles", r.PlacedInCycle, r.Cycles)
	}
}

func benchChurn(b *testing.B, pending int) {
	for i := 0; i < b.N; i++ {
		r, err := Churn(Options{Policy: "least-allocated"}, 10000, pending, 20000)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.NsPerCycle, "ns/finish+place")
	}
}

func BenchmarkChurn10kPending(b *testing.B)  { benchChurn(b, 10_000) }
func BenchmarkChurn100kPending(b *testing.B) { benchChurn(b, 100_000) }
func BenchmarkChurn1MPending(b *testing.B)   { benchChurn(b, 1_000_000) }

// TestPreemptPlacesEveryArrival: on a full (small) fleet every urgent
// arrival is placed by its own Submit, evicting at least one task.
func TestPreemptPlacesEveryArrival(t *testing.T) {
	for _, tenants := range []int{0, 4} {
		r, err := Preempt(Options{Policy: "least-allocated"}, 200, 60, tenants)
		if err != nil {
			t.Fatal(err)
		}
		if r.Placed != r.Arrivals || r.VictimsPerOp < 1 {
			t.Errorf("%d tenants: %v", tenants, r)
		}
	}
}

func benchPreempt(b *testing.B, nodes, tenants int) {
	for i := 0; i < b.N; i++ {
		r, err := Preempt(Options{Policy: "least-allocated"}, nodes, 3000, tenants)
		if err != nil {
			b.Fatal(err)
		}
		if r.Placed != r.Arrivals {
			b.Fatalf("placed %d of %d arrivals", r.Placed, r.Arrivals)
		}
		b.ReportMetric(float64(r.P50Ns), "p50-ns")
		b.ReportMetric(float64(r.P99Ns), "p99-ns")
		b.ReportMetric(float64(r.MaxNs), "max-ns")
		b.ReportMetric(r.VictimsPerOp, "victims/arrival")
	}
}

// BenchmarkUrgentPreempt10k: an urgent task's arrival to its placement
// (victims chosen) on a full 10,000-node fleet.
// (4 tenant queues, each guaranteed a fifth; NoQueues: the same work in no
// queue).
func BenchmarkUrgentPreempt10k(b *testing.B)         { benchPreempt(b, 10_000, 4) }
func BenchmarkUrgentPreempt10kNoQueues(b *testing.B) { benchPreempt(b, 10_000, 0) }

// TestTiersMeasuresUrgentAndHigh: a short real-time run on a small full
// cluster with a saturated low tier places urgent and high work (by
// preemption) and measures it. Medium work is placed too: the low backlog,
// raised by aging, waits behind native medium work and passes it only on
// its bounded turns (core queue.go; before that bound, no medium task was
// placed at all — BENCHMARKS.md, issue 8).
func TestTiersMeasuresUrgentAndHigh(t *testing.T) {
	r, err := Tiers(Options{Policy: "least-allocated"}, 50, 2000, 2000, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for l := 0; l < 3; l++ {
		if r.Placed[l] == 0 || r.P99Us[l] < r.P50Us[l] {
			t.Errorf("tier %d: %v", l, r)
		}
	}
	// Most medium arrivals are placed (before the bound: none). Not all:
	// the run is real time on a shared machine, and the last arrivals
	// may still wait for their batch or a slot when it ends.
	if r.Placed[2] < r.Arrived[2]*8/10 {
		t.Errorf("medium: %d of %d arrivals placed: %v", r.Placed[2], r.Arrived[2], r)
	}
	// The aged low backlog is not starved either: it gets its turns.
	if r.EarlierPlaced == 0 {
		t.Errorf("no backlog task placed: %v", r)
	}
}

// BenchmarkGangs1000 is `hetsched-bench core --shape gangs`: 1,000 gangs of
// 2-64 whole-node members arriving on the 10,000-node fleet's full GPUs.
func BenchmarkGangs1000(b *testing.B) {
	for b.Loop() {
		r, err := Gangs(Options{Policy: "least-allocated"}, 10000, 1000)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(r.AttemptsPerSec, "attempts/s")
	}
}

// TestGangsStartOverEvictions: in the gang shape, the first gangs start by
// evicting the fill, every member of a started gang is placed, and the
// rest wait (the fleet has 3,000 GPU nodes for 19,865 members).
func TestGangsStartOverEvictions(t *testing.T) {
	r, err := Gangs(Options{Policy: "least-allocated"}, 1000, 100)
	if err != nil {
		t.Fatal(err)
	}
	if r.Started == 0 || r.Preempted == 0 || r.Started == r.Gangs {
		t.Fatalf("%s: want some gangs started over evictions, and some waiting", r)
	}
	if r.Placed > 300 {
		t.Fatalf("%s: more members placed than the 300 GPU nodes hold", r)
	}
}
