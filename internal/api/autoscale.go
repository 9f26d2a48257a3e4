package api

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// MaxServiceReplicas bounds a service's replicas and its autoscale max.
const MaxServiceReplicas = 100_000

// MaxAutoscaleMetrics bounds Autoscale.Metrics.
const MaxAutoscaleMetrics = 16

// Autoscale is how a service scales (API.md "Service": autoscale), by the
// HPA v2 algorithm (package autoscale).
type Autoscale struct {
	Min      int               `json:"min"`
	Max      int               `json:"max"`
	Metrics  []AutoscaleMetric `json:"metrics"`
	Behavior ScaleBehavior     `json:"behavior,omitempty"`
}

// AutoscaleMetric is one metric and its target. Exactly one of Resource
// (a resource the replicas request: the target is a utilization, "70%")
// and Custom (a value the replicas report: the target is a value per
// replica, "100") is set.
type AutoscaleMetric struct {
	Resource string `json:"resource,omitempty"`
	Custom   string `json:"custom,omitempty"`
	Target   string `json:"target"`
	// Scrape, for a custom metric, has the server read it from each
	// ready replica's Prometheus endpoint (a gauge of the custom name:
	// the sum of its series) instead of waiting for pushes.
	Scrape *MetricScrape `json:"scrape,omitempty"`
}

// MetricScrape is where a replica serves its Prometheus metrics: Port on
// its node's address, Path (default /metrics).
type MetricScrape struct {
	Port int    `json:"port"`
	Path string `json:"path,omitempty"`
}

// PathOrDefault is s's path, /metrics when empty.
func (s *MetricScrape) PathOrDefault() string {
	if s.Path == "" {
		return "/metrics"
	}
	return s.Path
}

// ScaleBehavior is the HPA's: the scale-up and scale-down rules.
type ScaleBehavior struct {
	ScaleUp   *ScaleRules `json:"scaleUp,omitempty"`
	ScaleDown *ScaleRules `json:"scaleDown,omitempty"`
}

// ScaleRules limit one direction: its stabilization window (the highest
// recommendation of the window for scale-down, the lowest for scale-up)
// and its rate policies, of which Select picks the one allowing the most
// change ("Max", the default), the least ("Min"), or none ("Disabled").
type ScaleRules struct {
	StabilizationWindow *Duration     `json:"stabilizationWindow,omitempty"`
	Policies            []ScalePolicy `json:"policies,omitempty"`
	Select              string        `json:"select,omitempty"`
}

// ScalePolicy allows a change of Value replicas ("Pods") or Value percent
// ("Percent") of the count at the start of each Period.
type ScalePolicy struct {
	Type   string   `json:"type"`
	Value  int      `json:"value"`
	Period Duration `json:"period"`
}

// Scale policy types and selections.
const (
	ScalePods      = "Pods"
	ScalePercent   = "Percent"
	SelectMax      = "Max"
	SelectMin      = "Min"
	SelectDisabled = "Disabled"
)

// ParseTarget reads m's target: a resource's utilization percent ("70%")
// or a custom metric's value per replica ("100"); field names m in an
// error.
func (m *AutoscaleMetric) ParseTarget(field string) (percent int, value float64, err error) {
	if m.Resource != "" {
		p, ok := strings.CutSuffix(m.Target, "%")
		n, perr := strconv.Atoi(p)
		if !ok || perr != nil || n < 1 || n > 10_000 {
			return 0, 0, errs.Invalid(field+".target", "a resource's target is a utilization from 1%% to 10000%%, got %q", m.Target)
		}
		return n, 0, nil
	}
	v, perr := strconv.ParseFloat(m.Target, 64)
	if perr != nil || !(v > 0) || v > 1e15 {
		return 0, 0, errs.Invalid(field+".target", "a custom metric's target is a positive value per replica, got %q", m.Target)
	}
	return 0, v, nil
}

// Validate checks a; an error names the field (autoscale.…).
func (a *Autoscale) Validate() error {
	if a.Min < 1 || a.Min > MaxServiceReplicas {
		return errs.Invalid("autoscale.min", "must be from 1 to %d, got %d", MaxServiceReplicas, a.Min)
	}
	if a.Max < a.Min || a.Max > MaxServiceReplicas {
		return errs.Invalid("autoscale.max", "must be from min (%d) to %d, got %d", a.Min, MaxServiceReplicas, a.Max)
	}
	if len(a.Metrics) == 0 || len(a.Metrics) > MaxAutoscaleMetrics {
		return errs.Invalid("autoscale.metrics", "must list 1 to %d metrics, got %d", MaxAutoscaleMetrics, len(a.Metrics))
	}
	for i := range a.Metrics {
		m := &a.Metrics[i]
		f := fmt.Sprintf("autoscale.metrics[%d]", i)
		if (m.Resource == "") == (m.Custom == "") {
			return errs.Invalid(f, "names exactly one of resource and custom")
		}
		if len(m.Resource)+len(m.Custom) > 253 {
			return errs.Invalid(f, "a metric's name is at most 253 characters")
		}
		if _, _, err := m.ParseTarget(f); err != nil {
			return err
		}
		if s := m.Scrape; s != nil {
			switch {
			case m.Custom == "":
				return errs.Invalid(f+".scrape", "only a custom metric is scraped (a resource's use comes from the agents)")
			case s.Port < 1 || s.Port > 65535:
				return errs.Invalid(f+".scrape.port", "must be 1 to 65535, got %d", s.Port)
			case s.Path != "" && (!strings.HasPrefix(s.Path, "/") || len(s.Path) > 2048 || strings.ContainsAny(s.Path, " \r\n?#")):
				return errs.Invalid(f+".scrape.path", "must be an absolute path without spaces, query or fragment, got %q", s.Path)
			}
		}
	}
	for i, r := range []*ScaleRules{a.Behavior.ScaleUp, a.Behavior.ScaleDown} {
		if r != nil {
			if err := r.validate("autoscale.behavior." + [2]string{"scaleUp", "scaleDown"}[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *ScaleRules) validate(f string) error {
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
		if p.Type != ScalePods && p.Type != ScalePercent {
			return errs.Invalid(pf+".type", "is Pods or Percent, got %q", p.Type)
		}
		if p.Value < 1 || p.Value > MaxServiceReplicas {
			return errs.Invalid(pf+".value", "must be from 1 to %d, got %d", MaxServiceReplicas, p.Value)
		}
		if p.Period <= 0 || time.Duration(p.Period) > 30*time.Minute {
			return errs.Invalid(pf+".period", "must be over 0 and at most 30m, got %s", time.Duration(p.Period))
		}
	}
	return nil
}
