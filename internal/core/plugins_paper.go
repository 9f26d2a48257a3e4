package core

// Baseline policies of the FGD paper (Weng et al., "Beware of
// Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation
// Gradient Descent", USENIX ATC'23), as its simulator
// (github.com/hkust-adsl/kubernetes-scheduler-simulator, pkg/simulator/plugin)
// scores them: every feasible node is scored (percentageOfNodesToScore 100),
// one score plugin decides, ties are broken uniformly at random, and a
// fractional request lands on the device the policy's GPU selection names
// ("best": the fullest device it fits; "random"; FGD: its own).
//
// The core has no randomness: "random" here is a hash of the task's
// submission sequence and the node's (or device's) insertion sequence, so
// the fitting node with the largest hash wins: uniformly random over the
// feasible nodes, and reproducible.

import (
	"math"
)

// Normalisation constants of the reference (open-gpu-share utils: the
// largest node of the Alibaba traces).
const (
	paperMaxCPU = 128000 // milli-CPU
	paperMaxGPU = 8000   // milli-GPU
)

// tieBreakRange is the weight of a decisive score over TieBreak.
const tieBreakRange = 1 << 20

// mix64 is splitmix64's finaliser over a and b.
func mix64(a, b uint64) uint64 {
	z := a*0x9e3779b97f4a7c15 + b + 0x632be59bd9b4e5f5
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// TieBreak scores a node with a hash of (task, node) in [0, tieBreakRange):
// alone, the highest hash among the fits is a uniformly random fit; below a
// decisive score it picks uniformly among that score's ties (as
// kube-scheduler's selectHost does).
type TieBreak struct{}

// Name implements Plugin.
func (TieBreak) Name() string { return "TieBreak" }

// Score implements ScorePlugin.
func (TieBreak) Score(_ *CycleState, t *Task, _ *Option, n *Node) (int64, *Status) {
	return int64(mix64(t.seq, n.seq) % tieBreakRange), nil
}

// RandomShare puts a fractional request on a uniformly random device among
// those it fits (the reference's "random" GPU selection).
type RandomShare struct{}

// Name implements Plugin.
func (RandomShare) Name() string { return "RandomShare" }

// PickShare implements SharePicker.
func (RandomShare) PickShare(_ *CycleState, t *Task, _ *Option, n *Node, cands []int32, _ int64) int32 {
	return cands[mix64(t.seq^0x5bd1e995, n.seq)%uint64(len(cands))]
}

// devFree sums the free share of n's healthy devices of dimension dim
// (every device dimension for dim < 0).
func devFree(n *Node, dim int) int64 {
	var free int64
	for i := range n.devices {
		d := &n.devices[i]
		if d.Healthy && (dim < 0 || d.dim == dim) {
			free += int64(d.Free())
		}
	}
	return free
}

// devRequest is the option's device request in milli (all device dims) and
// the dimension of its first one (-1 when it asks for none).
func devRequest(o *Option) (milli int64, dim int) {
	dim = -1
	for k, dr := range o.devs {
		milli += dr.milli
		if k == 0 {
			dim = dr.dim
		}
	}
	return milli, dim
}

// BestFit is the reference's BestFitScore: 100·(1 − ½(cpuFree−cpuReq)/128
// cores − ½(gpuFree−gpuReq)/8 GPUs), truncated: the node left emptiest
// loses.
type BestFit struct{}

// Name implements Plugin.
func (BestFit) Name() string { return "BestFit" }

// Score implements ScorePlugin.
func (BestFit) Score(_ *CycleState, _ *Task, o *Option, n *Node) (int64, *Status) {
	req, dim := devRequest(o)
	cpu := float64(n.freeDim(0)-o.req[0]) / paperMaxCPU
	gpu := float64(devFree(n, dim)-req) / paperMaxGPU
	return int64((1 - (0.5*cpu + 0.5*gpu)) * 100), nil
}

// DotProduct is the reference's DotProductScore with dimExtMethod merge
// and normMethod max (Tetris): 100·(1 − ½ free·req), both vectors
// [cpu, gpu] over 128 cores and 8 GPUs.
type DotProduct struct{}

// Name implements Plugin.
func (DotProduct) Name() string { return "DotProduct" }

// Score implements ScorePlugin.
func (DotProduct) Score(_ *CycleState, _ *Task, o *Option, n *Node) (int64, *Status) {
	req, dim := devRequest(o)
	dot := float64(n.freeDim(0))/paperMaxCPU*float64(o.req[0])/paperMaxCPU +
		float64(devFree(n, dim))/paperMaxGPU*float64(req)/paperMaxGPU
	return int64(100 * (1 - dot/2)), nil
}

// GpuPacking is the reference's GpuPackingScore: a share on a used GPU
// scores 50..100 (fuller GPU higher), whole free GPUs of a used node
// 33..50, an idle node 0..33 (fewer GPUs higher); no GPU request scores 0.
type GpuPacking struct{}

// Name implements Plugin.
func (GpuPacking) Name() string { return "GpuPacking" }

// Score implements ScorePlugin.
func (GpuPacking) Score(_ *CycleState, _ *Task, o *Option, n *Node) (int64, *Status) {
	if len(o.devs) == 0 {
		return 0, nil
	}
	dr := o.devs[0]
	idxs := n.byDim[dr.dim]
	fullyFree := 0
	for _, i := range idxs {
		if n.devices[i].Used == 0 {
			fullyFree++
		}
	}
	if fullyFree == len(idxs) {
		return max(int64(100/3-fullyFree), int64(fullyFree)), nil
	}
	per, k := dr.milli, 1
	if per >= 1000 {
		per, k = 1000, int(dr.milli/1000)
	}
	// The reference takes the fitting devices fullest first.
	var fr [64]int64
	m := 0
	for _, i := range idxs {
		if f := int64(n.devices[i].Free()); f >= per && m < len(fr) {
			fr[m] = f
			m++
		}
	}
	sortInt64s(fr[:m])
	if m < k {
		return 0, nil
	}
	usedFree, ratio := 0, int64(0)
	for _, f := range fr[:k] {
		if f == 1000 {
			usedFree++
		}
		ratio += f * 100 / 1000
	}
	if usedFree > 0 {
		return max(int64(100/2-usedFree), 100/3), nil
	}
	return max(100-ratio/10, 100/2), nil
}

func sortInt64s(a []int64) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// sigmoid is the logistic function.
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
