package api

import (
	"strings"
	"testing"
	"time"
)

// TestProbeValidate: each bad field of a probe is named.
func TestProbeValidate(t *testing.T) {
	for _, tc := range []struct {
		field string
		kind  string
		p     Probe
	}{
		{"p", ProbeLiveness, Probe{}},
		{"p", ProbeLiveness, Probe{TCP: &TCPProbe{Port: 80}, Exec: &ExecProbe{Command: []string{"true"}}}},
		{"p.http.path", ProbeLiveness, Probe{HTTP: &HTTPProbe{Path: "health", Port: 80}}},
		{"p.http.port", ProbeLiveness, Probe{HTTP: &HTTPProbe{Path: "/", Port: 70000}}},
		{"p.exec.command", ProbeLiveness, Probe{Exec: &ExecProbe{}}},
		{"p.period", ProbeLiveness, Probe{TCP: &TCPProbe{Port: 80}, Period: ptrDuration(0)}},
		{"p.initialDelay", ProbeLiveness, Probe{TCP: &TCPProbe{Port: 80}, InitialDelay: ptrDuration(-time.Second)}},
		{"p.successThreshold", ProbeLiveness, Probe{TCP: &TCPProbe{Port: 80}, SuccessThreshold: 2}},
		{"p.failureThreshold", ProbeReadiness, Probe{TCP: &TCPProbe{Port: 80}, FailureThreshold: -1}},
	} {
		err := tc.p.Validate("p", tc.kind)
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error naming it", tc.field, err)
		}
	}
	ok := Probe{HTTP: &HTTPProbe{Path: "/health", Port: 8080}, InitialDelay: ptrDuration(30 * time.Second), SuccessThreshold: 2}
	if err := ok.Validate("p", ProbeReadiness); err != nil {
		t.Error(err)
	}
}
