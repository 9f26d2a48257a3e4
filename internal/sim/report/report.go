// Package report renders simulation results (sim.Result) for people and
// programs: a terminal table (Table), a JSON document (JSON) and one
// self-contained HTML page with inline SVG plots (HTML). All three share
// Aggregate, which folds a policy's runs (one per seed) into a Summary of
// means and standard deviations.
package report

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/hetsched/hetsched/internal/sim"
)

// Resource types the report names.
const (
	resGPU = "nvidia.com/gpu"
	resTPU = "google.com/tpu"
	resCPU = "cpu"
	resMem = "memory"
)

// Measure is a measure's mean over a policy's runs and, when more than one
// run had it, the runs' sample standard deviation. N counts the runs that
// had it (a JCT needs completed jobs, a tier's delay jobs in that tier);
// N == 0 means none did and Mean is 0.
type Measure struct {
	Mean float64 `json:"mean"`
	SD   float64 `json:"sd"`
	N    int     `json:"n"`
}

// Summary is one policy's runs folded together.
type Summary struct {
	Policy string `json:"policy"`
	// Runs is the number of results; Seeds their distinct seeds, ascending.
	Runs  int     `json:"runs"`
	Seeds []int64 `json:"seeds"`

	Jobs      Measure `json:"jobs"`
	Placed    Measure `json:"placed"`
	Completed Measure `json:"completed"`
	Unplaced  Measure `json:"unplaced"`
	// Unfinished jobs were submitted and did not complete: JCT leaves
	// them out.
	Unfinished Measure `json:"unfinished"`
	// Preemptions are evictions per run; PreemptedJobs the jobs evicted
	// at least once; MaxPreemptions the most one job was.
	Preemptions    Measure `json:"preemptions"`
	PreemptedJobs  Measure `json:"preemptedJobs"`
	MaxPreemptions Measure `json:"maxPreemptions"`
	// Protocol is fgd when every run followed the FGD protocol (no
	// departures: time-based measures mean nothing), else replay;
	// Durations is known, learned, or mixed over the runs.
	Protocol  string `json:"protocol"`
	Durations string `json:"durations"`

	// Utilization is the time-averaged allocated fraction per resource
	// type, over the runs that report the type.
	Utilization map[string]Measure `json:"utilization"`
	// GPUUtilArrivals is the GPU utilization over the arrival period.
	GPUUtilArrivals Measure `json:"gpuUtilArrivals"`
	GPUAlloc        Measure `json:"gpuAlloc"`
	FragRatio       Measure `json:"fragRatio"`

	// JCT measures (s) are over the runs that completed jobs.
	JCTMean  Measure `json:"jctMean"`
	JCTP50   Measure `json:"jctP50"`
	JCTP99   Measure `json:"jctP99"`
	Makespan Measure `json:"makespan"`

	// TierJobs is the number of submitted jobs per priority tier; SLO is
	// over the runs with jobs in the tier (a job never placed misses it),
	// QueueDelayP99 (s) over the runs with placed jobs in the tier.
	TierJobs      [4]Measure `json:"tierJobs"`
	QueueDelayP99 [4]Measure `json:"queueDelayP99"`
	SLO           [4]Measure `json:"slo"`

	// Fairness is over the runs with more than one queue; Queues is the
	// most queues any run had.
	Fairness Measure `json:"fairness"`
	Queues   int     `json:"queues"`

	EventsPerSec Measure `json:"eventsPerSec"`
}

// acc accumulates one measure's values.
type acc []float64

func (a *acc) add(v float64) {
	if finite(v) {
		*a = append(*a, v)
	}
}

func (a acc) measure() Measure {
	n := len(a)
	if n == 0 {
		return Measure{}
	}
	var sum float64
	for _, v := range a {
		sum += v
	}
	m := Measure{Mean: sum / float64(n), N: n}
	if n > 1 {
		var ss float64
		for _, v := range a {
			d := v - m.Mean
			ss += d * d
		}
		m.SD = math.Sqrt(ss / float64(n-1))
	}
	if !finite(m.Mean) { // sums of huge values
		m.Mean = 0
	}
	if !finite(m.SD) {
		m.SD = 0
	}
	return m
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// policies returns the policies of rs in order of first appearance, each
// with its runs in seed order.
func policies(rs []sim.Result) (names []string, runs map[string][]*sim.Result) {
	runs = map[string][]*sim.Result{}
	for i := range rs {
		p := rs[i].Policy
		if _, ok := runs[p]; !ok {
			names = append(names, p)
		}
		runs[p] = append(runs[p], &rs[i])
	}
	for _, p := range names {
		sort.SliceStable(runs[p], func(i, j int) bool { return runs[p][i].Seed < runs[p][j].Seed })
	}
	return names, runs
}

// Aggregate folds rs into one Summary per policy, in the order the
// policies first appear in rs. Non-finite values are left out of the
// means, so a Summary never holds NaN or Inf.
func Aggregate(rs []sim.Result) []Summary {
	names, runs := policies(rs)
	out := make([]Summary, 0, len(names))
	for _, p := range names {
		out = append(out, summarize(p, runs[p]))
	}
	return out
}

func summarize(policy string, runs []*sim.Result) Summary {
	s := Summary{Policy: policy, Runs: len(runs), Utilization: map[string]Measure{}}
	var preemptions, preemptedJobs, maxPreemptions acc
	var jobs, placed, completed, unplaced, unfinished, gpuAlloc, frag, jm, j50, j99, mk, fair, eps, gua acc
	var tierJobs, qd, slo [4]acc
	util := map[string]*acc{}
	for _, r := range runs {
		if !slices.Contains(s.Seeds, r.Seed) {
			s.Seeds = append(s.Seeds, r.Seed)
		}
		jobs.add(float64(r.Jobs))
		placed.add(float64(r.Placed))
		completed.add(float64(r.Completed))
		unplaced.add(float64(r.Unplaced))
		unfinished.add(float64(r.Unfinished))
		preemptions.add(float64(r.Preemptions))
		preemptedJobs.add(float64(r.PreemptedJobs))
		maxPreemptions.add(float64(r.MaxPreemptions))
		s.Protocol = mergeLabel(s.Protocol, orDefault(r.Protocol, "replay"), "replay")
		s.Durations = mergeLabel(s.Durations, orDefault(r.Durations, "learned"), "mixed")
		for k, v := range r.Utilization {
			if util[k] == nil {
				util[k] = &acc{}
			}
			util[k].add(v)
		}
		gpuAlloc.add(r.GPUAlloc)
		frag.add(r.FragRatio)
		if v, ok := r.UtilArrivals[resGPU]; ok {
			gua.add(v)
		}
		if r.JCT.N > 0 {
			jm.add(r.JCT.Mean)
			j50.add(r.JCT.P50)
			j99.add(r.JCT.P99)
		}
		mk.add(r.Makespan)
		submitted := r.TierJobs
		if submitted == [4]int{} { // a result written before TierJobs: its placed jobs
			for t := range 4 {
				submitted[t] = r.QueueDelay[t].N
			}
		}
		for t := range 4 {
			tierJobs[t].add(float64(submitted[t]))
			if r.QueueDelay[t].N > 0 {
				qd[t].add(r.QueueDelay[t].P99)
			}
			if submitted[t] > 0 {
				slo[t].add(r.SLO[t])
			}
		}
		if r.Queues > 1 {
			fair.add(r.Fairness)
		}
		s.Queues = max(s.Queues, r.Queues)
		eps.add(r.EventsPerSec)
	}
	slices.Sort(s.Seeds)
	s.Jobs, s.Placed, s.Completed, s.Unplaced = jobs.measure(), placed.measure(), completed.measure(), unplaced.measure()
	s.Unfinished = unfinished.measure()
	s.Preemptions, s.PreemptedJobs, s.MaxPreemptions = preemptions.measure(), preemptedJobs.measure(), maxPreemptions.measure()
	for k, a := range util {
		s.Utilization[k] = a.measure()
	}
	s.GPUAlloc, s.FragRatio = gpuAlloc.measure(), frag.measure()
	s.GPUUtilArrivals = gua.measure()
	s.JCTMean, s.JCTP50, s.JCTP99, s.Makespan = jm.measure(), j50.measure(), j99.measure(), mk.measure()
	for t := range 4 {
		s.TierJobs[t], s.QueueDelayP99[t], s.SLO[t] = tierJobs[t].measure(), qd[t].measure(), slo[t].measure()
	}
	s.Fairness, s.EventsPerSec = fair.measure(), eps.measure()
	return s
}

// mergeLabel folds one run's label into the summary's: the first run's,
// kept while the runs agree, else mixed.
func mergeLabel(have, next, mixed string) string {
	if have == "" || have == next {
		return next
	}
	return mixed
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// Warnings are what a reader of rs must know before trusting its means:
// runs whose JCT leaves out jobs that never finished, and runs that
// placed under nine in ten of their jobs. One line per policy.
func Warnings(rs []sim.Result) []string {
	var out []string
	for _, s := range Aggregate(rs) {
		if s.Protocol == "fgd" || s.Jobs.Mean == 0 {
			continue // nothing departs under fgd: unfinished is the protocol
		}
		if s.Unfinished.Mean > 0 {
			out = append(out, fmt.Sprintf("%s: %.0f of %.0f jobs (mean over %d runs) did not finish: JCT is over the %.0f that did, and the unfinished are left out",
				s.Policy, s.Unfinished.Mean, s.Jobs.Mean, s.Runs, s.Jobs.Mean-s.Unfinished.Mean))
		}
		if s.Placed.Mean < 0.9*s.Jobs.Mean {
			out = append(out, fmt.Sprintf("%s: only %.0f of %.0f jobs were ever placed (%.0f%%)", s.Policy, s.Placed.Mean, s.Jobs.Mean, 100*s.Placed.Mean/s.Jobs.Mean))
		}
	}
	return out
}
