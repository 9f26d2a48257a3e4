package api

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/resource"
)

// apiMDService is API.md's example service.
const apiMDService = `{
  "name": "echo",
  "queue": "team-a",
  "replicas": 2,
  "template": {"resources": {"cpu": "1", "nvidia.com/gpu": 1}, "command": ["./serve"],
               "liveness": {"http": {"path": "/health", "port": 8080}, "initialDelay": "30s",
                            "period": "10s", "timeout": "1s", "failureThreshold": 3},
               "readiness": {"tcp": {"port": 8080}, "period": "5s"}},
  "autoscale": {"min": 2, "max": 10, "metrics": [{"resource": "cpu", "target": "70%"}],
                "behavior": {"scaleDown": {"stabilizationWindow": "5m"}}},
  "rollout": {"maxUnavailable": 1, "maxSurge": 1}
}`

func decodeService(t *testing.T, s string) Service {
	t.Helper()
	var svc Service
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&svc); err != nil {
		t.Fatal(err)
	}
	return svc
}

// TestServiceFromAPIMD: API.md's example reads and validates, its fields
// where they belong.
func TestServiceFromAPIMD(t *testing.T) {
	svc := decodeService(t, apiMDService)
	if err := svc.Validate(); err != nil {
		t.Fatal(err)
	}
	if svc.Template.Liveness == nil || svc.Template.Liveness.HTTP.Port != 8080 || svc.Template.Readiness.TCP == nil ||
		len(svc.Template.Command) != 1 || svc.Autoscale.Max != 10 || svc.Rollout.Surge() != 1 || svc.Rollout.Unavailable() != 1 {
		t.Errorf("decoded %+v", svc)
	}
	if (*Rollout)(nil).Surge() != 1 || (*Rollout)(nil).Unavailable() != 0 {
		t.Error("the rollout defaults are not 1 and 0")
	}
}

// TestServiceRefusals: each field a service cannot honour, or gets
// wrong, is named.
func TestServiceRefusals(t *testing.T) {
	for _, tc := range []struct {
		field string
		mod   func(*Service)
	}{
		{"name", func(s *Service) { s.Name = "" }},
		{"replicas", func(s *Service) { s.Replicas = -1 }},
		{"replicas", func(s *Service) { s.Replicas = 11 }}, // above autoscale.max
		{"template.id", func(s *Service) { s.Template.ID = "x" }},
		{"template.timeout", func(s *Service) { s.Template.Timeout = Duration(1) }},
		{"template.lease", func(s *Service) { s.Template.Lease = Duration(1) }},
		{"template.shards", func(s *Service) { s.Template.Shards = 2 }},
		{"template.queue", func(s *Service) { s.Template.Queue = "q" }},
		{"template.command", func(s *Service) { s.Template.Command = nil }},
		{"template.resources", func(s *Service) { s.Template.Resources = resource.List{"cpu": -1} }},
		{"template.liveness.http.path", func(s *Service) { s.Template.Liveness.HTTP.Path = "health" }},
		{"template.readiness", func(s *Service) { s.Template.Readiness.TCP = nil }},
		{"autoscale.metrics[0].target", func(s *Service) { s.Autoscale.Metrics[0].Target = "70" }},
		{"rollout", func(s *Service) { zero := 0; s.Rollout.MaxSurge, s.Rollout.MaxUnavailable = &zero, &zero }},
	} {
		svc := decodeService(t, apiMDService)
		tc.mod(&svc)
		err := svc.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error naming it", tc.field, err)
		}
	}
}
