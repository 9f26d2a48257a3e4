package api

import (
	"errors"
	"fmt"

	"github.com/hetsched/hetsched/internal/errs"
)

// Service is a long-running service (API.md "Service", issue 44): a task
// template and a replica count kept running, optionally autoscaled, rolled
// out replica by replica when the template changes.
type Service struct {
	Name      string          `json:"name"`
	Queue     string          `json:"queue,omitempty"`
	Replicas  int             `json:"replicas"`
	Template  ServiceTemplate `json:"template"`
	Autoscale *Autoscale      `json:"autoscale,omitempty"`
	Rollout   *Rollout        `json:"rollout,omitempty"`
}

// ServiceTemplate is a replica's task: any task field that suits a
// process kept running, and its probes (Task's Liveness, Readiness and
// Startup).
type ServiceTemplate = Task

// validateProbes checks the probes of a service's replica; a task of no
// service has none.
func (t *Task) validateProbes() error {
	for _, p := range []struct {
		p    *Probe
		kind string
	}{{t.Liveness, ProbeLiveness}, {t.Readiness, ProbeReadiness}, {t.Startup, ProbeStartup}} {
		if p.p == nil {
			continue
		}
		if t.Service == "" {
			return errs.Invalid(p.kind, "only a service's replicas are probed: give it in a service's template (POST /api/v1/services)")
		}
		if err := p.p.Validate(p.kind, p.kind); err != nil {
			return err
		}
	}
	if t.Service != "" {
		return ValidateID("service", t.Service)
	}
	return nil
}

// Rollout bounds a template change's rollout: at most MaxSurge replicas
// above the count, at most MaxUnavailable below it (not both 0; default
// 1 and 0: a rollout never runs fewer than the count).
type Rollout struct {
	MaxSurge       *int `json:"maxSurge,omitempty"`
	MaxUnavailable *int `json:"maxUnavailable,omitempty"`
}

// Surge is r's maxSurge, 1 by default.
func (r *Rollout) Surge() int {
	if r == nil || r.MaxSurge == nil {
		return 1
	}
	return *r.MaxSurge
}

// Unavailable is r's maxUnavailable, 0 by default.
func (r *Rollout) Unavailable() int {
	if r == nil || r.MaxUnavailable == nil {
		return 0
	}
	return *r.MaxUnavailable
}

// Validate checks s; an error names the field ("template.liveness.period").
func (s *Service) Validate() error {
	if err := ValidateID("name", s.Name); err != nil {
		return err
	}
	if s.Replicas < 0 || s.Replicas > MaxServiceReplicas {
		return errs.Invalid("replicas", "must be from 0 to %d, got %d", MaxServiceReplicas, s.Replicas)
	}
	t := &s.Template
	for _, c := range []struct {
		set  bool
		name string
		why  string
	}{
		{t.ID != "", "id", "the replicas' ids are made from the service's name"},
		{len(t.Depends) > 0, "depends", "a service's replicas depend on nothing"},
		{t.Shards > 0, "shards", "replicas are the service's count"},
		{len(t.Inputs) > 0, "inputs", "replicas are the service's count"},
		{t.Lease > 0, "lease", "a replica is a process the agent keeps running, not a lease"},
		{t.Timeout > 0, "timeout", "a replica runs until it is stopped (a liveness probe restarts a stuck one)"},
		{t.Duration > 0, "duration", "a replica runs until it is stopped"},
		{t.Queue != "", "queue", "the service's queue is every replica's (service.queue)"},
		{t.Service != "", "service", "the server names the replicas' service"},
	} {
		if c.set {
			return errs.Invalid("template."+c.name, "not for a service: %s", c.why)
		}
	}
	if len(t.Command) == 0 {
		return errs.Invalid("template.command", "a service's replicas run a command")
	}
	replica := *t
	replica.Service = s.Name
	if err := replica.Validate(); err != nil {
		var e *errs.Error
		if errors.As(err, &e) && e.Field != "" {
			e.Field = "template." + e.Field
			return e
		}
		return fmt.Errorf("template: %w", err)
	}
	if a := s.Autoscale; a != nil {
		if err := a.Validate(); err != nil {
			return err
		}
		if s.Replicas < a.Min || s.Replicas > a.Max {
			return errs.Invalid("replicas", "must be within autoscale.min and max (%d..%d) when the service autoscales, got %d", a.Min, a.Max, s.Replicas)
		}
	}
	if r := s.Rollout; r != nil {
		if v := r.Surge(); v < 0 || v > MaxServiceReplicas {
			return errs.Invalid("rollout.maxSurge", "must be from 0 to %d, got %d", MaxServiceReplicas, v)
		}
		if v := r.Unavailable(); v < 0 || v > MaxServiceReplicas {
			return errs.Invalid("rollout.maxUnavailable", "must be from 0 to %d, got %d", MaxServiceReplicas, v)
		}
		if r.Surge() == 0 && r.Unavailable() == 0 {
			return errs.Invalid("rollout", "maxSurge and maxUnavailable are not both 0: a rollout could not start")
		}
	}
	return nil
}
