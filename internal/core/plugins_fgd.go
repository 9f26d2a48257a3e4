package core

import (
	"math"
	"sort"
)

// workType is one kind of request seen in the workload (FGD's "typical
// pod"): its device request (dim -1 and milli 0 for a request without
// devices) and its CPU; memory is not part of it, as in the reference.
type workType struct {
	dim   int
	milli int64 // device request, milli (k whole devices: k·1000)
	cpu   int64
	count int64
	per   int64 // per-device request: milli, or 1000 for whole devices
	k     int   // devices needed
}

// requestMix keeps the popularity of request types (what FGD calls its
// target workload), taken from the tasks submitted so far. Bounded: at
// most maxWorkTypes distinct types are tracked.
type requestMix struct {
	types map[[3]int64]*workType
	top   []*workType
	total int64
	dirty int
}

const maxWorkTypes = 512

// fgdCoverage is the share of the workload the typical types cover (the
// reference's podPopularityThreshold 95); fgdTopTypes bounds their number.
const (
	fgdCoverage = 0.95
	fgdTopTypes = 64
)

func (w *requestMix) observe(o *Option) {
	dim, milli := -1, int64(0)
	if len(o.devs) > 0 {
		dim, milli = o.devs[0].dim, o.devs[0].milli
	}
	k := [3]int64{int64(dim), milli, o.req[0]}
	if w.types == nil {
		w.types = map[[3]int64]*workType{}
	}
	wt := w.types[k]
	if wt == nil {
		if len(w.types) >= maxWorkTypes {
			return
		}
		wt = &workType{dim: dim, milli: milli, cpu: o.req[0], per: milli, k: 1}
		if milli >= 1000 {
			wt.per, wt.k = 1000, int(milli/1000)
		}
		w.types[k] = wt
		w.dirty = 1 << 30
	}
	wt.count++
	w.total++
	w.dirty++
}

// topTypes returns the most popular types that together cover fgdCoverage
// of the workload (at most fgdTopTypes).
func (w *requestMix) topTypes() []*workType {
	if w.dirty > 256 || (w.dirty > 0 && w.total < 4096) {
		w.top = w.top[:0]
		for _, t := range w.types {
			w.top = append(w.top, t)
		}
		sort.Slice(w.top, func(i, j int) bool {
			a, b := w.top[i], w.top[j]
			if a.count != b.count {
				return a.count > b.count
			}
			if a.milli != b.milli {
				return a.milli < b.milli
			}
			if a.cpu != b.cpu {
				return a.cpu < b.cpu
			}
			return a.dim < b.dim // keys are unique: a total order
		})
		var cum int64
		for i, t := range w.top {
			cum += t.count
			if float64(cum) >= fgdCoverage*float64(w.total) || i+1 == fgdTopTypes {
				w.top = w.top[:i+1]
				break
			}
		}
		w.dirty = 0
	}
	return w.top
}

// Fragmentation implements fragmentation gradient descent (FGD, ATC'23):
// it measures, for each popular request type of the workload, how much free
// device share on a node that type could not use, weighted by popularity,
// and places a task where this expected fragmentation grows least.
//
// As in the reference (kubernetes-scheduler-simulator,
// pkg/utils/frag.go NodeGpuShareFragAmount): for a type that fits the
// node (CPU free and enough devices with its per-device share free) the
// fragment is the free share of the devices too small for it; for every
// other type (no CPU, too few such devices, no devices of its kind, or a
// request without devices) all the node's free device share is fragment.
//
// Scores are the reference's: int(100·sigmoid(−Δ/1000)) for a change Δ in
// milli-devices, and a share takes the first device with the best score.
type Fragmentation struct{ c *Core }

// Name implements Plugin.
func (*Fragmentation) Name() string { return "Fragmentation" }

// nodeFrag is the popularity-weighted fragmentation of n (milli-devices).
func (f *Fragmentation) nodeFrag(n *Node) float64 {
	types := f.c.lr.mix.topTypes()
	var all int64
	for i := range n.devices {
		if d := &n.devices[i]; d.Healthy {
			all += int64(d.Free())
		}
	}
	if all == 0 {
		return 0
	}
	cpuFree := n.freeDim(0)
	var total, wsum float64
	for _, wt := range types {
		w := float64(wt.count)
		wsum += w
		if wt.dim < 0 || wt.cpu > cpuFree || len(n.byDim[wt.dim]) == 0 {
			total += w * float64(all)
			continue
		}
		var under int64
		fit := 0
		for _, i := range n.byDim[wt.dim] {
			d := &n.devices[i]
			if !d.Healthy {
				continue
			}
			if fr := int64(d.Free()); fr >= wt.per {
				fit++
			} else {
				under += fr
			}
		}
		if fit < wt.k {
			total += w * float64(all)
		} else {
			// Free share of other device kinds is fragment to this type.
			total += w * float64(all-devFree(n, wt.dim)+under)
		}
	}
	if wsum == 0 {
		return 0
	}
	return total / wsum
}

// delta returns the change of n's fragmentation if o took devs on n.
func (f *Fragmentation) delta(o *Option, n *Node, devs []devShare) float64 {
	before := f.nodeFrag(n)
	n.alloc.Add(&o.req)
	for _, s := range devs {
		n.devices[s.dev].Used += s.milli
	}
	after := f.nodeFrag(n)
	for _, s := range devs {
		n.devices[s.dev].Used -= s.milli
	}
	n.alloc.Sub(&o.req)
	return after - before
}

// refScore is the reference's score of a fragmentation change d.
func refScore(d float64) int64 { return int64(sigmoid(-d/1000) * 100) }

// Score implements ScorePlugin: higher for less fragmentation growth.
func (f *Fragmentation) Score(cs *CycleState, _ *Task, o *Option, n *Node) (int64, *Status) {
	return refScore(f.delta(o, n, cs.picked)), nil
}

// PickShare implements SharePicker: the device whose use grows
// fragmentation least.
func (f *Fragmentation) PickShare(_ *CycleState, _ *Task, o *Option, n *Node, cands []int32, milli int64) int32 {
	best, bestS := cands[0], int64(math.MinInt64)
	for _, i := range cands {
		if s := refScore(f.delta(o, n, []devShare{{dev: i, milli: int32(milli)}})); s > bestS {
			best, bestS = i, s
		}
	}
	return best
}
