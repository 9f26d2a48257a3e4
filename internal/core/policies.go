package core

import (
	"sort"
	"strings"
)

// Compile-time guards: each plugin implements the interfaces it claims.
var (
	_ FilterPlugin    = NodeSelector{}
	_ FilterPlugin    = TaintToleration{}
	_ FilterPlugin    = NodeAffinity{}
	_ FilterPlugin    = ResourceTypes{}
	_ FilterPlugin    = (*LoadTarget)(nil)
	_ FilterPlugin    = NodeIdentity{}
	_ FilterPlugin    = QueueQuota{}
	_ FilterPlugin    = (*NodeResourcesFit)(nil)
	_ FilterPlugin    = (*DeviceFit)(nil)
	_ ScorePlugin     = LeastAllocated{}
	_ ScorePlugin     = MostAllocated{}
	_ ScorePlugin     = FewestTasks{}
	_ ScorePlugin     = AcceleratorGuard{}
	_ ScorePlugin     = (*Feedback)(nil)
	_ ScorePlugin     = (*LoadTarget)(nil)
	_ ScorePlugin     = (*ExpectedCompletion)(nil)
	_ ScorePlugin     = (*Fragmentation)(nil)
	_ ScorePlugin     = TieBreak{}
	_ ScorePlugin     = BestFit{}
	_ ScorePlugin     = DotProduct{}
	_ ScorePlugin     = GpuPacking{}
	_ ReservePlugin   = (*LoadTarget)(nil)
	_ SharePicker     = BestFitShare{}
	_ SharePicker     = RandomShare{}
	_ SharePicker     = (*Fragmentation)(nil)
	_ QueueSortPlugin = (*ShortestFirst)(nil)
	_ QueueSortPlugin = (*ShortestRemaining)(nil)
	_ TimeSharePlugin = (*ShortestRemaining)(nil)
	_ QueueSortPlugin = (*LeastAttained)(nil)
	_ TimeSharePlugin = (*LeastAttained)(nil)
)

// policyDef is one entry of the policy table: the policy's name and
// one-line description, written here once, and how to build it for a core
// (build leaves Name and Description to newPolicy).
type policyDef struct {
	name, description string
	build             func(c *Core) *Policy
}

// policyTable lists every policy (DESIGN.md "Policies"), in the order
// nothing depends on: lookups go by name, listings are sorted.
var policyTable = []policyDef{
	{"round-robin", "rotate over the nodes that fit", func(c *Core) *Policy {
		return &Policy{Order: Rotate, Static: staticFilters(c), Picker: BestFitShare{}, SampleSize: 1}
	}},
	{"least-allocated", "the emptiest node among those that could not hold the largest request seen anyway, then the emptiest", func(c *Core) *Policy {
		return &Policy{Order: LeastAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{}, KeepRoom: true,
			Scores: []WeightedScore{{LeastAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	}},
	{"binpack", "most-allocated: fill nodes before opening new ones", func(c *Core) *Policy {
		return &Policy{Order: MostAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{},
			Scores: []WeightedScore{{MostAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	}},
	{"spread", "fewest tasks per node, then least allocated", func(c *Core) *Policy {
		return &Policy{Order: LeastAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{}, SampleSize: 16,
			Scores: []WeightedScore{{FewestTasks{}, 10}, {LeastAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	}},
	{"weighted-feedback", "node weights from observed utilization and task latency", func(c *Core) *Policy {
		return &Policy{Order: LeastAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{}, SampleSize: 8,
			Scores: []WeightedScore{{&Feedback{c: c}, 2}, {LeastAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	}},
	{"sjf", "shortest expected job first, on the least-allocated node", func(c *Core) *Policy {
		return &Policy{Order: LeastAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{},
			QueueSort: &ShortestFirst{c: c},
			Scores:    []WeightedScore{{LeastAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	}},
	{"srtf", "preemptive shortest remaining time first: a task swaps out a running one with more expected time left, in rounds", func(c *Core) *Policy {
		sr := &ShortestRemaining{c: c}
		return &Policy{Order: LeastAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{},
			QueueSort: sr, TimeShare: sr,
			Scores: []WeightedScore{{LeastAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	}},
	{"las", "2D least attained service (Tiresias): queues by device-time attained, FIFO within, lower queues swap out higher ones; no run times needed; packs nodes (most-allocated), keeping whole nodes for gangs", func(c *Core) *Policy {
		la := &LeastAttained{c: c}
		return &Policy{Order: MostAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{},
			QueueSort: la, TimeShare: la,
			Scores: []WeightedScore{{MostAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	}},
	{"gavel-rounds", "heterogeneity-aware rounds (Gavel): every round, shares of each GPU model by throughput under max-min fairness; tasks move between models and time-share", func(c *Core) *Policy {
		g := &GavelRounds{c: c}
		return &Policy{Order: LeastAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{},
			Filters: []FilterPlugin{g}, Rounds: g,
			Scores: []WeightedScore{{LeastAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	}},
	{"load-predict", "forecast node load (Holt) and pack towards a target without overshoot", func(c *Core) *Policy {
		lt := &LoadTarget{c: c}
		return &Policy{Order: MostAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{}, SampleSize: 8,
			Filters: []FilterPlugin{lt}, Reserve: []ReservePlugin{lt},
			Scores: []WeightedScore{{lt, 2}, {AcceleratorGuard{}, 1}}}
	}},
	{"hetero-aware", "earliest expected completion across alternatives and device models, learned from finished tasks", func(c *Core) *Policy {
		return &Policy{Order: LeastAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{}, SampleSize: 4,
			CompareOptions: true,
			Scores:         []WeightedScore{{&ExpectedCompletion{c: c}, 10}, {MostAllocated{}, 1}, {AcceleratorGuard{}, 1}}}
	}},
	{"fgd", "fragmentation gradient descent for shared GPUs (ATC'23)", func(c *Core) *Policy {
		// The reference's score of the fragmentation change first; among
		// equal scores the best fit (which keeps idle nodes idle for large
		// requests) instead of the reference's random pick, then a hash.
		f := &Fragmentation{c: c}
		return &Policy{Order: MostAllocatedFirst, Static: staticFilters(c), Picker: f, FullWalk: true,
			Scores: []WeightedScore{{AcceleratorGuard{}, guardWeight}, {f, 1 << 40}, {BestFit{}, tieBreakRange}, {TieBreak{}, 1}}}
	}},
	{"fgd-ref", "FGD as its reference simulator scores it (ties broken at random)", func(c *Core) *Policy {
		f := &Fragmentation{c: c}
		return &Policy{Order: MostAllocatedFirst, Static: staticFilters(c), Picker: f, FullWalk: true,
			Scores: []WeightedScore{{f, tieBreakRange}, {TieBreak{}, 1}}}
	}},
	// The FGD paper's baselines (plugins_paper.go).
	{"random", "a uniformly random feasible node and device (FGD paper baseline)", func(c *Core) *Policy {
		return &Policy{Order: MostAllocatedFirst, Static: staticFilters(c), Picker: RandomShare{}, FullWalk: true,
			Scores: []WeightedScore{{AcceleratorGuard{}, guardWeight}, {TieBreak{}, 1}}}
	}},
	{"best-fit", "least CPU and GPU left after placement (FGD paper baseline)", func(c *Core) *Policy {
		return paperPolicy(c, BestFit{})
	}},
	{"gpu-packing", "shared GPUs first, then used nodes, then idle nodes (FGD paper baseline)", func(c *Core) *Policy {
		return paperPolicy(c, GpuPacking{})
	}},
	{"dot-product", "Tetris: smallest dot product of free and requested CPU/GPU (FGD paper baseline)", func(c *Core) *Policy {
		return paperPolicy(c, DotProduct{})
	}},
}

// staticFilters are every policy's static filters.
func staticFilters(c *Core) []FilterPlugin {
	return []FilterPlugin{ResourceTypes{dims: c.dims}, NodeSelector{identity: c.idx.identity}, NodeAffinity{}, TaintToleration{}}
}

// paperPolicy is a full-walk policy whose one score plugin decides, with a
// hash tie-break below it, and shares on the fullest device they fit; the
// accelerator guard above both.
func paperPolicy(c *Core, s ScorePlugin) *Policy {
	return &Policy{Order: MostAllocatedFirst, Static: staticFilters(c), Picker: BestFitShare{}, FullWalk: true,
		Scores: []WeightedScore{{AcceleratorGuard{}, guardWeight}, {s, tieBreakRange}, {TieBreak{}, 1}}}
}

// guardWeight puts the accelerator guard above every other score of the
// full-walk policies (fgd's fragmentation at 1<<40 included), below a
// gang's topology bonus (gangBonus): a CPU-only task takes a node
// without devices whenever one fits, so it never strands a GPU node's
// GPUs by taking its CPUs (the FGD paper's baselines, and its own
// reference scoring, fgd-ref, which keeps the paper's numbers, have no
// such guard).
const guardWeight = 1 << 42

// lookupPolicy returns the table entry of a policy.
func lookupPolicy(name string) (*policyDef, bool) {
	for i := range policyTable {
		if policyTable[i].name == name {
			return &policyTable[i], true
		}
	}
	return nil, false
}

// newPolicy builds the named policy (known: Config.Validate checked it)
// for c.
func newPolicy(c *Core, name string) *Policy {
	d, _ := lookupPolicy(name)
	p := d.build(c)
	p.Name, p.Description = d.name, d.description
	return p
}

// Policies returns the sorted list of policy names.
func Policies() []string {
	names := make([]string, len(policyTable))
	for i := range policyTable {
		names[i] = policyTable[i].name
	}
	sort.Strings(names)
	return names
}

// PolicyNames lists the known policies, comma-separated.
func PolicyNames() string { return strings.Join(Policies(), ", ") }

// DescribePolicy returns a policy's one-line description ("" if unknown).
func DescribePolicy(name string) string {
	if d, ok := lookupPolicy(name); ok {
		return d.description
	}
	return ""
}
