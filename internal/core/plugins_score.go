package core

// requestedFraction is the mean over the option's requested dims of
// (allocated + request) / capacity on n.
func requestedFraction(o *Option, n *Node) float64 {
	var sum float64
	k := 0
	for i := range o.reqLen {
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
