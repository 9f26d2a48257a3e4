package core

import (
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// ewma is an exponentially weighted moving average.
type ewma struct {
	v float64
	n int
}

const ewmaAlpha = 0.3

func (e *ewma) add(x float64) {
	if e.n == 0 {
		e.v = x
	} else {
		e.v = ewmaAlpha*x + (1-ewmaAlpha)*e.v
	}
	e.n++
}

// holt is Holt's linear (double exponential) smoothing: a level and a trend,
// forecasting one sample ahead.
type holt struct {
	level, trend float64
	n            int
}

const holtAlpha, holtBeta = 0.5, 0.3

func (h *holt) add(x float64) {
	switch h.n {
	case 0:
		h.level = x
	default:
		prev := h.level
		h.level = holtAlpha*x + (1-holtAlpha)*(h.level+h.trend)
		h.trend = holtBeta*(h.level-prev) + (1-holtBeta)*h.trend
	}
	h.n++
}

func (h *holt) forecast() float64 { return clamp01(h.level + h.trend) }

func clamp01(x float64) float64 {
	if x < 0 {
		return 0
	}
	if x > 1 {
		return 1
	}
	return x
}

// loadStats is what the core learned about one node from heartbeats and
// finished tasks.
type loadStats struct {
	forecast holt
	util     ewma
	// latency is the EWMA of expected/actual runtime of tasks that finished
	// on the node (1 = as expected, below 1 = slower).
	latency ewma
	// reserved is the load placed since the last sample (load-predict).
	reserved float64
}

// expectedRuntime returns the runtime (ns) the core expects for t at speed
// 1.0: its estimate, else its runtime class's history, else the default.
func (c *Core) expectedRuntime(t *Task) int64 {
	if t.duration > 0 {
		return t.duration
	}
	if t.rt != nil && t.rt.runtime.n > 0 {
		return int64(t.rt.runtime.v)
	}
	return int64(c.cfg.DefaultDuration)
}

// modelOf returns the device model an option would use on n ("cpu" for an
// option without devices).
func modelOf(o *Option, n *Node) string {
	for _, d := range o.devs {
		if idx := n.byDim[d.dim]; len(idx) > 0 {
			return n.devices[idx[0]].Model
		}
	}
	return "cpu"
}

// expectedOn returns the expected runtime (ns) of t using option o on n.
func (c *Core) expectedOn(t *Task, o *Option, n *Node) float64 {
	model := modelOf(o, n)
	if t.rt != nil {
		if e, ok := t.rt.byModel[model]; ok && e.n > 0 {
			return e.v
		}
	}
	f := 1.0
	if e, ok := c.modelSpeed[model]; ok && e.n > 0 {
		f = e.v
	}
	return float64(c.expectedRuntime(t)) / (o.Speed * f)
}

// learnFinished updates runtime prediction, per-model speed and the node's
// latency factor from a task that ran for runtime ns.
func (c *Core) learnFinished(t *Task, runtime int64) {
	if runtime <= 0 || t.node == nil {
		return
	}
	o := &t.cls.opts[optIndex(t.chosen)]
	model := modelOf(o, t.node)
	expected := c.expectedOn(t, o, t.node)
	if t.rt != nil {
		// Normalise to speed 1.0 so that history from any option predicts
		// the baseline.
		t.rt.runtime.add(float64(runtime) * o.Speed)
		if t.rt.byModel == nil {
			t.rt.byModel = map[string]ewma{}
		}
		e := t.rt.byModel[model]
		e.add(float64(runtime))
		t.rt.byModel[model] = e
	}
	if t.duration > 0 {
		// How much faster than declared this model ran.
		declared := float64(t.duration) / o.Speed
		e := c.modelSpeed[model]
		// One odd run (a lease returned at once, a crash reported as
		// success) must not swing a model's factor without bound.
		e.add(clampRange(declared/float64(runtime), 0.1, 10))
		c.modelSpeed[model] = e
	}
	t.node.load.latency.add(clampRange(expected/float64(runtime), 0.05, 1))
}

func clampRange(x, lo, hi float64) float64 {
	if x < lo {
		return lo
	}
	if x > hi {
		return hi
	}
	return x
}

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
	exp := p.c.expectedOn(t, o, n)
	if exp <= 0 {
		return 100, nil
	}
	rel := float64(p.c.expectedRuntime(t)) / exp
	s := int64(25 * rel)
	if s > 100 {
		s = 100
	}
	return s, nil
}

// ShortestFirst orders pending tasks by expected runtime.
type ShortestFirst struct{ c *Core }

// Name implements Plugin.
func (*ShortestFirst) Name() string { return "ShortestFirst" }

// SortKey implements QueueSortPlugin.
func (p *ShortestFirst) SortKey(_ *CycleState, t *Task) int64 { return p.c.expectedRuntime(t) }

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

// workload keeps the popularity of request types (FGD's target workload,
// taken from the tasks submitted so far). Bounded: at most maxWorkTypes
// distinct types are tracked.
type workload struct {
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

func (w *workload) observe(o *Option) {
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
func (w *workload) topTypes() []*workType {
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
	types := f.c.work.topTypes()
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
	return refScore(f.delta(o, n, cs.core.scratchDevs)), nil
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

// ObserveWorkload counts a request into the workload distribution that
// fragmentation-aware scoring protects (FGD's "typical pods") without
// submitting anything: an operator who knows the coming mix, or a replay
// that knows its trace, declares it up front instead of letting it be
// learned from arrivals. Bad resource names are refused; names no node
// offers are ignored (no node can be fragmented for them).
func (c *Core) ObserveWorkload(now time.Time, spec *api.Task) error {
	c.advance(now)
	if err := api.ValidateRequest("resources", spec.Resources); err != nil {
		return err
	}
	var o Option
	if _, err := c.vectorOf(&o.req, "resources", spec.Resources); err != nil {
		return err
	}
	o.computeDevs(c.dims)
	c.work.observe(&o)
	return nil
}

// ObserveRuntime records a measured run time of the runtime class class
// (tasks' metadata "class") on a device model ("cpu" for tasks without
// devices), as a finished task of that class would: a profile measured
// elsewhere (Gavel's per-model throughputs) seeds the runtime prediction
// that hetero-aware scoring and shortest-job-first use, before any task of
// the class has finished here.
func (c *Core) ObserveRuntime(now time.Time, class, model string, runtime time.Duration) error {
	c.advance(now)
	const maxLen = 256
	if class == "" || len(class) > maxLen {
		return errs.Invalid("class", "must be 1..%d characters", maxLen)
	}
	if model == "" || len(model) > maxLen {
		return errs.Invalid("model", "must be 1..%d characters", maxLen)
	}
	if runtime <= 0 {
		return errs.Invalid("runtime", "must be positive, got %s", runtime)
	}
	rc := c.rtByMeta[class]
	if rc == nil {
		rc = &runtimeClass{key: class}
		c.rtByMeta[class] = rc
	}
	if rc.byModel == nil {
		rc.byModel = map[string]ewma{}
	}
	e := rc.byModel[model]
	e.add(float64(runtime))
	rc.byModel[model] = e
	rc.runtime.add(float64(runtime))
	return nil
}
