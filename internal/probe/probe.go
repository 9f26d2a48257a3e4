// Package probe runs the health probes of service replicas (issue 44 §1):
// liveness, readiness and startup probes (api.Probe) of kind http, tcp or
// exec, with Kubernetes' semantics (initialDelay, period, timeout,
// failureThreshold, successThreshold). Check runs one probe against a
// replica; a Tracker
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

	"github.com/hetsched/hetsched/internal/api"
)

// Defaults, as Kubernetes': a probe every 10 s, 1 s to answer, 3 failures
// in a row fail it, 1 success passes it.
const (
	DefaultPeriod           = 10 * time.Second
	DefaultTimeout          = time.Second
	DefaultFailureThreshold = 3
	DefaultSuccessThreshold = 1
)

func or(d *api.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return time.Duration(*d)
}

// Checker runs checks. Its HTTP checks open a new connection each time,
// as the kubelet's do: a replica's probe sees what a new client would,
// and no idle connection is held to each of thousands of replicas.
type Checker struct {
	client *http.Client
}

// NewChecker makes a Checker.
func NewChecker() *Checker {
	return &Checker{client: &http.Client{
		Transport:     &http.Transport{DisableKeepAlives: true, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// Check runs p once against a replica listening on host (its node's
// address, or 127.0.0.1 on the agent's own node), within p's timeout;
// nil is success. exec runs the command where the agent runs (env adds
// to the agent's environment; its PWD, when set, is the command's working
// directory).
func (c *Checker) Check(ctx context.Context, p *api.Probe, host string, env []string) error {
	ctx, cancel := context.WithTimeout(ctx, or(p.Timeout, DefaultTimeout))
	defer cancel()
	switch {
	case p.HTTP != nil:
		url := "http://" + net.JoinHostPort(host, strconv.Itoa(p.HTTP.Port)) + p.HTTP.Path
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("User-Agent", "hetsched-probe")
		resp, err := c.client.Do(req)
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
		conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(p.TCP.Port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case p.Exec != nil:
		cmd := exec.CommandContext(ctx, p.Exec.Command[0], p.Exec.Command[1:]...)
		cmd.Env = append(cmd.Environ(), env...)
		for _, kv := range env {
			if dir, ok := strings.CutPrefix(kv, "PWD="); ok {
				cmd.Dir = dir // the replica's working directory
			}
		}
		cmd.WaitDelay = time.Second
		err := cmd.Run()
		if ctx.Err() != nil {
			return fmt.Errorf("exec %s: timed out after %s", p.Exec.Command[0], or(p.Timeout, DefaultTimeout))
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
	p          *api.Probe
	kind       string
	next       time.Time
	ok         bool
	succ, fail int
	last       string // the last failure's reason
}

// NewTracker tracks p of kind for a replica that started at started: its
// first check is due after the initial delay.
func NewTracker(p *api.Probe, kind string, started time.Time) *Tracker {
	return &Tracker{p: p, kind: kind, next: started.Add(or(p.InitialDelay, 0)), ok: kind == api.ProbeLiveness}
}

// Due reports whether a check is due at now.
func (t *Tracker) Due(now time.Time) bool { return !now.Before(t.next) }

// Next is when the next check is due.
func (t *Tracker) Next() time.Time { return t.next }

// Observe records the result of the check made at now (err nil: success)
// and schedules the next one a period later; it reports whether the state
// changed.
func (t *Tracker) Observe(now time.Time, err error) bool {
	t.next = now.Add(or(t.p.Period, DefaultPeriod))
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

// Failed reports whether the probe failed FailureThreshold times in a row
// (a startup probe that did: the replica is restarted).
func (t *Tracker) Failed() bool {
	return t.fail >= threshold(t.p.FailureThreshold, DefaultFailureThreshold)
}

// OK reports the probe's state: passed (alive, ready, started).
func (t *Tracker) OK() bool { return t.ok }

// Reason is why the last check failed ("" when none has).
func (t *Tracker) Reason() string { return t.last }
