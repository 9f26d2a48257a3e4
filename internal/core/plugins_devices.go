package core

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
