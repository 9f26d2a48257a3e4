package agent

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/hetsched/hetsched/internal/agent/discover"
	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/metrics/metricstest"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

// scrape GETs http://addr/metrics, which must answer 200.
func scrape(t *testing.T, addr string) string {
	t.Helper()
	code, b := get(t, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, b)
	}
	return string(b)
}

// sample is the value of series (name{labels} as exposed, labels in name
// order) in a scrape, and whether it is there.
func sample(text, series string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// wantSamples checks series values in a scrape.
func wantSamples(t *testing.T, text string, want map[string]float64) {
	t.Helper()
	for series, w := range want {
		if v, ok := sample(text, series); !ok || v != w {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, w)
		}
	}
}

func metricsOptions(t *testing.T, base, name string) Options {
	opt := declaredOptions(t, base, name, devicesFile(t, twoGPUs), t.TempDir())
	opt.MetricsAddr = "127.0.0.1:0"
	return opt
}

// TestAgentMetricsTasks: the agent's /metrics follows real tasks: running
// while one runs, its start latency, exits by result and kills by reason
// (every label value there from the start, at 0), and the scrape passes
// promlint and promtool.
func TestAgentMetricsTasks(t *testing.T) {
	base := servertest.Start(t, "nodes: []\n")
	a, _ := startAgentWith(t, metricsOptions(t, base, "n1"))
	addr := a.MetricsListenAddr()
	if addr == "" {
		t.Fatal("the agent serves no metrics")
	}
	text := scrape(t, addr)
	zero := map[string]float64{
		"hetsched_agent_running_tasks":                     0,
		"hetsched_agent_connected":                         1,
		"hetsched_agent_task_start_duration_seconds_count": 0,
		`hetsched_agent_task_exits_total{result="failed"}`: 0,
		`hetsched_agent_task_exits_total{result="lost"}`:   0,
	}
	for _, r := range killReasons {
		zero[`hetsched_agent_task_kills_total{reason="`+r+`"}`] = 0
	}
	wantSamples(t, text, zero)
	for _, name := range []string{"hetsched_agent_heartbeat_failures_total ", "hetsched_build_info{commit=", "go_goroutines ", "process_cpu_seconds_total "} {
		if !strings.Contains(text, "\n"+name) {
			t.Errorf("the scrape lacks %s", name)
		}
	}

	gate := filepath.Join(t.TempDir(), "go")
	post(t, base+"/api/v1/tasks", `{"id":"ok","priority":1,"resources":{"cpu":"1"},"command":["sh","-c","while [ ! -e `+gate+` ]; do sleep 0.02; done"]}`)
	waitState(t, base, "ok", 30*time.Second, "running")
	// The agent reports running once the shim started: both are counted.
	text = scrape(t, addr)
	wantSamples(t, text, map[string]float64{
		"hetsched_agent_running_tasks":                                  1,
		"hetsched_agent_task_start_duration_seconds_count":              1,
		`hetsched_agent_task_start_duration_seconds_bucket{le="60"}`:    1,
		`hetsched_agent_task_start_duration_seconds_bucket{le="+Inf"}`:  1,
		`hetsched_agent_task_exits_total{result="succeeded"}`:           0,
		`hetsched_agent_task_start_duration_seconds_bucket{le="0.001"}`: 0,
	})
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The agent counts a result before it reports it.
	waitState(t, base, "ok", 30*time.Second, "succeeded")
	wantSamples(t, scrape(t, addr), map[string]float64{
		"hetsched_agent_running_tasks":                        0,
		`hetsched_agent_task_exits_total{result="succeeded"}`: 1,
	})

	post(t, base+"/api/v1/tasks", `{"id":"bad","priority":1,"resources":{"cpu":"1"},"command":["sh","-c","exit 3"]}`)
	waitState(t, base, "bad", 30*time.Second, "failed")
	wantSamples(t, scrape(t, addr), map[string]float64{
		`hetsched_agent_task_exits_total{result="failed"}`:    1,
		`hetsched_agent_task_exits_total{result="succeeded"}`: 1,
	})

	// Killed: the server times one out, cancels one and preempts one (the
	// urgent task needs the node's 8 CPUs); the agent counts each kill
	// once the attempt is gone, after the server's state changed.
	post(t, base+"/api/v1/tasks", `{"id":"slow","priority":1,"timeout":"300ms","resources":{"cpu":"1"},"command":["sleep","300"]}`)
	post(t, base+"/api/v1/tasks", `{"id":"cancelme","priority":1,"resources":{"cpu":"1"},"command":["sleep","300"]}`)
	waitState(t, base, "cancelme", 30*time.Second, "running")
	cancelTask(t, base, "cancelme")
	waitState(t, base, "slow", 30*time.Second, "timeout")
	post(t, base+"/api/v1/tasks", `{"id":"low","priority":3,"resources":{"cpu":"8"},"command":["sleep","300"]}`)
	waitState(t, base, "low", 30*time.Second, "running")
	post(t, base+"/api/v1/tasks", `{"id":"urgent","priority":0,"resources":{"cpu":"8"},"command":["true"]}`)
	waitState(t, base, "urgent", 30*time.Second, "succeeded")
	waitFor(t, 30*time.Second, func() bool {
		text = scrape(t, addr)
		n := 0.0
		for _, r := range killReasons {
			v, _ := sample(text, `hetsched_agent_task_kills_total{reason="`+r+`"}`)
			n += v
		}
		return n == 3
	}, "three kills counted")
	wantSamples(t, text, map[string]float64{
		`hetsched_agent_task_kills_total{reason="timeout"}`:   1,
		`hetsched_agent_task_kills_total{reason="cancelled"}`: 1,
		`hetsched_agent_task_kills_total{reason="preempted"}`: 1,
		`hetsched_agent_task_kills_total{reason="revoked"}`:   0,
		`hetsched_agent_task_exits_total{result="failed"}`:    1,
		`hetsched_agent_task_exits_total{result="succeeded"}`: 2,
	})
	// low runs again once urgent is done: 6 or 7 starts, 0 or 1 running.
	if v, _ := sample(text, "hetsched_agent_task_start_duration_seconds_count"); v != 6 && v != 7 {
		t.Errorf("task_start_duration_seconds_count %v, want 6 or 7", v)
	}
	if v, _ := sample(text, "hetsched_agent_running_tasks"); v > 1 {
		t.Errorf("running_tasks %v after the kills, want at most 1", v)
	}
	metricstest.Lint(t, text)
}

// cancelTask cancels a task through the API.
func cancelTask(t *testing.T, base, id string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, base+"/api/v1/tasks/"+id, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel %s: %d", id, resp.StatusCode)
	}
}

// fakeMonitor reports fixed samples, as NVML would.
type fakeMonitor map[string]discover.DeviceSample

func (m fakeMonitor) Sample() (map[string]discover.DeviceSample, error) { return m, nil }

// TestAgentMetricsDevices: each of the node's devices has its health;
// devices whose monitor measures them (not declared ones) also have
// their utilization and memory in use, from the heartbeat's sample.
func TestAgentMetricsDevices(t *testing.T) {
	base := servertest.Start(t, "nodes: []\n")
	opt := declaredOptions(t, base, "n1", devicesFile(t, "devices:\n  - {type: nvidia.com/gpu, id: \"0\", model: L4}\n  - {type: nvidia.com/gpu, id: \"1\", model: L4, unhealthy: true}\n"), t.TempDir())
	opt.MetricsAddr = "127.0.0.1:0"
	opt.Node.Devices = append(opt.Node.Devices,
		api.Device{Type: "nvidia.com/gpu", ID: "GPU-a", Model: "H100", Memory: 80 << 30},
		api.Device{Type: "nvidia.com/gpu", ID: "GPU-b", Model: "H100", Memory: 80 << 30})
	opt.Monitors = append(opt.Monitors, fakeMonitor{
		"GPU-a": {Utilization: 0.25, MemoryUsed: 3 << 30, Healthy: true},
		"GPU-b": {Utilization: 1.5, Healthy: false, Reason: "XID 79"},
	})
	a, _ := startAgentWith(t, opt)
	var text string
	waitFor(t, 30*time.Second, func() bool {
		text = scrape(t, a.MetricsListenAddr())
		_, ok := sample(text, `hetsched_agent_device_utilization_ratio{device="GPU-a",type="nvidia.com/gpu"}`)
		return ok
	}, "a heartbeat's device sample")
	wantSamples(t, text, map[string]float64{
		`hetsched_agent_device_healthy{device="0",model="L4",type="nvidia.com/gpu"}`:       1,
		`hetsched_agent_device_healthy{device="1",model="L4",type="nvidia.com/gpu"}`:       0,
		`hetsched_agent_device_healthy{device="GPU-a",model="H100",type="nvidia.com/gpu"}`: 1,
		`hetsched_agent_device_healthy{device="GPU-b",model="H100",type="nvidia.com/gpu"}`: 0,
		`hetsched_agent_device_utilization_ratio{device="GPU-a",type="nvidia.com/gpu"}`:    0.25,
		`hetsched_agent_device_utilization_ratio{device="GPU-b",type="nvidia.com/gpu"}`:    1, // clamped
		`hetsched_agent_device_memory_used_bytes{device="GPU-a",type="nvidia.com/gpu"}`:    3 << 30,
		`hetsched_agent_device_memory_used_bytes{device="GPU-b",type="nvidia.com/gpu"}`:    0,
	})
	// Declared devices measure nothing: no utilization or memory for them.
	for _, m := range []string{"utilization_ratio", "memory_used_bytes"} {
		if strings.Contains(text, `hetsched_agent_device_`+m+`{device="0"`) {
			t.Errorf("a declared device has %s", m)
		}
	}
	if n := strings.Count(text, "\nhetsched_agent_device_healthy{"); n != 4 {
		t.Errorf("%d device_healthy series, want one per device (4)", n)
	}
	metricstest.Lint(t, text)
}

// TestAgentMetricsEndpoint: only GET /metrics is served (404 for other
// paths, 405 for other methods), not at all without MetricsAddr, and not
// once the agent stopped; a taken address stops Run unless best-effort.
func TestAgentMetricsEndpoint(t *testing.T) {
	base := servertest.Start(t, "nodes: []\n")
	a, stop := startAgentWith(t, metricsOptions(t, base, "n1"))
	addr := a.MetricsListenAddr()
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/metrics", 200}, {"HEAD", "/metrics", 200}, {"GET", "/", 404}, {"GET", "/metrics/x", 404},
		{"GET", "/debug/pprof/", 404}, {"POST", "/metrics", 405}, {"DELETE", "/metrics", 405},
	} {
		req, _ := http.NewRequest(c.method, "http://"+addr+c.path, nil)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, resp.StatusCode, c.code)
		}
	}
	stop()
	if got := a.MetricsListenAddr(); got != "" {
		t.Errorf("a stopped agent serves metrics at %q", got)
	}
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after the agent stopped", addr)
	}

	off, _ := startAgentWith(t, declaredOptions(t, base, "n2", devicesFile(t, twoGPUs), t.TempDir()))
	if got := off.MetricsListenAddr(); got != "" {
		t.Errorf("an agent without MetricsAddr serves metrics at %q", got)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	opt := metricsOptions(t, base, "n3")
	opt.MetricsAddr = taken.Addr().String()
	b, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := b.Run(ctx); err == nil || !strings.Contains(err.Error(), "metrics-listen") {
		t.Errorf("Run on a taken metrics address: %v, want a metrics-listen error", err)
	}
	opt.MetricsBestEffort, opt.Node.Name = true, "n4"
	best, _ := startAgentWith(t, opt)
	if got := best.MetricsListenAddr(); got != "" {
		t.Errorf("a best-effort agent on a taken address serves metrics at %q", got)
	}
}

// TestMetricsServerStops: the metrics server's goroutines are gone once
// its stop returns, even with a connection left open.
func TestMetricsServerStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "hetsched_test_total", Help: "A test counter."}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := serveMetrics(ln, reg, slog.New(slog.DiscardHandler))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(b, []byte("hetsched_test_total 0")) {
		t.Fatalf("scrape %q", b)
	}
	idle, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second) // a connection that sends nothing
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	stop()
	tr.CloseIdleConnections()
	if c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second); err == nil {
		c.Close()
		t.Error("the listener is still open after stop")
	}
}

// TestKillReasons: a killed attempt's reason (the kill file's text, which
// the agent wrote) names the agent's kill path.
func TestKillReasons(t *testing.T) {
	for _, c := range []struct {
		r      executor.Result
		fenced bool
		kill   string // "" when it counts as an exit
		exit   string
	}{
		{r: executor.Result{Killed: true, Reason: "cancelled by request"}, kill: killCancelled},
		{r: executor.Result{Killed: true, Reason: "cancelled"}, kill: killCancelled},
		{r: executor.Result{Killed: true, Reason: "job j1 cancelled (before the command started)"}, kill: killCancelled},
		{r: executor.Result{Killed: true, Reason: "job j1 cancelled"}, kill: killCancelled},
		{r: executor.Result{Killed: true, Reason: "preempted by t9"}, kill: killPreempted},
		{r: executor.Result{Killed: true, Reason: "swapped out by the gavel round: moved to K80"}, kill: killPreempted},
		{r: executor.Result{Killed: true, Reason: "ran past its timeout 300ms"}, kill: killTimeout},
		{r: executor.Result{Killed: true, Reason: "node n1 draining"}, kill: killRevoked},
		{r: executor.Result{Killed: true, Reason: unassignedPrefix + "n1 any more"}, kill: killUnassigned},
		{r: executor.Result{Killed: true, Reason: executor.FencedPrefix + "the agent's lease on this node expired 1ms ago"}, kill: killFenced},
		{r: executor.Result{Killed: true, Reason: "revoked"}, fenced: true, kill: killFenced},
		{r: executor.Result{Killed: true, Reason: stoppedReason + " (before the command started)"}, kill: killStopped},
		{r: executor.Result{TimedOut: true, Killed: true, ExitCode: 143}, kill: killTimeout},
		{r: executor.Result{ExitCode: 0}, exit: exitSucceeded},
		{r: executor.Result{ExitCode: 0}, fenced: true, exit: exitSucceeded},
		{r: executor.Result{ExitCode: 127}, exit: exitFailed},
		{r: executor.Result{ExitCode: -1, Reason: executor.LostReason}, exit: exitLost},
	} {
		a := &Agent{}
		a.m = newAgentMetrics(a)
		a.m.ended(c.r, c.fenced)
		for _, k := range killReasons {
			want := 0.0
			if k == c.kill {
				want = 1
			}
			if got := testutil.ToFloat64(a.m.kills.WithLabelValues(k)); got != want {
				t.Errorf("%+v fenced %v: kills{%s} %v, want %v", c.r, c.fenced, k, got, want)
			}
		}
		for _, e := range exitResults {
			want := 0.0
			if e == c.exit {
				want = 1
			}
			if got := testutil.ToFloat64(a.m.exits.WithLabelValues(e)); got != want {
				t.Errorf("%+v fenced %v: exits{%s} %v, want %v", c.r, c.fenced, e, got, want)
			}
		}
	}
}
