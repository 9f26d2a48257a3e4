package autoscale

import (
	"fmt"
	"math"
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

// Sample is what one replica reported for one metric: for a resource, its
// usage and its request (in the same unit); for a custom metric, its
// value. A replica that is not ready, or still starting, has Ready false;
// one that reported nothing has Missing set.
type Sample struct {
	Ready   bool
	Missing bool
	Value   float64
	Request float64
}

// MetricResult is how one metric stood at an evaluation.
type MetricResult struct {
	Metric  api.AutoscaleMetric
	Current float64 // the utilization (percent) or the value per replica, over the ready replicas that reported
	Desired int     // the replicas it asks for; -1 when it had no data
}

// Decision is an evaluation's answer: the replica count to run and why,
// in the words of `kubectl describe hpa`.
//
// Obligations: the caller scales the service to Replicas (or leaves it
// when it equals the current count). Evaluate has already recorded the
// change as a scale event, so the next evaluation's rate limits count it.
type Decision struct {
	Replicas       int
	Recommendation int // what the metrics asked for, before the windows and limits
	Metrics        []MetricResult
	// Reason is ScaleUp, ScaleDown, or NoChange, with Message saying why;
	// Limited names what held the count back ("" when nothing did):
	// ScaleUpStabilized, ScaleDownStabilized, ScaleUpLimit, ScaleDownLimit,
	// TooManyReplicas, TooFewReplicas.
	Reason, Message, Limited string
}

// Autoscaler is one service's autoscaler: its spec and what it remembers
// (recommendations for the windows, scale events for the rate limits).
type Autoscaler struct {
	spec    api.Autoscale
	targets []target
	up      api.ScaleRules
	down    api.ScaleRules
	recs    []stamped // recommendations, for the windows
	events  []stamped // scale events (the change, signed), for the rate limits
}

type stamped struct {
	at time.Time
	n  int
}

// New makes an autoscaler for spec (checked: an error names the field).
func New(spec api.Autoscale) (*Autoscaler, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	a := &Autoscaler{spec: spec, up: rules(spec.Behavior.ScaleUp, defaultUp), down: rules(spec.Behavior.ScaleDown, defaultDown)}
	for i := range spec.Metrics {
		p, v, _ := spec.Metrics[i].ParseTarget(fmt.Sprintf("autoscale.metrics[%d]", i))
		a.targets = append(a.targets, target{percent: p, value: v})
	}
	return a, nil
}

// Evaluate decides the replica count at now, for current replicas and
// each metric's samples (samples[i] are spec.Metrics[i]'s, one per
// replica). As the HPA: a count outside min and max is brought inside
// first; otherwise each metric's recommendation (replicaCount), the
// largest of them, stabilized (stabilize) and rate limited (limit).
func (a *Autoscaler) Evaluate(now time.Time, current int, samples [][]Sample) Decision {
	d := Decision{Replicas: current, Recommendation: current, Reason: "NoChange"}
	switch {
	case current > a.spec.Max:
		d.Replicas, d.Recommendation, d.Limited = a.spec.Max, a.spec.Max, "TooManyReplicas"
		d.Message = "the current replica count is above max"
	case current < a.spec.Min:
		d.Replicas, d.Recommendation, d.Limited = a.spec.Min, a.spec.Min, "TooFewReplicas"
		d.Message = "the current replica count is below min"
	default:
		rec, ok := a.recommend(current, samples, &d)
		if !ok {
			d.Message = "no metric had data: the count stays"
			return d
		}
		d.Recommendation = rec
		d.Replicas, d.Limited = a.normalize(now, current, rec)
		d.Message = a.message(d)
	}
	if d.Replicas > current {
		d.Reason = "ScaleUp"
	} else if d.Replicas < current {
		d.Reason = "ScaleDown"
	}
	if d.Replicas != current {
		a.events = append(a.events, stamped{now, d.Replicas - current})
	}
	a.forget(now)
	return d
}

// recommend is the largest recommendation of the metrics that had data;
// as the HPA, when a metric had none and the others would scale down,
// the count stays (a missing metric might have asked for more).
func (a *Autoscaler) recommend(current int, samples [][]Sample, d *Decision) (int, bool) {
	best, any, invalid := 0, false, false
	for i, m := range a.spec.Metrics {
		var ss []Sample
		if i < len(samples) {
			ss = samples[i]
		}
		n, cur, ok := replicaCount(current, a.targets[i], m.Resource != "", ss)
		r := MetricResult{Metric: m, Current: cur, Desired: -1}
		if ok {
			r.Desired = n
			best, any = max(best, n), true
		} else {
			invalid = true
		}
		d.Metrics = append(d.Metrics, r)
	}
	if !any || invalid && best < current {
		return current, any
	}
	return best, true
}

// replicaCount is one metric's recommendation, the HPA's replica
// calculator: the usage ratio over the ready replicas that reported; a
// ratio within Tolerance asks for no change. Replicas that did not report
// count as at the target when the ratio would scale down and as idle when
// it would scale up, and not-ready ones as idle when it would scale up;
// if that turns the direction, or brings the ratio within tolerance, the
// count stays. cur is the utilization (percent) or value per replica.
func replicaCount(current int, t target, resource bool, ss []Sample) (n int, cur float64, ok bool) {
	var sum, req float64
	ready, missing, unready := 0, 0, 0
	for _, s := range ss {
		switch {
		case s.Missing:
			missing++
		case !s.Ready:
			unready++
		default:
			ready++
			sum += s.Value
			req += s.Request
		}
	}
	if ready == 0 || resource && req <= 0 {
		return 0, 0, false
	}
	want := t.value // a custom metric: the value per replica
	cur = sum / float64(ready)
	if resource {
		cur = sum / req * 100
		want = float64(t.percent)
	}
	ratio := cur / want
	if missing+unready == 0 {
		if math.Abs(ratio-1) <= Tolerance {
			return current, cur, true
		}
		return int(math.Ceil(ratio * float64(ready))), cur, true
	}
	// The HPA's conservative assumptions, in the ratio's direction.
	perReplica := req / float64(ready) // a missing replica's request: the ready ones' mean
	count := ready
	if ratio < 1 {
		// Scaling down: the missing ones at the target.
		count += missing
		if resource {
			sum += float64(missing) * perReplica * want / 100
			req += float64(missing) * perReplica
		} else {
			sum += float64(missing) * want
		}
	} else {
		// Scaling up: the missing and the not ready ones idle.
		count += missing + unready
		if resource {
			req += float64(missing+unready) * perReplica
		}
	}
	newRatio := sum / float64(count) / want
	if resource {
		newRatio = sum / req * 100 / want
	}
	if math.Abs(newRatio-1) <= Tolerance || ratio < 1 && newRatio > 1 || ratio > 1 && newRatio < 1 {
		return current, cur, true
	}
	n = int(math.Ceil(newRatio * float64(count)))
	if ratio < 1 && n > current || ratio > 1 && n < current {
		return current, cur, true
	}
	return n, cur, true
}

// normalize is the HPA's normalizeDesiredReplicasWithBehaviors: the
// recommendation kept within the windows' recommendations (the lowest of
// the scale-up window, the highest of the scale-down window, with the
// current count between), then the rate policies, then min and max. It
// records the recommendation.
func (a *Autoscaler) normalize(now time.Time, current, rec int) (int, string) {
	upCut := now.Add(-time.Duration(*a.up.StabilizationWindow))
	downCut := now.Add(-time.Duration(*a.down.StabilizationWindow))
	upRec, downRec := rec, rec
	for _, r := range a.recs {
		if r.at.After(upCut) {
			upRec = min(upRec, r.n)
		}
		if r.at.After(downCut) {
			downRec = max(downRec, r.n)
		}
	}
	a.recs = append(a.recs, stamped{now, rec})
	n := min(max(current, upRec), downRec)
	limited := ""
	if n != rec {
		limited = "ScaleUpStabilized"
		if rec < current {
			limited = "ScaleDownStabilized"
		}
	}
	switch {
	case n > current:
		hi, why := a.spec.Max, "TooManyReplicas"
		if lim := a.upLimit(now, current); lim < hi {
			hi, why = lim, "ScaleUpLimit"
		}
		if n > hi {
			n, limited = hi, why
		}
	case n < current:
		lo, why := a.spec.Min, "TooFewReplicas"
		if lim := a.downLimit(now, current); lim > lo {
			lo, why = lim, "ScaleDownLimit"
		}
		if n < lo {
			n, limited = lo, why
		}
	}
	return n, limited
}

// periodStart is the count at the start of a policy's period: the
// current one less the scale events since.
func (a *Autoscaler) periodStart(now time.Time, current int, period api.Duration) int {
	cut := now.Add(-time.Duration(period))
	start := current
	for _, e := range a.events {
		if e.at.After(cut) {
			start -= e.n
		}
	}
	return start
}

// upLimit is the most replicas the scale-up policies allow now (never
// below current).
func (a *Autoscaler) upLimit(now time.Time, current int) int {
	if a.up.Select == api.SelectDisabled {
		return current
	}
	lim := -1
	for _, p := range a.up.Policies {
		start := a.periodStart(now, current, p.Period)
		v := start + p.Value
		if p.Type == api.ScalePercent {
			v = int(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		}
		if lim < 0 || a.up.Select == api.SelectMax && v > lim || a.up.Select == api.SelectMin && v < lim {
			lim = v
		}
	}
	return max(lim, current)
}

// downLimit is the fewest replicas the scale-down policies allow now
// (never above current).
func (a *Autoscaler) downLimit(now time.Time, current int) int {
	if a.down.Select == api.SelectDisabled {
		return current
	}
	lim := math.MaxInt
	first := true
	for _, p := range a.down.Policies {
		start := a.periodStart(now, current, p.Period)
		v := start - p.Value
		if p.Type == api.ScalePercent {
			v = int(float64(start) * (1 - float64(p.Value)/100))
		}
		if first || a.down.Select == api.SelectMax && v < lim || a.down.Select == api.SelectMin && v > lim {
			lim, first = v, false
		}
	}
	return min(lim, current)
}

// forget drops what no window or period can reach any more.
func (a *Autoscaler) forget(now time.Time) {
	keep := time.Duration(max(*a.up.StabilizationWindow, *a.down.StabilizationWindow))
	for _, r := range [2]api.ScaleRules{a.up, a.down} {
		for _, p := range r.Policies {
			keep = max(keep, time.Duration(p.Period))
		}
	}
	cut := now.Add(-keep)
	drop := func(xs []stamped) []stamped {
		i := 0
		for i < len(xs) && !xs[i].at.After(cut) {
			i++
		}
		return append(xs[:0], xs[i:]...)
	}
	a.recs, a.events = drop(a.recs), drop(a.events)
}

// message says why the count is what it is.
func (a *Autoscaler) message(d Decision) string {
	switch d.Limited {
	case "ScaleUpStabilized":
		return "recent recommendations were lower: applying the lowest of the scale-up window"
	case "ScaleDownStabilized":
		return "recent recommendations were higher: applying the highest of the scale-down window"
	case "ScaleUpLimit":
		return "the desired count rises faster than the scale-up policies allow"
	case "ScaleDownLimit":
		return "the desired count falls faster than the scale-down policies allow"
	case "TooManyReplicas":
		return "the desired count is above max"
	case "TooFewReplicas":
		return "the desired count is below min"
	}
	return "the desired count is within range"
}
