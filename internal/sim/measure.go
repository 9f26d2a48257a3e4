package sim

import (
	"slices"

	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/sim/trace"
)

// fragRatio is the fragmented GPU capacity over the GPU capacity: free GPU
// milli on partly used GPUs, plus whole free GPUs on nodes with less than
// one free CPU core (no task can use them).
func (r *run) fragRatio() float64 {
	if r.gpuDim < 0 || r.capVec[r.gpuDim] == 0 {
		return 0
	}
	var frag int64
	for _, n := range r.c.Nodes() {
		cpuFree := n.Capacity()[resource.DimCPU] - n.Allocated()[resource.DimCPU]
		for _, d := range n.Devices() {
			if d.Type != string(trace.GPU) || !d.Healthy {
				continue
			}
			switch {
			case d.Used > 0 && d.Used < 1000:
				frag += int64(1000 - d.Used)
			case d.Used == 0 && cpuFree < 1000:
				frag += 1000
			}
		}
	}
	return float64(frag) / float64(r.capVec[r.gpuDim])
}

func (r *run) finish() {
	var endT int64
	var jcts []float64
	var byWidth [2][]float64 // one node, several
	for _, j := range r.jobs {
		if j.done >= 0 {
			endT = max(endT, j.done)
			jcts = append(jcts, float64(j.done-j.arrival)/1e9)
			w := 0
			if len(j.tasks) > 1 {
				w = 1
			}
			byWidth[w] = append(byWidth[w], jcts[len(jcts)-1])
		}
		if j.placed < 0 && j.submitted {
			r.res.Unplaced++
		}
		if n := jobPreemptions(j); n > 0 {
			r.res.PreemptedJobs++
			r.res.MaxPreemptions = max(r.res.MaxPreemptions, n)
		}
		if j.submitted {
			r.res.TierJobs[j.prio]++
			if j.done < 0 {
				r.res.Unfinished++
			}
		}
	}
	r.res.Protocol, r.res.Durations = "replay", "learned"
	if r.cfg.FGD {
		r.res.Protocol = "fgd"
	}
	if r.cfg.KnownDurations {
		r.res.Durations = "known"
	}
	if endT == 0 {
		endT = r.now
	}
	if r.cfg.FGD && r.arrT > 0 {
		// Nothing departs: the run ends with the last arrival (the core's
		// retries after it change nothing).
		endT = r.arrT
		r.integ, r.lastT = r.arrInteg, endT
		keep := r.series[:0]
		for _, x := range r.series {
			if x.T <= float64(endT-r.startT)/1e9 {
				keep = append(keep, x)
			}
		}
		r.series = keep
	}
	r.advance(endT)
	span := float64(endT - r.startT)
	r.res.Makespan = span / 1e9
	r.res.Jobs = r.submitted
	r.res.JCT = stats(jcts)
	r.res.JCTByWidth = jctByWidth(byWidth)
	r.res.JCTCDF = cdf(jcts, 200)
	targets := core.DefaultConfig().Tiers
	for l := 0; l < 4; l++ {
		ds := r.delays[l]
		r.res.QueueDelay[l] = stats(ds)
		r.res.SLO[l] = 1
		if n := r.res.TierJobs[l]; n > 0 {
			ok := 0
			tgt := targets[l].Target.Seconds()
			for _, d := range ds {
				if d <= tgt {
					ok++
				}
			}
			r.res.SLO[l] = float64(ok) / float64(n)
		}
	}
	r.res.Utilization = map[string]float64{}
	for i, d := range r.dimIndex {
		if d >= 0 && r.capVec[d] > 0 && span > 0 {
			r.res.Utilization[seriesTypes[i]] = r.integ[d] / span / float64(r.capVec[d])
		}
	}
	if aspan := float64(r.arrT - r.startT); aspan > 0 {
		r.res.UtilArrivals = map[string]float64{}
		for i, d := range r.dimIndex {
			if d >= 0 && r.capVec[d] > 0 {
				r.res.UtilArrivals[seriesTypes[i]] = r.arrInteg[d] / aspan / float64(r.capVec[d])
			}
		}
	}
	if r.cfg.FGD {
		r.res.GPUAlloc = r.gpuRatio()
		r.res.FragRatio = r.fragRatio()
	} else {
		r.res.GPUAlloc = r.res.Utilization[string(trace.GPU)]
	}
	if len(r.queues) > 1 && span > 0 {
		var sum, sq float64
		for _, x := range r.qInteg {
			x /= span
			sum += x
			sq += x * x
		}
		if sq > 0 {
			r.res.Fairness = sum * sum / (float64(len(r.qInteg)) * sq)
		}
	}
	r.res.Series = downsample(r.series, r.cfg.MaxSamples)
}

// jctByWidth is Result.JCTByWidth from the JCTs of one-node and
// multi-node jobs; nil without multi-node ones.
func jctByWidth(byWidth [2][]float64) map[string]Stats {
	if len(byWidth[1]) == 0 {
		return nil
	}
	return map[string]Stats{"one-node": stats(byWidth[0]), "multi-node": stats(byWidth[1])}
}

func stats(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	at := func(p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	return Stats{N: len(s), Mean: sum / float64(len(s)), P50: at(0.5), P99: at(0.99), Max: s[len(s)-1]}
}

func cdf(xs []float64, points int) []CDFPoint {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	step := max(1, len(s)/points)
	var out []CDFPoint
	for i := 0; i < len(s); i += step {
		out = append(out, CDFPoint{X: s[i], P: float64(i+1) / float64(len(s))})
	}
	if last := out[len(out)-1]; last.P < 1 {
		out = append(out, CDFPoint{X: s[len(s)-1], P: 1})
	}
	return out
}

// downsample keeps at most n samples, on an even grid of simulated time:
// for each grid time, the first sample at or after it.
func downsample(ss []Sample, n int) []Sample {
	if len(ss) <= n || n < 2 {
		return ss
	}
	t0, t1 := ss[0].T, ss[len(ss)-1].T
	out := make([]Sample, 0, n)
	j := 0
	for i := 0; i < n; i++ {
		at := t0 + (t1-t0)*float64(i)/float64(n-1)
		for j < len(ss)-1 && ss[j].T < at {
			j++
		}
		if len(out) == 0 || out[len(out)-1].T != ss[j].T {
			out = append(out, ss[j])
		}
	}
	return out
}

// jobPreemptions is how often j was evicted: its most evicted task's
// count (a gang is evicted whole).
func jobPreemptions(j *job) int {
	n := 0
	for _, t := range j.tasks {
		n = max(n, t.preemptions)
	}
	return n
}
