package probe

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

func dur(d time.Duration) *api.Duration { v := api.Duration(d); return &v }

// port is the port of a test server's URL.
func port(t *testing.T, url string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}

// TestCheck runs each kind against real sockets and processes: 2xx and
// 3xx pass, 5xx fails; a handler slower than the timeout fails; a closed
// port fails; a command's exit code decides.
func TestCheck(t *testing.T) {
	ctx := context.Background()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
		case "/moved":
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		case "/slow":
			time.Sleep(300 * time.Millisecond)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	p := port(t, srv.URL)
	for _, tc := range []struct {
		name string
		pr   api.Probe
		ok   bool
	}{
		{"http 200", api.Probe{HTTP: &api.HTTPProbe{Path: "/health", Port: p}}, true},
		{"http 302", api.Probe{HTTP: &api.HTTPProbe{Path: "/moved", Port: p}}, true},
		{"http 503", api.Probe{HTTP: &api.HTTPProbe{Path: "/down", Port: p}}, false},
		{"http slow", api.Probe{HTTP: &api.HTTPProbe{Path: "/slow", Port: p}, Timeout: dur(50 * time.Millisecond)}, false},
		{"tcp open", api.Probe{TCP: &api.TCPProbe{Port: p}}, true},
	} {
		if err := NewChecker().Check(ctx, &tc.pr, "127.0.0.1", nil); (err == nil) != tc.ok {
			t.Errorf("%s: %v, want ok %v", tc.name, err, tc.ok)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := NewChecker().Check(ctx, &api.Probe{TCP: &api.TCPProbe{Port: closed}}, "127.0.0.1", nil); err == nil {
		t.Error("tcp to a closed port passed")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("exec probes need sh: apt-get install -y dash")
	}
	if err := NewChecker().Check(ctx, &api.Probe{Exec: &api.ExecProbe{Command: []string{"sh", "-c", "test \"$X\" = 1"}}}, "", []string{"X=1"}); err != nil {
		t.Errorf("exec exiting 0: %v", err)
	}
	if err := NewChecker().Check(ctx, &api.Probe{Exec: &api.ExecProbe{Command: []string{"sh", "-c", "exit 3"}}}, "", nil); err == nil || !strings.Contains(err.Error(), "exit code 3") {
		t.Errorf("exec exiting 3: %v, want its code", err)
	}
	if err := NewChecker().Check(ctx, &api.Probe{Exec: &api.ExecProbe{Command: []string{"sleep", "5"}}, Timeout: dur(100 * time.Millisecond)}, "", nil); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("exec past its timeout: %v", err)
	}
}

// TestTracker: Kubernetes' thresholds and timing: the first check after
// the initial delay, one per period; liveness starts alive and fails
// after failureThreshold failures in a row (a success between resets the
// count); readiness starts not ready and passes after successThreshold.
func TestTracker(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	bad := errors.New("HTTP 503")
	live := NewTracker(&api.Probe{HTTP: &api.HTTPProbe{Path: "/", Port: 1}, InitialDelay: dur(30 * time.Second)}, api.ProbeLiveness, t0)
	if !live.OK() || live.Due(t0.Add(29*time.Second)) || !live.Due(t0.Add(30*time.Second)) {
		t.Fatalf("liveness: ok %v, due at 29 s %v, at 30 s %v; want alive, first check at 30 s", live.OK(), live.Due(t0.Add(29*time.Second)), live.Due(t0.Add(30*time.Second)))
	}
	now := t0.Add(30 * time.Second)
	for i, err := range []error{bad, bad, nil, bad, bad} {
		if live.Observe(now, err) {
			t.Fatalf("check %d changed the state; two failures in a row never fail it", i)
		}
		if !live.Next().Equal(now.Add(DefaultPeriod)) {
			t.Fatalf("next check at %v, want a period later", live.Next())
		}
		now = live.Next()
	}
	if !live.Observe(now, bad) || live.OK() || live.Reason() != "HTTP 503" {
		t.Errorf("the third failure in a row: ok %v, reason %q; want failed", live.OK(), live.Reason())
	}
	ready := NewTracker(&api.Probe{TCP: &api.TCPProbe{Port: 1}, SuccessThreshold: 2}, api.ProbeReadiness, t0)
	if ready.OK() || ready.Observe(t0, nil) || !ready.Observe(t0.Add(DefaultPeriod), nil) || !ready.OK() {
		t.Errorf("readiness with successThreshold 2: want not ready, then ready after the second success")
	}
	if s := NewTracker(&api.Probe{TCP: &api.TCPProbe{Port: 1}}, api.ProbeStartup, t0); s.OK() {
		t.Error("a startup probe passed before any check")
	}
}
