package engine

import (
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/metrics"
	"github.com/hetsched/hetsched/internal/resource"
)

// gauges are the engine's metrics (loop-owned): the decision counters
// each step adds to (count) and the gauges refreshed at most once a second
// (gauge), since summing capacity walks every node.
type gauges struct {
	m *metrics.Metrics // nil: no metrics
	// series tracks the labelled gauges set per refresh.
	series gaugeSeries
	last   time.Time // when the gauges were last refreshed
	due    bool      // a refresh was skipped (at most one a second): one is due
	// attempts are this step's attempts, observed once its decisions are
	// committed (attempted).
	attempts []attempt
	// seen is the core's counters as last exported (coreEvents).
	seen core.Stats
}

// attempt is one scheduling attempt of a step: its tier, result and the
// core's part of its latency (Placement.AttemptWait).
type attempt struct {
	tier   uint8
	placed bool
	wait   time.Duration
}

// preemptionStop observes how long a preempted attempt's command took to
// exit after its stop signal.
func (g *gauges) preemptionStop(st agentapi.StopReport) {
	if g.m == nil {
		return
	}
	g.m.PreemptionStop.WithLabelValues(strconv.FormatBool(st.Forced)).Observe(st.Seconds)
}

// preemptionRestart observes the time from an eviction to the evicted
// task's next attempt running.
func (g *gauges) preemptionRestart(d time.Duration) {
	if g.m == nil {
		return
	}
	g.m.PreemptionRestart.Observe(d.Seconds())
}

// count updates the decision counters.
func (g *gauges) count(out *core.Output) {
	m := g.m
	if m == nil {
		return
	}
	for _, p := range out.Placements {
		tier := api.TierNames[p.Priority]
		m.Placements.WithLabelValues(tier).Inc()
		m.SchedulingDelay.WithLabelValues(tier).Observe(p.Delay.Seconds())
		g.attempts = append(g.attempts, attempt{uint8(p.Priority), true, p.AttemptWait})
	}
	for _, u := range out.Unfit {
		g.attempts = append(g.attempts, attempt{uint8(u.Priority), false, u.Wait})
	}
	for _, p := range out.Preemptions {
		m.Preemptions.WithLabelValues(string(p.Reason)).Inc()
	}
	for _, tr := range out.Transitions {
		m.Transitions.WithLabelValues(tr.To.String()).Inc()
	}
}

// coreEvents adds to hetsched_scheduler_events_total what the core's
// counters gained since the last call (an engine has one core, and its
// counters only grow).
func (g *gauges) coreEvents(st core.Stats) {
	if g.m == nil {
		return
	}
	add := func(event string, cur, last uint64) {
		if cur > last {
			g.m.CoreEvents.WithLabelValues(event).Add(float64(cur - last))
		}
	}
	add("starved", st.Starved, g.seen.Starved)
	add("las_promoted", st.Promoted, g.seen.Promoted)
	add("gang_reserved", st.GangReserved, g.seen.GangReserved)
	g.seen = st
}

// attempted observes the step's attempts, whose decisions took took from
// the step's input to their commit.
func (g *gauges) attempted(took time.Duration) {
	if g.m == nil || len(g.attempts) == 0 {
		return
	}
	var obs [4][2]prometheus.Observer
	var dec [4]prometheus.Observer
	for _, a := range g.attempts {
		r := 1 // metrics.AttemptResults: scheduled, unschedulable
		if a.placed {
			r = 0
		}
		o := obs[a.tier][r]
		if o == nil {
			o = g.m.SchedulingAttempt.WithLabelValues(api.TierNames[a.tier], metrics.AttemptResults[r])
			obs[a.tier][r] = o
		}
		o.Observe((a.wait + took).Seconds())
		if a.placed {
			if dec[a.tier] == nil {
				dec[a.tier] = g.m.SchedulingDecision.WithLabelValues(api.TierNames[a.tier])
			}
			dec[a.tier].Observe(a.wait.Seconds())
		}
	}
	g.attempts = g.attempts[:0]
}

// next is when the loop must wake for a refresh that is due.
func (g *gauges) next() (time.Time, bool) { return g.last.Add(time.Second), g.due }

// gauge refreshes the gauges, at most once a second.
func (e *Engine) gauge(now time.Time) {
	g := &e.gauges
	if g.m == nil {
		return
	}
	if now.Sub(g.last) < time.Second {
		g.due = true // the loop wakes for it: an idle engine's gauges are not left stale
		return
	}
	g.last, g.due = now, false // the disk's gauges: gaugeDiskLoop
	g.cluster(e.c)
	g.queues(e.c, e.queues, e.waitingByReason(), e.waiting.byTier)
	g.series.sweep()
	g.m.Tasks.Set(float64(len(e.tasks))) // the loop writes tasks: it reads them without the lock
}

// cluster sets the pending, capacity, allocation, node and device gauges.
func (g *gauges) cluster(c *core.Core) {
	m := g.m
	for l, n := range c.Pending() {
		m.Pending.WithLabelValues(api.TierNames[l]).Set(float64(n))
	}
	dims := c.Dims()
	var capSum, allocSum [resource.MaxDims]int64
	states := map[string]int{api.NodeReady: 0, api.NodeNotReady: 0, api.NodeCordoned: 0, api.NodeDraining: 0}
	type typeModel struct{ typ, model string }
	devCap, devAlloc := map[typeModel]int64{}, map[typeModel]int64{}
	for _, n := range c.Nodes() {
		nc, na := n.Capacity(), n.Allocated()
		for i := 0; i < dims.Len(); i++ {
			capSum[i] += nc[i]
			allocSum[i] += na[i]
		}
		states[n.State()]++
		for _, d := range n.Devices() {
			k := typeModel{d.Type, d.Model}
			if d.Healthy {
				devCap[k] += 1000 // milli-devices until exported
			}
			devAlloc[k] += int64(d.Used)
		}
	}
	for i := 0; i < dims.Len(); i++ {
		name := string(dims.Name(i))
		m.Capacity.WithLabelValues(name).Set(baseUnits(dims.Name(i), capSum[i]))
		m.Allocated.WithLabelValues(name).Set(baseUnits(dims.Name(i), allocSum[i]))
	}
	for s, n := range states {
		m.Nodes.WithLabelValues(s).Set(float64(n))
	}
	for k, v := range devCap {
		m.DeviceCapacity.WithLabelValues(k.typ, k.model).Set(float64(v) / 1000)
	}
	for k, v := range devAlloc {
		m.DeviceAllocated.WithLabelValues(k.typ, k.model).Set(float64(v) / 1000)
	}
}

// queues sets the per-queue gauges (labelled series: swept after).
func (g *gauges) queues(c *core.Core, queues map[string]*api.Queue, byReason map[string]map[string]int, byTier map[queueTier]int) {
	m := g.m
	if len(queues) > 0 {
		for name, fs := range c.FairShares() {
			for r, v := range fs {
				g.series.set(m.QueueFairShare, baseUnits(r, v), name, string(r))
			}
		}
	}
	for name, q := range queues {
		if u, ok := c.QueueUsage(name); ok {
			for r, v := range u {
				g.series.set(m.QueueUsage, baseUnits(r, v), name, string(r))
			}
		}
		for r, v := range q.Max {
			g.series.set(m.QueueMax, baseUnits(r, v), name, string(r))
		}
		for r, v := range q.Guaranteed {
			g.series.set(m.QueueGuaranteed, baseUnits(r, v), name, string(r))
		}
	}
	for q, cats := range byReason {
		for cat, n := range cats {
			g.series.set(m.PendingReason, float64(n), q, cat)
		}
	}
	for k, n := range byTier {
		g.series.set(m.PendingQueue, float64(n), k.queue, api.TierNames[k.tier])
	}
}

// waitCounts counts the published pending and blocked tasks per queue and
// native tier, and the blocked per queue (the core reports the pending
// ones: core.Waiting), kept up to date as records are published, for the
// gauges and the queue views. Loop-owned.
type waitCounts struct {
	byTier  map[queueTier]int
	blocked map[string]int
}

type queueTier struct {
	queue string
	tier  int
}

func newWaitCounts() waitCounts {
	return waitCounts{byTier: map[queueTier]int{}, blocked: map[string]int{}}
}

// add adjusts the counts for a record entering (+1) or leaving (-1) the
// published set.
func (w *waitCounts) add(r *TaskRecord, delta int) {
	if r == nil || (r.State != "pending" && r.State != "blocked") {
		return
	}
	q := queueName(r)
	k := queueTier{q, r.Spec.PriorityOrDefault()}
	if w.byTier[k] += delta; w.byTier[k] == 0 {
		delete(w.byTier, k)
	}
	if r.State == "blocked" {
		if w.blocked[q] += delta; w.blocked[q] == 0 {
			delete(w.blocked, q)
		}
	}
}

// gaugeSeries rewrites labelled gauges whose set of series changes (per
// queue, per reason) without a gap: a Reset before setting them again let a
// scrape that ran meanwhile see none of a vector's series. Series set in
// the previous round and not in this one are deleted by sweep. Only the
// engine loop uses it.
type gaugeSeries struct {
	prev, cur map[*prometheus.GaugeVec]map[string][]string
}

// set sets one series and notes it for this round.
func (g *gaugeSeries) set(v *prometheus.GaugeVec, val float64, labels ...string) {
	v.WithLabelValues(labels...).Set(val)
	if g.cur == nil {
		g.cur = map[*prometheus.GaugeVec]map[string][]string{}
	}
	m := g.cur[v]
	if m == nil {
		m = map[string][]string{}
		g.cur[v] = m
	}
	m[strings.Join(labels, "\xff")] = labels
}

// sweep ends a round: series of the previous round not set in this one go.
func (g *gaugeSeries) sweep() {
	for v, keys := range g.prev {
		for k, labels := range keys {
			if _, ok := g.cur[v][k]; !ok {
				v.DeleteLabelValues(labels...)
			}
		}
	}
	g.prev, g.cur = g.cur, nil
}
