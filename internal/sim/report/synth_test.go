package report

import (
	"math"
	"math/rand/v2"
	"sort"

	"github.com/hetsched/hetsched/internal/sim"
)

// synthOpts shapes a synthetic run.
type synthOpts struct {
	samples    int     // series length
	departures bool    // jobs end: JCT, makespan, a draining tail
	tpus       bool    // a google.com/tpu resource
	queues     int     // > 1: fairness
	tiers      []int   // tiers with jobs
	skill      float64 // 0..1: how well the policy packs
}

// synth builds a plausible Result without running the simulator.
func synth(policy string, seed int64, o synthOpts) sim.Result {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(len(policy))*7919))
	jobs := 8000 + int(seed)*17
	r := sim.Result{
		Policy: policy, Seed: seed, Cluster: "openb-1523", Workload: "openb-pod-list-default",
		Nodes: 1523, GPUs: 6212, Jobs: jobs, Queues: max(o.queues, 1),
		Utilization: map[string]float64{},
	}
	if o.tpus {
		r.TPUs = 512
	}
	horizon := 36 * 3600.0
	ceil := 0.80 + 0.17*o.skill
	n := max(o.samples, 1)
	var sumG, sumC, sumT float64
	for i := range n {
		t := horizon * float64(i) / float64(max(n-1, 1))
		f := float64(i) / float64(max(n-1, 1))
		arrived := 1.3 * f
		if o.departures {
			arrived = math.Min(1.3, 1.3*f/0.7)
		}
		g := math.Min(arrived, ceil) * (1 - 0.03*math.Abs(math.Sin(float64(i)/40))) * (0.98 + 0.02*rng.Float64())
		if o.departures && f > 0.7 {
			g *= math.Max(0, 1-(f-0.7)/0.3)
		}
		s := sim.Sample{T: t, Arrived: arrived, Alloc: map[string]float64{
			"nvidia.com/gpu": g,
			"cpu":            0.6 * g * (0.9 + 0.1*rng.Float64()),
			"memory":         0.5 * g,
		}, Pending: int(1000 * math.Max(0, arrived-g)), Running: int(4000 * g)}
		if o.tpus {
			s.Alloc["google.com/tpu"] = 0.5 * g * (1 + 0.2*math.Sin(float64(i)/25))
			sumT += s.Alloc["google.com/tpu"]
		}
		sumG += g
		sumC += s.Alloc["cpu"]
		r.Series = append(r.Series, s)
	}
	r.Utilization["nvidia.com/gpu"] = sumG / float64(n)
	r.Utilization["cpu"] = sumC / float64(n)
	r.Utilization["memory"] = 0.5 * sumG / float64(n)
	if o.tpus {
		r.Utilization["google.com/tpu"] = sumT / float64(n)
	}
	for _, lvl := range []float64{0.5, 0.7, 0.9, 1.0, 1.1, 1.2, 1.3} {
		a := math.Min(lvl, ceil) * (0.99 + 0.01*rng.Float64())
		r.AllocAt = append(r.AllocAt, sim.AllocPoint{Arrived: lvl, Alloc: a, FragRatio: (1 - o.skill) * 0.08 * lvl})
	}
	last := r.AllocAt[len(r.AllocAt)-1]
	r.GPUAlloc, r.FragRatio = last.Alloc, last.FragRatio
	r.Placed = int(float64(jobs) * math.Min(1, ceil/1.3+0.2))
	r.Unplaced = jobs - r.Placed
	if o.departures {
		r.Completed = r.Placed
		r.Makespan = horizon * (1.05 - 0.1*o.skill)
		var xs []float64
		for range 2000 {
			xs = append(xs, math.Exp(rng.NormFloat64()*1.6+7.5-0.4*o.skill)) // ~30 min median
		}
		sort.Float64s(xs)
		var sum float64
		for i, x := range xs {
			sum += x
			r.JCTCDF = append(r.JCTCDF, sim.CDFPoint{X: x, P: float64(i+1) / float64(len(xs))})
		}
		r.JCT = sim.Stats{N: len(xs), Mean: sum / float64(len(xs)), P50: xs[len(xs)/2], P99: xs[len(xs)*99/100], Max: xs[len(xs)-1]}
	}
	for t := range 4 {
		r.SLO[t] = 1
	}
	scale := [4]float64{0.0004, 0.0009, 0.004, 0.9}
	for _, t := range o.tiers {
		p99 := scale[t] * (1.6 - o.skill) * (0.9 + 0.2*rng.Float64())
		r.QueueDelay[t] = sim.Stats{N: r.Placed / len(o.tiers), Mean: p99 / 4, P50: p99 / 6, P99: p99, Max: p99 * 3}
		r.SLO[t] = math.Min(1, 0.9+0.1*o.skill+0.01*rng.Float64())
	}
	if r.Queues > 1 {
		r.Fairness = 0.8 + 0.19*o.skill
	}
	r.Events = jobs * 3
	r.WallSeconds = 0.4 + 0.1*rng.Float64()
	r.EventsPerSec = float64(r.Events) / r.WallSeconds
	return r
}

// richRuns is a full run set: three policies, three seeds, departures,
// TPUs, queues, every tier.
func richRuns(samples int) []sim.Result {
	var rs []sim.Result
	for i, p := range []string{"fgd", "best-fit", "load-predict"} {
		for seed := int64(1); seed <= 3; seed++ {
			rs = append(rs, synth(p, seed, synthOpts{samples: samples, departures: true, tpus: true, queues: 3,
				tiers: []int{0, 1, 2, 3}, skill: 1 - 0.35*float64(i)}))
		}
	}
	return rs
}

// fgdRuns is the FGD protocol: no departures, one queue, one tier, one seed.
func fgdRuns() []sim.Result {
	var rs []sim.Result
	for i, p := range []string{"fgd", "best-fit"} {
		rs = append(rs, synth(p, 42, synthOpts{samples: 200, tiers: []int{2}, skill: 1 - 0.4*float64(i)}))
	}
	return rs
}
