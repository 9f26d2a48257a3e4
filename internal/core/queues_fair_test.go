package core

import (
	"container/heap"
	"fmt"
	"math"
	"math/rand"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Fair-share simulations: a contended pool (16 nodes of 8 GPUs), tenant
// queues without guarantees, each with a deep backlog of 1-GPU tasks of
// one priority (3, the default batched tier, default config), whose run
// times are drawn from a fixed-seed exponential distribution (mean 20 s,
// clamped to 1-60 s). Simulated time moves from event to event: the tasks
// due finish (TaskFinished), the core is ticked, each Placement starts a
// task with a drawn run time, and the backlogs are topped up so that no
// tenant ever runs out of pending work. After a warm-up, each tenant's
// GPU-seconds are integrated over the window, and its allocation is
// sampled after every event.
//
// "Within 5%" means relative to the target: a fraction f of the GPU time
// whose target is F passes when |f - F| <= 0.05 F (for team-a's 1/4 of
// two queues weighted 1 and 3: [0.2375, 0.2625]), and the ratio of the
// two tenants' GPU time, target 3, passes when within [2.85, 3.15].
// Instantaneous allocation, sampled after every event of the window, must
// stay within one task (one GPU) of the weighted split of the pool.

const (
	fsNodes      = 16
	fsGPUs       = 8
	fsWarmup     = 2 * time.Minute
	fsWindow     = 20 * time.Minute
	fsBacklog    = 200 // pending tasks each tenant keeps at least
	fsRefill     = 100
	fsMeanRun    = 20 * time.Second
	fsTolerance  = 0.05
	fsSampleSlop = 1 // GPUs an instantaneous sample may be off the split
)

// fsEnd is a placed task's end.
type fsEnd struct {
	at int64
	id string
}

type fsHeap []fsEnd

func (h fsHeap) Len() int { return len(h) }
func (h fsHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].id < h[j].id
}
func (h fsHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *fsHeap) Push(x any)   { *h = append(*h, x.(fsEnd)) }
func (h *fsHeap) Pop() (x any) { old := *h; x = old[len(old)-1]; *h = old[:len(old)-1]; return }
func (h fsHeap) peek() fsEnd   { return h[0] }
func (h fsHeap) empty() bool   { return len(h) == 0 }
func fsRunTime(r *rand.Rand) time.Duration {
	d := time.Duration(r.ExpFloat64() * float64(fsMeanRun))
	return min(max(d, time.Second), time.Minute)
}

// fsResult is what a simulation measured over its window.
type fsResult struct {
	gpuSec  map[string]float64 // GPU-seconds per tenant
	samples []map[string]int   // GPUs held per tenant, after each event
}

// runFairSim runs the simulation with queues (parents first) and tenants
// (the queues the tasks are submitted to).
func runFairSim(t *testing.T, seed int64, queues []*api.Queue, tenants []string) fsResult {
	t.Helper()
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(seed))
	now := time.Unix(1_000_000, 0)
	start := now
	for i := 0; i < fsNodes; i++ {
		spec := &api.Node{Name: fmt.Sprintf("n%02d", i), Capacity: resource.List{resource.CPU: 64000, resource.Memory: 512 << 30}}
		for d := 0; d < fsGPUs; d++ {
			spec.Devices = append(spec.Devices, api.Device{Type: gpuRes, ID: fmt.Sprint(d), Model: "H100"})
		}
		if err := c.UpsertNode(now, spec); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range queues {
		if err := c.SetQueue(now, q); err != nil {
			t.Fatal(err)
		}
	}
	tenantOf := map[string]string{}
	backlog := map[string]int{}
	held := map[string]int{}
	seq := 0
	refill := func() {
		for _, tn := range tenants {
			for backlog[tn] < fsBacklog {
				for i := 0; i < fsRefill; i++ {
					seq++
					id := fmt.Sprintf("%s-%d", tn, seq)
					prio := 3
					spec := &api.Task{ID: id, Queue: tn, Priority: &prio,
						Resources: resource.List{resource.CPU: 1000, gpuRes: 1000}}
					if err := c.Submit(now, spec); err != nil {
						t.Fatal(err)
					}
					tenantOf[id] = tn
					backlog[tn]++
				}
			}
		}
	}
	var ends fsHeap
	take := func() {
		out := c.TakeOutput()
		if len(out.Preemptions) > 0 {
			t.Fatalf("unexpected preemption %v (no guarantees, one priority)", out.Preemptions[0])
		}
		for _, p := range out.Placements {
			tn := tenantOf[p.Task]
			backlog[tn]--
			held[tn]++
			heap.Push(&ends, fsEnd{at: now.Add(fsRunTime(rng)).UnixNano(), id: p.Task})
		}
	}
	refill()
	take()
	res := fsResult{gpuSec: map[string]float64{}}
	winStart, end := start.Add(fsWarmup), start.Add(fsWarmup+fsWindow)
	for now.Before(end) {
		if ends.empty() {
			t.Fatalf("at +%s nothing runs", now.Sub(start))
		}
		next := time.Unix(0, ends.peek().at)
		if next.After(end) {
			next = end
		}
		// Integrate what is held over [now, next) within the window.
		if from := maxTime(now, winStart); next.After(from) {
			dt := next.Sub(from).Seconds()
			for tn, g := range held {
				res.gpuSec[tn] += float64(g) * dt
			}
		}
		now = next
		for !ends.empty() && ends.peek().at <= now.UnixNano() {
			e := heap.Pop(&ends).(fsEnd)
			if err := c.TaskFinished(now, e.id, Result{}); err != nil {
				t.Fatal(err)
			}
			held[tenantOf[e.id]]--
		}
		c.Tick(now)
		take()
		refill()
		take()
		if !now.Before(winStart) {
			s := map[string]int{}
			for tn, g := range held {
				s[tn] = g
			}
			res.samples = append(res.samples, s)
		}
	}
	if err := checkInvariants(c); err != nil {
		t.Error(err)
	}
	return res
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// within reports whether got is within fsTolerance of want, relatively.
func within(got, want float64) bool { return math.Abs(got-want) <= fsTolerance*want }

// checkFraction checks that part's share of the GPU time of (part + rest)
// is within 5% of want.
func checkFraction(t *testing.T, what string, part, rest, want float64) {
	t.Helper()
	f := part / (part + rest)
	t.Logf("%s: %.4f of the GPU time (target %.4f, pass band [%.4f, %.4f])", what, f, want, want*(1-fsTolerance), want*(1+fsTolerance))
	if !within(f, want) {
		t.Errorf("%s: %.4f of the GPU time, want %.4f ± 5%%", what, f, want)
	}
}

// checkRatio checks that num/den is within 5% of want.
func checkRatio(t *testing.T, what string, num, den, want float64) {
	t.Helper()
	r := num / den
	t.Logf("%s: ratio %.4f (target %.2f, pass band [%.4f, %.4f])", what, r, want, want*(1-fsTolerance), want*(1+fsTolerance))
	if !within(r, want) {
		t.Errorf("%s: ratio %.4f, want %.2f ± 5%%", what, r, want)
	}
}

// checkSamples checks every sample: sum(held of part) is within
// fsSampleSlop GPUs of want.
func checkSamples(t *testing.T, what string, samples []map[string]int, part []string, want float64) {
	t.Helper()
	if len(samples) < 1000 {
		t.Fatalf("%s: only %d samples", what, len(samples))
	}
	worst, bad := 0.0, 0
	for _, s := range samples {
		g := 0
		for _, tn := range part {
			g += s[tn]
		}
		if d := math.Abs(float64(g) - want); d > fsSampleSlop {
			bad++
			worst = max(worst, d)
		}
	}
	t.Logf("%s: %d samples, target %.1f GPUs, %d off by more than %d (worst %.0f)", what, len(samples), want, bad, fsSampleSlop, worst)
	if bad > 0 {
		t.Errorf("%s: %d of %d samples more than %d GPU off %.1f (worst %.0f)", what, bad, len(samples), fsSampleSlop, want, worst)
	}
}

// TestFairShareConvergesToWeights: team-a (weight 1) and team-b (weight
// 3), no guarantees, both always backlogged: team-a gets 1/4 of the GPU
// time, team-b 3/4, and at every event 32 and 96 of the 128 GPUs (± 1).
func TestFairShareConvergesToWeights(t *testing.T) {
	res := runFairSim(t, 1, []*api.Queue{
		{Name: "team-a", Weight: 1},
		{Name: "team-b", Weight: 3},
	}, []string{"team-a", "team-b"})
	a, b := res.gpuSec["team-a"], res.gpuSec["team-b"]
	checkFraction(t, "team-a", a, b, 0.25)
	checkRatio(t, "team-b/team-a", b, a, 3)
	pool := float64(fsNodes * fsGPUs)
	checkSamples(t, "team-a held", res.samples, []string{"team-a"}, pool/4)
	checkSamples(t, "team-b held", res.samples, []string{"team-b"}, pool*3/4)
}

// TestFairShareHierarchical: root → org-1 (weight 1) → sub-a (weight 1),
// sub-b (weight 3); root → org-2 (weight 1), tasks in org-2 itself. The
// orgs split the pool 1:1, and org-1's half goes 1:3 to sub-a and sub-b:
// 16, 48 and 64 of the 128 GPUs.
func TestFairShareHierarchical(t *testing.T) {
	res := runFairSim(t, 2, []*api.Queue{
		{Name: "org-1", Weight: 1},
		{Name: "sub-a", Parent: "org-1", Weight: 1},
		{Name: "sub-b", Parent: "org-1", Weight: 3},
		{Name: "org-2", Weight: 1},
	}, []string{"sub-a", "sub-b", "org-2"})
	sa, sb, o2 := res.gpuSec["sub-a"], res.gpuSec["sub-b"], res.gpuSec["org-2"]
	checkFraction(t, "org-1 (sub-a + sub-b) of the pool", sa+sb, o2, 0.5)
	checkRatio(t, "org-2/org-1", o2, sa+sb, 1)
	checkFraction(t, "sub-a of org-1", sa, sb, 0.25)
	checkRatio(t, "sub-b/sub-a", sb, sa, 3)
	pool := float64(fsNodes * fsGPUs)
	checkSamples(t, "org-1 held", res.samples, []string{"sub-a", "sub-b"}, pool/2)
	checkSamples(t, "org-2 held", res.samples, []string{"org-2"}, pool/2)
	checkSamples(t, "sub-a held", res.samples, []string{"sub-a"}, pool/8)
	checkSamples(t, "sub-b held", res.samples, []string{"sub-b"}, pool*3/8)
}
