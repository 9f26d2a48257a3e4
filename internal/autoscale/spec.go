// Package autoscale is the replica autoscaler of services (issue 44 §2):
// the algorithm of Kubernetes' HorizontalPodAutoscaler v2
// (pkg/controller/podautoscaler, v1.36) as a pure type. The spec
// (api.Autoscale), observations and the time come in; a replica count and
// why come out; no clock, no I/O, no goroutine. The server's service
// controller and the simulator drive the same type.
//
// Glossary:
//
//	metric         a resource's utilization of the replicas' requests
//	               ("cpu", "nvidia.com/gpu": target a percent), or a
//	               custom value the replicas report (target a value per
//	               replica)
//	sample         what one replica reported for one metric (missing: none)
//	recommendation the replica count the metrics ask for now, before
//	               the stabilization windows and rate limits
//	scale event    a change of the replica count this autoscaler decided,
//	               what the rate limits count
package autoscale

import (
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

// Tolerance is the HPA's: a metric within 10 % of its target asks for no
// change.
const Tolerance = 0.1

// The HPA's defaults (autoscaling/v2): scale up by 100 % or 4 replicas
// each 15 s, whichever is more, at once; scale down by up to 100 % each
// 15 s, after the highest recommendation of the last 5 minutes.
var (
	defaultUp = api.ScaleRules{StabilizationWindow: durationPtr(0), Select: api.SelectMax,
		Policies: []api.ScalePolicy{{Type: api.ScalePercent, Value: 100, Period: api.Duration(15 * time.Second)}, {Type: api.ScalePods, Value: 4, Period: api.Duration(15 * time.Second)}}}
	defaultDown = api.ScaleRules{StabilizationWindow: durationPtr(5 * time.Minute), Select: api.SelectMax,
		Policies: []api.ScalePolicy{{Type: api.ScalePercent, Value: 100, Period: api.Duration(15 * time.Second)}}}
)

func durationPtr(d time.Duration) *api.Duration { v := api.Duration(d); return &v }

// target is a metric's parsed target.
type target struct {
	percent int     // a resource's utilization, 1..
	value   float64 // a custom metric's value per replica
}

// rules is r with the HPA's defaults filled in (def: the direction's).
func rules(r *api.ScaleRules, def api.ScaleRules) api.ScaleRules {
	if r == nil {
		return def
	}
	out := *r
	if out.StabilizationWindow == nil {
		out.StabilizationWindow = def.StabilizationWindow
	}
	if len(out.Policies) == 0 {
		out.Policies = def.Policies
	}
	if out.Select == "" {
		out.Select = api.SelectMax
	}
	return out
}
