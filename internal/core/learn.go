package core

import (
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

// learner holds what the core learns from finished tasks and observed
// requests: runtimes by runtime class, speeds by class and device model
// (modelSpeed), and the mix of requests (FGD's target workload). The
// placement plugins and the starvation bound ask it for expected
// runtimes; the core feeds it at learnFinished, ObserveRequest and
// ObserveRuntime.
type learner struct {
	c     *Core
	speed map[string]ewma // by class and model
	mix   requestMix
}

// expectedRuntime returns the runtime (ns) the core expects for t at speed
// 1.0: its estimate, else its runtime class's history, else the default.
func (lr *learner) expectedRuntime(t *Task) int64 {
	c := lr.c
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
func (lr *learner) expectedOn(t *Task, o *Option, n *Node) float64 {
	return lr.expectedOnModel(t, o, modelOf(o, n))
}

// expectedOnModel returns the expected runtime (ns) of t using option o
// on a device model: its class's measured run time there, else its
// expected runtime over the model's learned speed.
func (lr *learner) expectedOnModel(t *Task, o *Option, model string) float64 {
	if t.rt != nil {
		if e, ok := t.rt.byModel[model]; ok && e.n > 0 {
			return e.v
		}
	}
	f := 1.0
	if e, ok := lr.speed[model]; ok && e.n > 0 {
		f = e.v
	}
	return float64(lr.expectedRuntime(t)) / (o.Speed * f)
}

// learnFinished updates runtime prediction, per-model speed and the node's
// latency factor from a task that ran for runtime ns.
func (lr *learner) learnFinished(t *Task, runtime int64) {
	if runtime <= 0 || t.node == nil {
		return
	}
	o := &t.cls.opts[optIndex(t.chosen)]
	model := modelOf(o, t.node)
	expected := lr.expectedOn(t, o, t.node)
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
		e := lr.speed[model]
		// One odd run (a lease returned at once, a crash reported as
		// success) must not swing a model's factor without bound.
		e.add(clampRange(declared/float64(runtime), 0.1, 10))
		lr.speed[model] = e
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

// ObserveRequest counts a request into the request mix that
// fragmentation-aware scoring protects (FGD's "typical pods") without
// submitting anything: an operator who knows the coming mix, or a replay
// that knows its trace, declares it up front instead of letting it be
// learned from arrivals. Bad resource names are refused; names no node
// offers are ignored (no node can be fragmented for them).
func (c *Core) ObserveRequest(now time.Time, spec *api.Task) error {
	c.advance(now)
	if err := api.ValidateRequest("resources", spec.Resources); err != nil {
		return err
	}
	var o Option
	if _, err := c.ct.vectorOf(&o.req, "resources", spec.Resources); err != nil {
		return err
	}
	o.computeDevs(c.dims)
	c.lr.mix.observe(&o)
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
	rc := c.ct.rtByMeta[class]
	if rc == nil {
		rc = &runtimeClass{key: class}
		c.ct.rtByMeta[class] = rc
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
