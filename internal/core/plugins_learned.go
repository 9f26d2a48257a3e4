package core

import (
	"strconv"
)

// nodeLoad returns the node's measured load forecast and whether any sample
// exists; without samples the caller decides the fallback.
func nodeLoad(n *Node) (float64, bool) {
	if n.load.forecast.n == 0 {
		return 0, false
	}
	return clamp01(n.load.forecast.forecast() + n.load.reserved), true
}

// share is the fraction of n's primary resource the option takes.
func share(o *Option, n *Node) float64 {
	if n.group == nil {
		return 0
	}
	p := n.group.primary
	if n.capacity[p] == 0 {
		return 0
	}
	return float64(o.req[p]) / float64(n.capacity[p])
}

// Feedback scores nodes by weights learned from observed utilization and
// task latency (weighted dynamic feedback).
type Feedback struct{ c *Core }

// Name implements Plugin.
func (*Feedback) Name() string { return "Feedback" }

// Score implements ScorePlugin.
func (*Feedback) Score(_ *CycleState, _ *Task, _ *Option, n *Node) (int64, *Status) {
	util := 0.0
	if n.load.util.n > 0 {
		util = n.load.util.v
	}
	lat := 1.0
	if n.load.latency.n > 0 {
		lat = n.load.latency.v
	}
	return int64(100 * (1 - clamp01(util)) * lat), nil
}

// LoadTarget forecasts each node's load from its samples (Holt) and packs
// towards Config.LoadTarget without overshoot: it filters nodes whose
// forecast plus the task's share would pass the target, and scores closer to
// the target higher. Without samples the node's allocated fraction stands in
// for the forecast in the score, and nothing is filtered.
type LoadTarget struct{ c *Core }

// Name implements Plugin.
func (*LoadTarget) Name() string { return "LoadTarget" }

// Filter implements FilterPlugin.
func (p *LoadTarget) Filter(_ *CycleState, _ *Task, o *Option, n *Node) *Status {
	l, ok := nodeLoad(n)
	if !ok {
		return nil
	}
	sh := share(o, n)
	if l+sh > p.c.cfg.LoadTarget+1e-9 && !(sh > p.c.cfg.LoadTarget && len(n.tasks) == 0) {
		// A task whose share alone is above the target may still take a
		// node with no tasks: it would fit nowhere ever otherwise.
		return NewUnschedulable("predicted load above target " + strconv.FormatFloat(p.c.cfg.LoadTarget, 'f', 2, 64))
	}
	return nil
}

// Score implements ScorePlugin.
func (p *LoadTarget) Score(_ *CycleState, _ *Task, o *Option, n *Node) (int64, *Status) {
	l, ok := nodeLoad(n)
	if !ok && n.group != nil {
		l = n.allocFraction(n.group.primary)
	}
	after := l + share(o, n)
	if after > p.c.cfg.LoadTarget {
		return 0, nil
	}
	return int64(100 * after / p.c.cfg.LoadTarget), nil
}

// Reserve implements ReservePlugin: the placed share counts as load until
// the next sample measures it.
func (p *LoadTarget) Reserve(_ *CycleState, _ *Task, o *Option, n *Node) {
	n.load.reserved += share(o, n)
}

// Unreserve implements ReservePlugin.
func (p *LoadTarget) Unreserve(_ *CycleState, _ *Task, o *Option, n *Node) {
	n.load.reserved -= share(o, n)
	if n.load.reserved < 0 {
		n.load.reserved = 0
	}
}

// ExpectedCompletion prefers the option and node with the earliest expected
// completion, using runtimes learned per device model (hetero-aware).
type ExpectedCompletion struct{ c *Core }

// Name implements Plugin.
func (*ExpectedCompletion) Name() string { return "ExpectedCompletion" }

// Score implements ScorePlugin: 25 per unit of speed-up over the baseline,
// capped at 100.
func (p *ExpectedCompletion) Score(_ *CycleState, t *Task, o *Option, n *Node) (int64, *Status) {
	exp := p.c.lr.expectedOn(t, o, n)
	if exp <= 0 {
		return 100, nil
	}
	rel := float64(p.c.lr.expectedRuntime(t)) / exp
	s := int64(25 * rel)
	if s > 100 {
		s = 100
	}
	return s, nil
}

// ShortestRemaining is srtf's order and time-share rank: the expected
// remaining time, the task's expected runtime less the service it
// attained (every earlier attempt's run, and the current one's so far).
// A task that attained its estimate ranks 0, first. A member of a gang
// evicted whole ranks as its job: the longest remaining time of its
// unfinished members (they run together, and are swapped out and back
// together).
type ShortestRemaining struct{ c *Core }

// Name implements Plugin.
func (*ShortestRemaining) Name() string { return "ShortestRemaining" }

// SortKey implements QueueSortPlugin.
func (p *ShortestRemaining) SortKey(_ *CycleState, t *Task) int64 { return p.Rank(t) }

// Rank implements TimeSharePlugin.
func (p *ShortestRemaining) Rank(t *Task) int64 {
	if t.starved {
		return 0 // it waited past its bound: served, and run to its end (promote.go)
	}
	if g := t.gang; g != nil && !g.byMember {
		var rank int64
		for _, m := range g.members {
			if !m.state.Terminal() {
				rank = max(rank, p.c.lr.expectedRuntime(m)-p.c.attained(m))
			}
		}
		return rank
	}
	return max(0, p.c.lr.expectedRuntime(t)-p.c.attained(t))
}

// LeastAttained is las's order and time-share rank (Tiresias' discretized
// two-dimensional least-attained-service): the queue of the
// device-service the task attained (devices held × time, a task without
// devices counting as one device) by Config.LASThresholds. Queues are
// served lowest first, FIFO within one, and a task of a lower queue swaps
// out one of a higher queue. A task starved for Config.LASPromote times
// its last run is promoted to queue 0 (promote.go). It needs no run time
// estimate. A member of a gang evicted whole ranks as its job: the
// device-service all its members attained (Tiresias counts the job's
// GPUs).
type LeastAttained struct{ c *Core }

// Name implements Plugin.
func (*LeastAttained) Name() string { return "LeastAttained" }

// SortKey implements QueueSortPlugin.
func (p *LeastAttained) SortKey(_ *CycleState, t *Task) int64 { return p.Rank(t) }

// Rank implements TimeSharePlugin.
func (p *LeastAttained) Rank(t *Task) int64 {
	var service int64
	if g := t.gang; g != nil && !g.byMember {
		for _, m := range g.members {
			service += p.service(m)
		}
	} else {
		service = p.service(t)
	}
	for i, th := range p.c.cfg.LASThresholds {
		if service < int64(th) {
			return int64(i)
		}
	}
	return int64(len(p.c.cfg.LASThresholds))
}

// service is the device-service t attained since its last promotion
// (devices held × time, a task without devices counting as one device).
func (p *LeastAttained) service(t *Task) int64 {
	o := &t.cls.opts[0]
	if t.state == Scheduled || t.state == Running {
		o = &t.cls.opts[optIndex(t.chosen)]
	}
	var milli int64
	for _, d := range o.devs {
		milli += d.milli
	}
	return (p.c.attained(t) - t.lasBase) / 1000 * max(1000, milli)
}

// MaxRank implements RankCeiling: the last queue.
func (p *LeastAttained) MaxRank() int64 { return int64(len(p.c.cfg.LASThresholds)) }

// ShortestFirst orders pending tasks by expected runtime.
type ShortestFirst struct{ c *Core }

// Name implements Plugin.
func (*ShortestFirst) Name() string { return "ShortestFirst" }

// SortKey implements QueueSortPlugin.
func (p *ShortestFirst) SortKey(_ *CycleState, t *Task) int64 { return p.c.lr.expectedRuntime(t) }
