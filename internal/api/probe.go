package api

import (
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// Probe kinds.
const (
	ProbeLiveness  = "liveness"
	ProbeReadiness = "readiness"
	ProbeStartup   = "startup"
)

// Probe is a service replica's health probe (API.md "Service": a
// template's liveness, readiness or startup), run by package probe with
// Kubernetes' semantics. Exactly one of HTTP, TCP and Exec is set.
type Probe struct {
	HTTP             *HTTPProbe `json:"http,omitempty"`
	TCP              *TCPProbe  `json:"tcp,omitempty"`
	Exec             *ExecProbe `json:"exec,omitempty"`
	InitialDelay     *Duration  `json:"initialDelay,omitempty"`
	Period           *Duration  `json:"period,omitempty"`
	Timeout          *Duration  `json:"timeout,omitempty"`
	FailureThreshold int        `json:"failureThreshold,omitempty"`
	SuccessThreshold int        `json:"successThreshold,omitempty"`
}

// HTTPProbe passes on a status from 200 to 399 to a GET of Path on Port.
type HTTPProbe struct {
	Path string `json:"path"`
	Port int    `json:"port"`
}

// TCPProbe passes when a connection to Port opens.
type TCPProbe struct {
	Port int `json:"port"`
}

// ExecProbe passes when Command exits 0.
type ExecProbe struct {
	Command []string `json:"command"`
}

// Validate checks p as a probe of kind; an error names the field (field
// is the probe's own, "template.liveness" say).
func (p *Probe) Validate(field, kind string) error {
	n := 0
	if p.HTTP != nil {
		n++
		if !strings.HasPrefix(p.HTTP.Path, "/") || len(p.HTTP.Path) > 2048 || strings.ContainsAny(p.HTTP.Path, " \r\n") {
			return errs.Invalid(field+".http.path", "an absolute path without spaces, at most 2048 bytes, got %q", errs.Clip(p.HTTP.Path))
		}
		if err := checkProbePort(field+".http.port", p.HTTP.Port); err != nil {
			return err
		}
	}
	if p.TCP != nil {
		n++
		if err := checkProbePort(field+".tcp.port", p.TCP.Port); err != nil {
			return err
		}
	}
	if p.Exec != nil {
		n++
		if len(p.Exec.Command) == 0 || len(p.Exec.Command) > 256 || p.Exec.Command[0] == "" {
			return errs.Invalid(field+".exec.command", "a command of 1 to 256 words, the first not empty")
		}
	}
	if n != 1 {
		return errs.Invalid(field, "names exactly one of http, tcp and exec, got %d", n)
	}
	for i, d := range []*Duration{p.InitialDelay, p.Period, p.Timeout} {
		name := [3]string{"initialDelay", "period", "timeout"}[i]
		if d != nil && (*d < 0 || time.Duration(*d) > time.Hour || i > 0 && *d == 0) {
			return errs.Invalid(field+"."+name, "must be over 0 (initialDelay: 0 or more) and at most 1h, got %s", time.Duration(*d))
		}
	}
	if p.FailureThreshold < 0 || p.FailureThreshold > 1000 {
		return errs.Invalid(field+".failureThreshold", "must be from 1 to 1000, got %d", p.FailureThreshold)
	}
	if p.SuccessThreshold < 0 || p.SuccessThreshold > 1000 {
		return errs.Invalid(field+".successThreshold", "must be from 1 to 1000, got %d", p.SuccessThreshold)
	}
	if p.SuccessThreshold > 1 && kind != ProbeReadiness {
		return errs.Invalid(field+".successThreshold", "must be 1 for a %s probe (as Kubernetes'), got %d", kind, p.SuccessThreshold)
	}
	return nil
}

func checkProbePort(field string, port int) error {
	if port < 1 || port > 65535 {
		return errs.Invalid(field, "a port from 1 to 65535, got %d", port)
	}
	return nil
}
