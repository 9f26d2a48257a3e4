package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
)

// timeUnit is a unit durations are shown in.
type timeUnit struct {
	sec    float64 // seconds per unit
	suffix string
}

var (
	unitUS  = timeUnit{1e-6, "µs"}
	unitMS  = timeUnit{1e-3, "ms"}
	unitS   = timeUnit{1, "s"}
	unitMin = timeUnit{60, "m"}
	unitH   = timeUnit{3600, "h"}
	unitD   = timeUnit{86400, "d"}
)

// unitFor picks the unit a duration of sec seconds reads best in: the
// largest in which it is at least 1 once rounded (59.7 s reads "1m", not
// "60s"), days only from two days on.
func unitFor(sec float64) timeUnit {
	a := math.Abs(sec)
	switch {
	case a == 0 || !finite(a):
		return unitS
	case a < 0.9995e-3:
		return unitUS
	case a < 0.9995:
		return unitMS
	case a < 59.5:
		return unitS
	case a < 59.5*60:
		return unitMin
	case a < 47.5*3600:
		return unitH
	default:
		return unitD
	}
}

// num formats v with about two significant digits: 3.4, 12, 850.
func num(v float64) string {
	if !finite(v) {
		return "-"
	}
	if math.Abs(v) < 9.95 {
		s := strconv.FormatFloat(v, 'f', 1, 64)
		s = strings.TrimSuffix(s, ".0")
		if s == "-0" {
			s = "0"
		}
		return s
	}
	return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
}

// spread formats a standard deviation already in its display unit.
func spread(v float64) string {
	switch {
	case !finite(v) || v <= 0:
		return "0"
	case v < 0.01:
		return "<0.01"
	case v < 1:
		return strings.TrimRight(strings.TrimRight(strconv.FormatFloat(v, 'f', 2, 64), "0"), ".")
	default:
		return num(v)
	}
}

// human formats a duration in seconds: 3.4h, 12m, 850ms.
func human(sec float64) string {
	if !finite(sec) {
		return "-"
	}
	if sec == 0 {
		return "0s"
	}
	u := unitFor(sec)
	return num(sec/u.sec) + u.suffix
}

// pct formats a fraction as a percentage with one decimal, more when that
// would round a shortfall up to 100.0%.
func pct(f float64) string {
	if !finite(f) {
		return "-"
	}
	v := f * 100
	for prec := 1; prec <= 3; prec++ {
		s := strconv.FormatFloat(v, 'f', prec, 64)
		if f >= 1 || !strings.HasPrefix(s, "100.") {
			return s + "%"
		}
	}
	return ">99.99%"
}

// si formats a rate with an SI prefix: 950, 12k, 1.2M.
func si(v float64) string {
	if !finite(v) {
		return "-"
	}
	a := math.Abs(v)
	switch {
	case a >= 0.9995e9:
		return num(v/1e9) + "G"
	case a >= 0.9995e6:
		return num(v/1e6) + "M"
	case a >= 0.9995e3:
		return num(v/1e3) + "k"
	}
	return num(v)
}

// cell is one table cell: the mean and, when there are several runs, the
// spread, both formatted; dash when the measure is absent for the row.
type cell struct {
	main, sd string
	v        float64 // the mean, to compare rows
	ok       bool
}

func (c cell) text() string {
	if c.sd == "" {
		return c.main
	}
	return c.main + " ±" + c.sd
}

var dash = cell{main: "-"}

// column is one column of the summary table.
type column struct {
	head string
	// group and label name the measure in the HTML table, where measures
	// are rows.
	group, label string
	// better is +1 when higher is better, -1 when lower is, 0 when neither.
	better int
	get    func(Summary) cell
}

func durCell(m Measure, runs int) cell {
	if m.N == 0 {
		return dash
	}
	c := cell{main: human(m.Mean), v: m.Mean, ok: true}
	if m.N > 1 && runs > 1 {
		c.sd = human(m.SD)
	}
	return c
}

func pctCell(m Measure) cell {
	if m.N == 0 {
		return dash
	}
	c := cell{main: pct(m.Mean), v: m.Mean, ok: true}
	if m.N > 1 {
		c.sd = spread(m.SD * 100)
	}
	return c
}

func ratioCell(m Measure) cell {
	if m.N == 0 {
		return dash
	}
	c := cell{main: strconv.FormatFloat(m.Mean, 'f', 3, 64), v: m.Mean, ok: true}
	if m.N > 1 {
		c.sd = spread(m.SD)
	}
	return c
}

func rateCell(m Measure) cell {
	if m.N == 0 {
		return dash
	}
	c := cell{main: si(m.Mean), v: m.Mean, ok: true}
	if m.N > 1 {
		c.sd = si(m.SD)
	}
	return c
}

func intCell(m Measure) cell {
	if m.N == 0 {
		return dash
	}
	c := cell{main: strconv.FormatFloat(math.Round(m.Mean), 'f', 0, 64), v: m.Mean, ok: true}
	if m.N > 1 && m.SD > 0 {
		c.sd = spread(m.SD)
	}
	return c
}

// tierName names priority tier t.
func tierName(t int) string { return api.TierNames[t] }

// resLabel names a resource type for people.
func resLabel(res string) string {
	switch res {
	case resGPU:
		return "GPU"
	case resTPU:
		return "TPU"
	case resCPU:
		return "CPU"
	case resMem:
		return "memory"
	}
	return res
}

// anyMeasure reports whether any summary has get present and non-zero.
func anyMeasure(ss []Summary, get func(Summary) Measure) bool {
	for _, s := range ss {
		if m := get(s); m.N > 0 && (m.Mean != 0 || m.SD != 0) {
			return true
		}
	}
	return false
}

// columns returns the summary table's columns for ss, leaving out those
// that are absent or all zero across the run set.
func columns(ss []Summary) []column {
	const (
		gRuns  = "Runs"
		gUtil  = "Utilization"
		gJCT   = "Job completion"
		gDelay = "Queue delay p99"
		gSLO   = "SLO attainment"
		gOther = "Other"
	)
	cols := []column{
		{head: "POLICY", get: func(s Summary) cell { return cell{main: s.Policy, ok: true} }},
		{head: "SEEDS", group: gRuns, label: "seeds", get: func(s Summary) cell { return cell{main: strconv.Itoa(len(s.Seeds)), ok: true} }},
		{head: "PLACED/JOBS", group: gRuns, label: "jobs placed / total", get: func(s Summary) cell {
			p, j := intCell(s.Placed), intCell(s.Jobs)
			c := cell{main: p.main + "/" + j.main, sd: p.sd, ok: true}
			if s.Jobs.Mean > 0 {
				c.v = s.Placed.Mean / s.Jobs.Mean
			}
			return c
		}, better: +1},
	}
	add := func(head, group, label string, better int, get func(Summary) Measure, mk func(Summary, Measure) cell) {
		if anyMeasure(ss, get) {
			cols = append(cols, column{head: head, group: group, label: label, better: better,
				get: func(s Summary) cell { return mk(s, get(s)) }})
		}
	}
	pc := func(_ Summary, m Measure) cell { return pctCell(m) }
	dc := func(s Summary, m Measure) cell { return durCell(m, s.Runs) }
	util := func(res string) func(Summary) Measure {
		return func(s Summary) Measure { return s.Utilization[res] }
	}
	// Under the FGD protocol nothing departs and arrivals are 1 ms apart:
	// time averages and makespans mean nothing there.
	timed := !allFGD(ss)
	if timed {
		add("GPU UTIL", gUtil, "GPU (time average)", +1, util(resGPU), pc)
		add("GPU UTIL ARRIVALS", gUtil, "GPU (time average over the arrivals)", +1, func(s Summary) Measure { return s.GPUUtilArrivals }, pc)
		add("TPU UTIL", gUtil, "TPU (time average)", +1, util(resTPU), pc)
		add("CPU UTIL", gUtil, "CPU (time average)", +1, util(resCPU), pc)
	}
	add("GPU ALLOC", gUtil, "GPU allocation ratio", +1, func(s Summary) Measure { return s.GPUAlloc }, pc)
	add("FRAG", gUtil, "GPU fragmentation ratio", -1, func(s Summary) Measure { return s.FragRatio }, pc)
	add("JCT MEAN", gJCT, "JCT mean", -1, func(s Summary) Measure { return s.JCTMean }, dc)
	add("JCT P50", gJCT, "JCT p50", -1, func(s Summary) Measure { return s.JCTP50 }, dc)
	add("JCT P99", gJCT, "JCT p99", -1, func(s Summary) Measure { return s.JCTP99 }, dc)
	if timed {
		add("UNFINISHED", gJCT, "jobs that did not finish (left out of JCT)", -1, func(s Summary) Measure { return s.Unfinished },
			func(_ Summary, m Measure) cell { return intCell(m) })
		add("MAKESPAN", gJCT, "makespan", -1, func(s Summary) Measure { return s.Makespan }, dc)
	}
	tiers := tiersWithJobs(ss)
	for _, t := range tiers {
		cols = append(cols, column{head: "DELAY P99 " + strings.ToUpper(tierName(t)), group: gDelay, label: tierName(t), better: -1,
			get: func(s Summary) cell { return durCell(s.QueueDelayP99[t], s.Runs) }})
	}
	for _, t := range tiers {
		cols = append(cols, column{head: "SLO " + strings.ToUpper(tierName(t)), group: gSLO, label: tierName(t), better: +1,
			get: func(s Summary) cell { return pctCell(s.SLO[t]) }})
	}
	ic := func(_ Summary, m Measure) cell { return intCell(m) }
	add("PREEMPTED JOBS", gOther, "jobs evicted at least once", 0, func(s Summary) Measure { return s.PreemptedJobs }, ic)
	add("PREEMPTIONS", gOther, "evictions", 0, func(s Summary) Measure { return s.Preemptions }, ic)
	add("MAX/JOB", gOther, "the most evictions of one job", 0, func(s Summary) Measure { return s.MaxPreemptions }, ic)
	if multiQueue(ss) {
		cols = append(cols, column{head: "FAIRNESS", group: gOther, label: "Jain's fairness over queues", better: +1,
			get: func(s Summary) cell { return ratioCell(s.Fairness) }})
	}
	add("EVENTS/S", gOther, "simulator events per second", 0, func(s Summary) Measure { return s.EventsPerSec },
		func(_ Summary, m Measure) cell { return rateCell(m) })
	return cols
}

// allFGD is whether every summary is of FGD runs.
func allFGD(ss []Summary) bool {
	for _, s := range ss {
		if s.Protocol != "fgd" {
			return false
		}
	}
	return len(ss) > 0
}

// tiersWithJobs returns the priority tiers in which any run had jobs.
func tiersWithJobs(ss []Summary) []int {
	var ts []int
	for t := range 4 {
		for _, s := range ss {
			if s.TierJobs[t].Mean > 0 || s.QueueDelayP99[t].N > 0 {
				ts = append(ts, t)
				break
			}
		}
	}
	return ts
}

func multiQueue(ss []Summary) bool {
	for _, s := range ss {
		if s.Queues > 1 && s.Fairness.N > 0 {
			return true
		}
	}
	return false
}

// best returns, per column, the row index with the best mean (-1 when the
// column has no direction, fewer than two rows have it, or all tie).
func best(cols []column, ss []Summary) []int {
	out := make([]int, len(cols))
	for i, c := range cols {
		out[i] = -1
		if c.better == 0 || len(ss) < 2 {
			continue
		}
		n, bi, bv, tie := 0, -1, 0.0, true
		for j, s := range ss {
			v := c.get(s)
			if !v.ok {
				continue
			}
			n++
			switch {
			case bi < 0:
				bi, bv = j, v.v
			case v.v != bv:
				tie = false
				if (c.better > 0) == (v.v > bv) {
					bi, bv = j, v.v
				}
			}
		}
		if n >= 2 && !tie {
			out[i] = bi
		}
	}
	return out
}

// errorf prefixes errors of this package.
func errorf(format string, a ...any) error { return fmt.Errorf("report: "+format, a...) }
