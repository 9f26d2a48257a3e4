package core

import (
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Compile-time guards: each plugin implements the interfaces it claims.
var (
	_ FilterPlugin    = NodeSelector{}
	_ FilterPlugin    = TaintToleration{}
	_ FilterPlugin    = ResourceTypes{}
	_ FilterPlugin    = (*LoadTarget)(nil)
	_ ScorePlugin     = LeastAllocated{}
	_ ScorePlugin     = MostAllocated{}
	_ ScorePlugin     = FewestTasks{}
	_ ScorePlugin     = AcceleratorGuard{}
	_ ScorePlugin     = (*Feedback)(nil)
	_ ScorePlugin     = (*LoadTarget)(nil)
	_ ScorePlugin     = (*ExpectedCompletion)(nil)
	_ ScorePlugin     = (*Fragmentation)(nil)
	_ ReservePlugin   = (*LoadTarget)(nil)
	_ SharePicker     = BestFitShare{}
	_ SharePicker     = (*Fragmentation)(nil)
	_ QueueSortPlugin = (*ShortestFirst)(nil)
)

func init() {
	base := func(c *Core) []FilterPlugin {
		return []FilterPlugin{ResourceTypes{dims: c.dims}, NodeSelector{identity: c.idx.identity}, TaintToleration{}}
	}
	register("round-robin", "rotate over the nodes that fit", func(c *Core) *Policy {
		return &Policy{Name: "round-robin", Description: "rotate over the nodes that fit",
			Order: Rotate, Static: base(c), Picker: BestFitShare{}, SampleSize: 1}
	})
	register("least-allocated", "least-connections: the emptiest node", func(c *Core) *Policy {
		return &Policy{Name: "least-allocated", Description: "least-connections: the emptiest node",
			Order: LeastAllocatedFirst, Static: base(c), Picker: BestFitShare{},
			Scores: []WeightedScore{{LeastAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	})
	register("binpack", "most-allocated: fill nodes before opening new ones", func(c *Core) *Policy {
		return &Policy{Name: "binpack", Description: "most-allocated: fill nodes before opening new ones",
			Order: MostAllocatedFirst, Static: base(c), Picker: BestFitShare{},
			Scores: []WeightedScore{{MostAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	})
	register("spread", "fewest tasks per node, then least allocated", func(c *Core) *Policy {
		return &Policy{Name: "spread", Description: "fewest tasks per node, then least allocated",
			Order: LeastAllocatedFirst, Static: base(c), Picker: BestFitShare{}, SampleSize: 16,
			Scores: []WeightedScore{{FewestTasks{}, 10}, {LeastAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	})
	register("weighted-feedback", "node weights from observed utilization and task latency", func(c *Core) *Policy {
		return &Policy{Name: "weighted-feedback", Description: "node weights from observed utilization and task latency",
			Order: LeastAllocatedFirst, Static: base(c), Picker: BestFitShare{}, SampleSize: 8,
			Scores: []WeightedScore{{&Feedback{c: c}, 2}, {LeastAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	})
	register("sjf", "shortest expected job first, on the least-allocated node", func(c *Core) *Policy {
		return &Policy{Name: "sjf", Description: "shortest expected job first, on the least-allocated node",
			Order: LeastAllocatedFirst, Static: base(c), Picker: BestFitShare{},
			QueueSort: &ShortestFirst{c: c},
			Scores:    []WeightedScore{{LeastAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	})
	register("load-predict", "forecast node load (Holt) and pack towards a target without overshoot", func(c *Core) *Policy {
		lt := &LoadTarget{c: c}
		return &Policy{Name: "load-predict", Description: "forecast node load (Holt) and pack towards a target without overshoot",
			Order: MostAllocatedFirst, Static: base(c), Picker: BestFitShare{}, SampleSize: 8,
			Filters: []FilterPlugin{lt}, Reserve: []ReservePlugin{lt},
			Scores: []WeightedScore{{lt, 2}, {AcceleratorGuard{}, 1}}}
	})
	register("hetero-aware", "earliest expected completion across alternatives and device models, learned from finished tasks", func(c *Core) *Policy {
		return &Policy{Name: "hetero-aware", Description: "earliest expected completion across alternatives and device models, learned from finished tasks",
			Order: LeastAllocatedFirst, Static: base(c), Picker: BestFitShare{}, SampleSize: 4,
			CompareOptions: true,
			Scores:         []WeightedScore{{&ExpectedCompletion{c: c}, 10}, {MostAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	})
	register("fgd", "fragmentation gradient descent for shared GPUs (ATC'23)", func(c *Core) *Policy {
		// The reference's score of the fragmentation change first; among
		// equal scores the best fit (which keeps idle nodes idle for large
		// requests) instead of the reference's random pick, then a hash.
		f := &Fragmentation{c: c}
		return &Policy{Name: "fgd", Description: "fragmentation gradient descent for shared GPUs (ATC'23)",
			Order: MostAllocatedFirst, Static: base(c), Picker: f, FullWalk: true,
			Scores: []WeightedScore{{f, 1 << 40}, {BestFit{}, tieBreakRange}, {TieBreak{}, 1}}}
	})
	register("fgd-ref", "FGD as its reference simulator scores it (ties broken at random)", func(c *Core) *Policy {
		f := &Fragmentation{c: c}
		return &Policy{Name: "fgd-ref", Description: "FGD as its reference simulator scores it (ties broken at random)",
			Order: MostAllocatedFirst, Static: base(c), Picker: f, FullWalk: true,
			Scores: []WeightedScore{{f, tieBreakRange}, {TieBreak{}, 1}}}
	})
}

// ResourceTypes is static: the group must have every requested resource
// type at all (whether one node is big enough is checked per node).
type ResourceTypes struct{ dims *resource.Dims }

// Name implements Plugin.
func (ResourceTypes) Name() string { return "ResourceTypes" }

// Filter implements FilterPlugin.
func (p ResourceTypes) Filter(_ *CycleState, _ *Task, o *Option, n *Node) *Status {
	if len(o.unknown) > 0 {
		return NewUnschedulable("no " + string(o.unknown[0].name))
	}
	for i := range o.req {
		if o.req[i] > 0 && n.capacity[i] == 0 {
			return NewUnschedulable("no " + string(p.dims.Name(i)))
		}
	}
	return nil
}

// NodeSelector is static: every selector label must match (a value may
// list alternatives "a|b"). Identity labels (hostnames) are not part of a
// group: the core checks them per node (see Core.identityMatch).
type NodeSelector struct{ identity map[string]bool }

// Name implements Plugin.
func (NodeSelector) Name() string { return "NodeSelector" }

var selectorMismatch = NewUnschedulable("nodeSelector mismatch")

// Filter implements FilterPlugin.
func (p NodeSelector) Filter(_ *CycleState, t *Task, _ *Option, n *Node) *Status {
	if !termsMatch(t.cls.selector, n.labels, p.identity) {
		return selectorMismatch
	}
	return nil
}

// TaintToleration is static: every NoSchedule/NoExecute taint must be
// tolerated.
type TaintToleration struct{}

// Name implements Plugin.
func (TaintToleration) Name() string { return "TaintToleration" }

// Filter implements FilterPlugin.
func (TaintToleration) Filter(_ *CycleState, t *Task, _ *Option, n *Node) *Status {
	for _, taint := range n.taints {
		if taint.Effect == "PreferNoSchedule" {
			continue
		}
		if !tolerates(t.cls.tolerations, taint) {
			return NewUnschedulable("untolerated taint " + taint.String())
		}
	}
	return nil
}

// tolerates reports whether any toleration matches the taint.
func tolerates(tols []api.Toleration, taint api.Taint) bool {
	for _, tol := range tols {
		if tol.Tolerates(taint) {
			return true
		}
	}
	return false
}

// requestedFraction is the mean over the option's requested dims of
// (allocated + request) / capacity on n.
func requestedFraction(o *Option, n *Node) float64 {
	var sum float64
	k := 0
	for i := range o.req {
		if o.req[i] == 0 || n.capacity[i] == 0 {
			continue
		}
		sum += float64(n.alloc[i]+o.req[i]) / float64(n.capacity[i])
		k++
	}
	if k == 0 {
		return 0
	}
	return sum / float64(k)
}

// LeastAllocated prefers the emptiest node ("least connections").
type LeastAllocated struct{}

// Name implements Plugin.
func (LeastAllocated) Name() string { return "LeastAllocated" }

// Score implements ScorePlugin.
func (LeastAllocated) Score(_ *CycleState, _ *Task, o *Option, n *Node) (int64, *Status) {
	return int64(100 * (1 - requestedFraction(o, n))), nil
}

// MostAllocated prefers the fullest node that still fits (bin packing).
type MostAllocated struct{}

// Name implements Plugin.
func (MostAllocated) Name() string { return "MostAllocated" }

// Score implements ScorePlugin.
func (MostAllocated) Score(_ *CycleState, _ *Task, o *Option, n *Node) (int64, *Status) {
	return int64(100 * requestedFraction(o, n)), nil
}

// FewestTasks prefers nodes running fewer tasks (spreading).
type FewestTasks struct{}

// Name implements Plugin.
func (FewestTasks) Name() string { return "FewestTasks" }

// Score implements ScorePlugin.
func (FewestTasks) Score(_ *CycleState, _ *Task, _ *Option, n *Node) (int64, *Status) {
	return 100 / int64(1+len(n.tasks)), nil
}

// AcceleratorGuard keeps accelerator nodes for accelerated work: an option
// that asks for no device scores 0 on a node that has devices.
type AcceleratorGuard struct{}

// Name implements Plugin.
func (AcceleratorGuard) Name() string { return "AcceleratorGuard" }

// Score implements ScorePlugin.
func (AcceleratorGuard) Score(_ *CycleState, _ *Task, o *Option, n *Node) (int64, *Status) {
	if len(o.devs) == 0 && len(n.devices) > 0 {
		return 0, nil
	}
	return 100, nil
}

// BestFitShare puts a fractional request on the fullest device it fits,
// keeping whole devices free for whole-device requests.
type BestFitShare struct{}

// Name implements Plugin.
func (BestFitShare) Name() string { return "BestFitShare" }

// PickShare implements SharePicker.
func (BestFitShare) PickShare(_ *CycleState, _ *Task, _ *Option, n *Node, cands []int32, _ int64) int32 {
	best := cands[0]
	for _, i := range cands[1:] {
		if n.devices[i].Used > n.devices[best].Used {
			best = i
		}
	}
	return best
}
