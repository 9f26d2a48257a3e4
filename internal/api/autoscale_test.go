package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func ptrDuration(d time.Duration) *Duration { v := Duration(d); return &v }

// TestAutoscaleRefusals: each bad field of an autoscale spec is named.
func TestAutoscaleRefusals(t *testing.T) {
	ok := Autoscale{Min: 1, Max: 3, Metrics: []AutoscaleMetric{{Resource: "cpu", Target: "70%"}}}
	for _, tc := range []struct {
		field string
		mod   func(*Autoscale)
	}{
		{"autoscale.min", func(s *Autoscale) { s.Min = 0 }},
		{"autoscale.max", func(s *Autoscale) { s.Max = 0 }},
		{"autoscale.metrics", func(s *Autoscale) { s.Metrics = nil }},
		{"autoscale.metrics[0]", func(s *Autoscale) { s.Metrics[0].Custom = "rps" }},
		{"autoscale.metrics[0].target", func(s *Autoscale) { s.Metrics[0].Target = "70" }},
		{"autoscale.metrics[0].target", func(s *Autoscale) { s.Metrics[0] = AutoscaleMetric{Custom: "rps", Target: "-1"} }},
		{"autoscale.behavior.scaleDown.stabilizationWindow", func(s *Autoscale) {
			s.Behavior.ScaleDown = &ScaleRules{StabilizationWindow: ptrDuration(2 * time.Hour)}
		}},
		{"autoscale.behavior.scaleUp.select", func(s *Autoscale) { s.Behavior.ScaleUp = &ScaleRules{Select: "Most"} }},
		{"autoscale.behavior.scaleUp.policies[0].type", func(s *Autoscale) {
			s.Behavior.ScaleUp = &ScaleRules{Policies: []ScalePolicy{{Type: "Nodes", Value: 1, Period: Duration(time.Second)}}}
		}},
		{"autoscale.behavior.scaleUp.policies[0].period", func(s *Autoscale) {
			s.Behavior.ScaleUp = &ScaleRules{Policies: []ScalePolicy{{Type: ScalePods, Value: 1}}}
		}},
	} {
		s := ok
		s.Metrics = append([]AutoscaleMetric(nil), ok.Metrics...)
		tc.mod(&s)
		err := s.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming it", tc.field, err)
		}
	}
	var s Autoscale
	if err := json.Unmarshal([]byte(`{"min":2,"max":10,"metrics":[{"resource":"cpu","target":"70%"}],"behavior":{"scaleDown":{"stabilizationWindow":"5m"}}}`), &s); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil || time.Duration(*s.Behavior.ScaleDown.StabilizationWindow) != 5*time.Minute {
		t.Errorf("API.md's example: %v, window %v", err, s.Behavior.ScaleDown.StabilizationWindow)
	}
}
