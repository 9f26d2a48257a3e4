package core

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestGavelCountsRestartWhenTheTasksChange: a round counts the time each
// task ran on each model since the set of tasks last changed, seeded with
// half a round per task and model (Gavel's _reset_time_run_so_far), so
// that a new allocation's priorities are not skewed by time received
// under an old one.
func TestGavelCountsRestartWhenTheTasksChange(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy = "gavel-rounds"
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := c.policy.Rounds
	half := int64(cfg.GavelRound) / 2
	models := []*gavelModel{{name: "A"}, {name: "B"}}
	t1, t2 := &Task{id: "t1"}, &Task{id: "t2"}
	round := func(cands ...*gavelCand) {
		g.account(cands, models)
		g.last = c.now
		c.now += int64(cfg.GavelRound)
	}
	type counts struct{ T1, T2, Worker map[string]int64 }
	got := func() counts {
		out := counts{Worker: map[string]int64{}}
		for k, v := range g.worker {
			out.Worker[k] = v
		}
		if j := g.jobs[t1]; j != nil {
			out.T1 = j.recv
		}
		if j := g.jobs[t2]; j != nil {
			out.T2 = j.recv
		}
		return out
	}
	c.now = int64(time.Hour)
	t1.started = c.now
	running := &gavelCand{t: t1, model: 0}
	round(running) // t1 is new: the counts start from the seeds
	if d := cmp.Diff(counts{T1: map[string]int64{"A": half, "B": half}, Worker: map[string]int64{"A": half, "B": half}}, got()); d != "" {
		t.Fatalf("first round (-want +got):\n%s", d)
	}
	round(running) // the same tasks: t1's round on A is added
	if d := cmp.Diff(counts{T1: map[string]int64{"A": 3 * half, "B": half}, Worker: map[string]int64{"A": 3 * half, "B": half}}, got()); d != "" {
		t.Fatalf("second round (-want +got):\n%s", d)
	}
	round(running, &gavelCand{t: t2, model: -1}) // t2 arrived: every count restarts
	seeds := map[string]int64{"A": half, "B": half}
	if d := cmp.Diff(counts{T1: seeds, T2: seeds, Worker: map[string]int64{"A": 2 * half, "B": 2 * half}}, got()); d != "" {
		t.Fatalf("after t2 arrived (-want +got):\n%s", d)
	}
}

// TestGavelModelOrder: a round assigns the fastest model first (by the
// candidates' summed normalised throughput); the agnostic baseline, which
// takes every model for equally fast, rotates the order round by round.
func TestGavelModelOrder(t *testing.T) {
	for _, obj := range []string{"fairness", "agnostic"} {
		cfg := DefaultConfig()
		cfg.Policy, cfg.GavelObjective = "gavel-rounds", obj
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		g := c.policy.Rounds
		models := []*gavelModel{{name: "K80"}, {name: "V100"}, {name: "P100"}}
		cands := []*gavelCand{{rate: []float64{0.5, 2, 1}}, {rate: []float64{0.4, 1.5, 1.1}}}
		var ranks [][]int
		for i := 0; i < 3; i++ {
			ranks = append(ranks, g.modelOrder(cands, models))
		}
		want := [][]int{{2, 0, 1}, {2, 0, 1}, {2, 0, 1}} // V100, P100, K80
		if obj == "agnostic" {
			want = [][]int{{2, 0, 1}, {1, 2, 0}, {0, 1, 2}}
		}
		if d := cmp.Diff(want, ranks); d != "" {
			t.Errorf("%s: ranks of K80, V100, P100 over three rounds (-want +got):\n%s", obj, d)
		}
	}
}
