// Package autoscale is the replica autoscaler of services (issue 44 §2):
// the algorithm of Kubernetes' HorizontalPodAutoscaler v2
// (pkg/controller/podautoscaler, v1.36) as a pure type. Observations and
// the time come in; a replica count and why come out; no clock, no I/O,
// no goroutine. The server's service controller and the simulator drive
// the same type.
//
// Glossary:
//
//	Spec          a service's autoscale field: min, max, metrics, behavior
//	metric        a resource's utilization of the replicas' requests
//	              ("cpu", "nvidia.com/gpu": target a percent), or a custom
//	              value the replicas report (target a value per replica)
//	sample        what one replica reported for one metric (missing: none)
//	recommendation the replica count the metrics ask for now, before the
//	              stabilization windows and the rate limits
//	scale event   a change of the replica count this autoscaler decided,
//	              what the rate limits count
package autoscale

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// Tolerance is the HPA's: a metric within 10 % of its target asks for no
// change.
const Tolerance = 0.1

// MaxReplicas bounds Spec.Max.
const MaxReplicas = 100_000

// MaxMetrics bounds Spec.Metrics.
const MaxMetrics = 16

// Spec is how a service scales (API.md "Service": autoscale).
type Spec struct {
	Min      int      `json:"min"`
	Max      int      `json:"max"`
	Metrics  []Metric `json:"metrics"`
	Behavior Behavior `json:"behavior,omitempty"`
}

// Metric is one metric and its target. Exactly one of Resource (a
// resource the replicas request: the target is a utilization, "70%") and
// Custom (a value the replicas report: the target is a value per
// replica, "100") is set.
type Metric struct {
	Resource string `json:"resource,omitempty"`
	Custom   string `json:"custom,omitempty"`
	Target   string `json:"target"`
}

// Behavior is the HPA's: the scale-up and scale-down rules.
type Behavior struct {
	ScaleUp   *Rules `json:"scaleUp,omitempty"`
	ScaleDown *Rules `json:"scaleDown,omitempty"`
}

// Rules limit one direction: its stabilization window (the highest
// recommendation of the window for scale-down, the lowest for scale-up)
// and its rate policies, of which Select picks the one allowing the most
// change ("Max", the default), the least ("Min"), or none ("Disabled").
type Rules struct {
	StabilizationWindow *Duration `json:"stabilizationWindow,omitempty"`
	Policies            []Policy  `json:"policies,omitempty"`
	Select              string    `json:"select,omitempty"`
}

// Policy allows a change of Value replicas ("Pods") or Value percent
// ("Percent") of the count at the start of each Period.
type Policy struct {
	Type   string   `json:"type"`
	Value  int      `json:"value"`
	Period Duration `json:"period"`
}

// Duration is a time.Duration written as "5m" in JSON.
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("a duration is a string such as \"5m\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// The HPA's defaults (autoscaling/v2): scale up by 100 % or 4 replicas
// each 15 s, whichever is more, at once; scale down by up to 100 % each
// 15 s, after the highest recommendation of the last 5 minutes.
var (
	defaultUp = Rules{StabilizationWindow: durationPtr(0), Select: SelectMax,
		Policies: []Policy{{Type: PolicyPercent, Value: 100, Period: Duration(15 * time.Second)}, {Type: PolicyPods, Value: 4, Period: Duration(15 * time.Second)}}}
	defaultDown = Rules{StabilizationWindow: durationPtr(5 * time.Minute), Select: SelectMax,
		Policies: []Policy{{Type: PolicyPercent, Value: 100, Period: Duration(15 * time.Second)}}}
)

func durationPtr(d time.Duration) *Duration { v := Duration(d); return &v }

// Policy types and selections.
const (
	PolicyPods     = "Pods"
	PolicyPercent  = "Percent"
	SelectMax      = "Max"
	SelectMin      = "Min"
	SelectDisabled = "Disabled"
)

// target is a metric's parsed target.
type target struct {
	percent int     // a resource's utilization, 1..
	value   float64 // a custom metric's value per replica
}

// parseTarget reads a resource metric's "70%" or a custom one's "100".
func parseTarget(field string, m Metric) (target, error) {
	if m.Resource != "" {
		p, ok := strings.CutSuffix(m.Target, "%")
		n, err := strconv.Atoi(p)
		if !ok || err != nil || n < 1 || n > 10_000 {
			return target{}, errs.Invalid(field+".target", "a resource's target is a utilization from 1%% to 10000%%, got %q", m.Target)
		}
		return target{percent: n}, nil
	}
	v, err := strconv.ParseFloat(m.Target, 64)
	if err != nil || !(v > 0) || v > 1e15 {
		return target{}, errs.Invalid(field+".target", "a custom metric's target is a positive value per replica, got %q", m.Target)
	}
	return target{value: v}, nil
}

// Validate checks s; an error names the field.
func (s *Spec) Validate() error {
	if s.Min < 1 || s.Min > MaxReplicas {
		return errs.Invalid("autoscale.min", "must be from 1 to %d, got %d", MaxReplicas, s.Min)
	}
	if s.Max < s.Min || s.Max > MaxReplicas {
		return errs.Invalid("autoscale.max", "must be from min (%d) to %d, got %d", s.Min, MaxReplicas, s.Max)
	}
	if len(s.Metrics) == 0 || len(s.Metrics) > MaxMetrics {
		return errs.Invalid("autoscale.metrics", "must list 1 to %d metrics, got %d", MaxMetrics, len(s.Metrics))
	}
	for i, m := range s.Metrics {
		f := fmt.Sprintf("autoscale.metrics[%d]", i)
		if (m.Resource == "") == (m.Custom == "") {
			return errs.Invalid(f, "names exactly one of resource and custom")
		}
		if len(m.Resource)+len(m.Custom) > 253 {
			return errs.Invalid(f, "a metric's name is at most 253 characters")
		}
		if _, err := parseTarget(f, m); err != nil {
			return err
		}
	}
	for i, r := range []*Rules{s.Behavior.ScaleUp, s.Behavior.ScaleDown} {
		if r == nil {
			continue
		}
		f := "autoscale.behavior." + [2]string{"scaleUp", "scaleDown"}[i]
		if w := r.StabilizationWindow; w != nil && (*w < 0 || time.Duration(*w) > time.Hour) {
			return errs.Invalid(f+".stabilizationWindow", "must be from 0 to 1h, got %s", time.Duration(*w))
		}
		switch r.Select {
		case "", SelectMax, SelectMin, SelectDisabled:
		default:
			return errs.Invalid(f+".select", "is Max, Min or Disabled, got %q", r.Select)
		}
		if len(r.Policies) > 10 {
			return errs.Invalid(f+".policies", "at most 10, got %d", len(r.Policies))
		}
		for i, p := range r.Policies {
			pf := fmt.Sprintf("%s.policies[%d]", f, i)
			if p.Type != PolicyPods && p.Type != PolicyPercent {
				return errs.Invalid(pf+".type", "is Pods or Percent, got %q", p.Type)
			}
			if p.Value < 1 || p.Value > MaxReplicas {
				return errs.Invalid(pf+".value", "must be from 1 to %d, got %d", MaxReplicas, p.Value)
			}
			if p.Period <= 0 || time.Duration(p.Period) > 30*time.Minute {
				return errs.Invalid(pf+".period", "must be over 0 and at most 30m, got %s", time.Duration(p.Period))
			}
		}
	}
	return nil
}

// rules is r with the HPA's defaults filled in (def: the direction's).
func rules(r *Rules, def Rules) Rules {
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
		out.Select = SelectMax
	}
	return out
}
