// Package probe is the health probes of service replicas (issue 44 §1):
// liveness, readiness and startup probes of kind http, tcp or exec, with
// Kubernetes' semantics (initialDelay, period, timeout, failureThreshold,
// successThreshold). Check runs one probe against a replica; a Tracker
// turns the results into the probe's state, given the time (no clock of
// its own). The agent runs them; the server reads their states.
//
// Glossary:
//
//	probe     what to check (http GET, tcp connect, exec a command) and
//	          when (the timing fields)
//	kind      liveness (a failure restarts the replica), readiness (a
//	          failure takes it out of the endpoints), startup (the others
//	          wait for its first success; a failure restarts)
//	result    one check's outcome: success, or failure with why
//	state     what the results amount to: a probe's thresholds turn it
package probe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// Kinds.
const (
	Liveness  = "liveness"
	Readiness = "readiness"
	Startup   = "startup"
)

// Defaults, as Kubernetes': a probe every 10 s, 1 s to answer, 3 failures
// in a row fail it, 1 success passes it.
const (
	DefaultPeriod           = 10 * time.Second
	DefaultTimeout          = time.Second
	DefaultFailureThreshold = 3
	DefaultSuccessThreshold = 1
)

// Probe is one probe (API.md "Service": a template's liveness, readiness
// or startup). Exactly one of HTTP, TCP and Exec is set.
type Probe struct {
	HTTP             *HTTPGet  `json:"http,omitempty"`
	TCP              *TCPOpen  `json:"tcp,omitempty"`
	Exec             *ExecCmd  `json:"exec,omitempty"`
	InitialDelay     *Duration `json:"initialDelay,omitempty"`
	Period           *Duration `json:"period,omitempty"`
	Timeout          *Duration `json:"timeout,omitempty"`
	FailureThreshold int       `json:"failureThreshold,omitempty"`
	SuccessThreshold int       `json:"successThreshold,omitempty"`
}

// HTTPGet succeeds on a status from 200 to 399 to a GET of Path on Port.
type HTTPGet struct {
	Path string `json:"path"`
	Port int    `json:"port"`
}

// TCPOpen succeeds when a connection to Port opens.
type TCPOpen struct {
	Port int `json:"port"`
}

// ExecCmd succeeds when Command exits 0.
type ExecCmd struct {
	Command []string `json:"command"`
}

// Duration is a time.Duration written as "10s" in JSON.
type Duration time.Duration

// MarshalJSON writes d as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.Quote(time.Duration(d).String())), nil
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s, err := strconv.Unquote(string(b))
	if err != nil {
		return fmt.Errorf("a duration is a string such as \"10s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

func (d *Duration) or(def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return time.Duration(*d)
}

// Validate checks p as a probe of kind; an error names the field (field
// is the probe's own, "template.liveness" say).
func (p *Probe) Validate(field, kind string) error {
	n := 0
	if p.HTTP != nil {
		n++
		if !strings.HasPrefix(p.HTTP.Path, "/") || len(p.HTTP.Path) > 2048 || strings.ContainsAny(p.HTTP.Path, " \r\n") {
			return errs.Invalid(field+".http.path", "an absolute path without spaces, at most 2048 bytes, got %q", clip(p.HTTP.Path))
		}
		if err := checkPort(field+".http.port", p.HTTP.Port); err != nil {
			return err
		}
	}
	if p.TCP != nil {
		n++
		if err := checkPort(field+".tcp.port", p.TCP.Port); err != nil {
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
	if p.SuccessThreshold > 1 && kind != Readiness {
		return errs.Invalid(field+".successThreshold", "must be 1 for a %s probe (as Kubernetes'), got %d", kind, p.SuccessThreshold)
	}
	return nil
}

func checkPort(field string, port int) error {
	if port < 1 || port > 65535 {
		return errs.Invalid(field, "a port from 1 to 65535, got %d", port)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// Check runs p once against a replica listening on host (its node's
// address, or 127.0.0.1 on the agent's own node), within p's timeout;
// nil is success. exec runs the command where the agent runs (env adds
// to the agent's environment).
func Check(ctx context.Context, p *Probe, host string, env []string) error {
	ctx, cancel := context.WithTimeout(ctx, p.Timeout.or(DefaultTimeout))
	defer cancel()
	switch {
	case p.HTTP != nil:
		url := "http://" + net.JoinHostPort(host, strconv.Itoa(p.HTTP.Port)) + p.HTTP.Path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", "hetsched-probe")
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 400 {
			return fmt.Errorf("GET %s: HTTP %d", p.HTTP.Path, resp.StatusCode)
		}
		return nil
	case p.TCP != nil:
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(p.TCP.Port)))
		if err != nil {
			return err
		}
		return c.Close()
	case p.Exec != nil:
		cmd := exec.CommandContext(ctx, p.Exec.Command[0], p.Exec.Command[1:]...)
		cmd.Env = append(cmd.Environ(), env...)
		cmd.WaitDelay = time.Second
		err := cmd.Run()
		if ctx.Err() != nil {
			return fmt.Errorf("exec %s: timed out after %s", p.Exec.Command[0], p.Timeout.or(DefaultTimeout))
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("exec %s: exit code %d", p.Exec.Command[0], ee.ExitCode())
		}
		return err
	}
	return errors.New("the probe names no check")
}

// Tracker is one probe's state for one replica, from the results it is
// told of: a liveness probe starts passed (alive), a readiness or startup
// probe failed (not ready, not started) until its first success;
// FailureThreshold failures in a row fail it, SuccessThreshold successes
// in a row pass it. Due says when to run the next check.
type Tracker struct {
	p          *Probe
	kind       string
	next       time.Time
	ok         bool
	succ, fail int
	last       string // the last failure's reason
}

// NewTracker tracks p of kind for a replica that started at started: its
// first check is due after the initial delay.
func NewTracker(p *Probe, kind string, started time.Time) *Tracker {
	return &Tracker{p: p, kind: kind, next: started.Add(p.InitialDelay.or(0)), ok: kind == Liveness}
}

// Due reports whether a check is due at now.
func (t *Tracker) Due(now time.Time) bool { return !now.Before(t.next) }

// Next is when the next check is due.
func (t *Tracker) Next() time.Time { return t.next }

// Observe records the result of the check made at now (err nil: success)
// and schedules the next one a period later; it reports whether the state
// changed.
func (t *Tracker) Observe(now time.Time, err error) bool {
	t.next = now.Add(t.p.Period.or(DefaultPeriod))
	was := t.ok
	if err == nil {
		t.fail = 0
		t.succ++
		if t.succ >= max(t.p.SuccessThreshold, DefaultSuccessThreshold) {
			t.ok = true
		}
	} else {
		t.succ = 0
		t.fail++
		t.last = err.Error()
		if t.fail >= threshold(t.p.FailureThreshold, DefaultFailureThreshold) {
			t.ok = false
		}
	}
	return t.ok != was
}

func threshold(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// OK reports the probe's state: passed (alive, ready, started).
func (t *Tracker) OK() bool { return t.ok }

// Reason is why the last check failed ("" when none has).
func (t *Tracker) Reason() string { return t.last }
