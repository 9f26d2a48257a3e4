package benchcore

import (
	"testing"
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
