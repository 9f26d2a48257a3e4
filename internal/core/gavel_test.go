package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
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
	g := c.policy.Rounds.(*GavelRounds)
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
		g := c.policy.Rounds.(*GavelRounds)
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

// TestGavelNeverIdlesBesideWaitingWork (issue 43 §1b): past gavelMaxJobs
// tasks, a round still considers waiting work (it takes up to half the
// program), and the waiting tasks it leaves out are placed as by any
// policy: no GPU idles while a task that fits it waits. Before, once 256
// tasks ran, no waiting task was ever considered, and the gate held them
// all.
func TestGavelNeverIdlesBesideWaitingWork(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy = "gavel-rounds"
	c := unbatched(t, cfg)
	now := time.Unix(1_000_000, 0)
	for i := range 40 { // 320 GPUs
		n := api.Node{Name: fmt.Sprintf("n%d", i), Capacity: resource.List{resource.CPU: 64000, resource.Memory: 512 << 30}}
		for d := range 8 {
			n.Devices = append(n.Devices, api.Device{Type: "nvidia.com/gpu", ID: fmt.Sprint(d), Model: "A100"})
		}
		if err := c.UpsertNode(now, &n); err != nil {
			t.Fatal(err)
		}
	}
	prio := 2
	submit := func(prefix string, n int) {
		for i := range n {
			spec := api.Task{ID: fmt.Sprintf("%s%d", prefix, i), Priority: &prio, Duration: api.Duration(time.Hour),
				Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 1000}}
			if err := c.Submit(now, &spec); err != nil {
				t.Fatal(err)
			}
		}
	}
	placedNow := func() int {
		n := 0
		for _, tk := range c.tasks {
			if tk.state == Scheduled || tk.state == Running {
				n++
			}
		}
		return n
	}
	round := func() {
		wake, ok := c.NextWakeup()
		if !ok {
			t.Fatal("no round due")
		}
		now = wake
		c.Tick(now)
	}
	// 300 tasks at once: the round's program takes 256, the 44 left out
	// are placed by the pass that follows.
	submit("a", 300)
	round()
	if got := placedNow(); got != 300 {
		t.Fatalf("after the first round %d of 300 tasks run on 320 GPUs", got)
	}
	// 300 run; 10 more arrive: they wait for the round (as in Gavel),
	// which considers them though more than 256 tasks run.
	submit("b", 10)
	for placedNow() < 310 {
		before := now
		round()
		if now.Sub(before) > cfg.GavelRound {
			t.Fatalf("%d of 310 tasks run after a round, with %d GPUs", placedNow(), 320)
		}
	}
}
