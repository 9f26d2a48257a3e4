package agent

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/metrics"
)

// The reasons of hetsched_agent_task_kills_total: why the agent stopped
// an attempt whose command was running or about to run.
const (
	// The server revoked the attempt: cancelled (the task or its job),
	// preempted, timeout (the server's timer, or the supervisor's own),
	// revoked (anything else: a drain, an unhealthy device, an expiry).
	killCancelled = "cancelled"
	killPreempted = "preempted"
	killTimeout   = "timeout"
	killRevoked   = "revoked"
	// killUnassigned: the server's snapshot after a (re)connection no
	// longer had the attempt.
	killUnassigned = "unassigned"
	// killFenced: no heartbeat was acknowledged within the server's
	// notready deadline (the lease on the node was lost).
	killFenced = "fenced"
	// killStopped: the agent stopped with KillOnExit (counted by the next
	// agent on the same work dir, which reports the result).
	killStopped = "agent_stopped"
)

var killReasons = []string{killCancelled, killPreempted, killTimeout, killRevoked, killUnassigned, killFenced, killStopped}

// The results of hetsched_agent_task_exits_total: attempts that ended
// without being killed.
const (
	exitSucceeded = "succeeded" // exit code 0
	exitFailed    = "failed"    // another exit code, or the command could not start
	exitLost      = "lost"      // the shim died without a result
)

var exitResults = []string{exitSucceeded, exitFailed, exitLost}

// unassignedPrefix starts the reason of a kill by sync.
const unassignedPrefix = "not assigned to node "

// agentMetrics are the agent's collectors, on its own registry (no global
// one). Tasks are never labels; devices are the node's, bounded by its
// discovery (api.MaxNodeDevices).
type agentMetrics struct {
	reg   *prometheus.Registry
	start prometheus.Histogram
	kills *prometheus.CounterVec // reason
	exits *prometheus.CounterVec // result
	stops *prometheus.HistogramVec
}

// stopBuckets span 10 ms to an hour (the longest checkpoint grace).
var stopBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600}

// startBuckets span 1 ms to 60 s.
var startBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

func newAgentMetrics(a *Agent) *agentMetrics {
	m := &agentMetrics{
		reg: prometheus.NewRegistry(),
		start: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hetsched_agent_task_start_duration_seconds",
			Help:    "Time from the agent receiving an assignment to the attempt's supervisor process (agent-shim, which starts the command at once) running.",
			Buckets: startBuckets,
		}),
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hetsched_agent_task_kills_total",
			Help: "Task attempts that ended killed, by reason: cancelled, preempted, timeout, revoked (by the server for another reason: a drain, an unhealthy device), unassigned (missing from the server's snapshot), fenced (no heartbeat acknowledged in time), agent_stopped.",
		}, []string{"reason"}),
		exits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hetsched_agent_task_exits_total",
			Help: "Task attempts that ended without being killed, by result: succeeded (exit 0), failed (another exit code, or it could not start), lost (its supervisor died without a result).",
		}, []string{"result"}),
	}
	m.stops = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hetsched_agent_task_stop_duration_seconds",
		Help:    "Time a stopped attempt's command took to exit after its signal (the time lost to a stop), by kind (checkpoint: stopped to resume later, with the task's checkpoint signal; kill: a cancel or a timeout) and forced (true: the grace ran out and it was SIGKILLed).",
		Buckets: stopBuckets,
	}, []string{"kind", "forced"})
	for _, kind := range []string{"checkpoint", "kill"} {
		for _, forced := range []string{"false", "true"} {
			m.stops.WithLabelValues(kind, forced)
		}
	}
	for _, r := range killReasons {
		m.kills.WithLabelValues(r)
	}
	for _, r := range exitResults {
		m.exits.WithLabelValues(r)
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.BuildInfo(metrics.ReadBuild()),
		m.start, m.kills, m.exits, m.stops,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hetsched_agent_running_tasks",
			Help: "Task attempts running on this node (started or adopted, no result yet).",
		}, func() float64 {
			if x := a.x.Load(); x != nil {
				return float64(len(x.Running()))
			}
			return 0
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hetsched_agent_connected",
			Help: "1 while the agent is registered with a server and follows its assignment stream, else 0.",
		}, func() float64 {
			if a.sess.up.Load() {
				return 1
			}
			return 0
		}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hetsched_agent_heartbeat_failures_total",
			Help: "Heartbeats that got no answer or an error answer.",
		}, func() float64 { return float64(a.sess.beatFailures.Load()) }),
		deviceCollector{a},
	)
	return m
}

// ended counts an attempt's result: a kill by its reason, else an exit.
func (m *agentMetrics) ended(r executor.Result, fenced bool) {
	if st := r.Stop; st != nil && !fenced {
		kind := "kill"
		if st.Checkpoint {
			kind = "checkpoint"
		}
		m.stops.WithLabelValues(kind, strconv.FormatBool(st.Forced)).Observe(st.Took().Seconds())
	}
	switch {
	case r.TimedOut:
		m.kills.WithLabelValues(killTimeout).Inc()
	case r.Killed:
		m.kills.WithLabelValues(killReasonOf(r.Reason, fenced)).Inc()
	case r.ExitCode == -1:
		m.exits.WithLabelValues(exitLost).Inc()
	case r.ExitCode == 0:
		m.exits.WithLabelValues(exitSucceeded).Inc()
	default:
		m.exits.WithLabelValues(exitFailed).Inc()
	}
}

// killReasonOf maps a killed attempt's reason (the kill file's text:
// the agent's own, or the server's revoke reason, which is the task's
// reason as the core words it) to a kill reason.
func killReasonOf(reason string, fenced bool) string {
	reason = strings.TrimSuffix(reason, " (before the command started)") // the shim's
	switch {
	case fenced || strings.HasPrefix(reason, executor.FencedPrefix):
		return killFenced
	case strings.Contains(reason, stoppedReason):
		return killStopped
	case strings.HasPrefix(reason, unassignedPrefix):
		return killUnassigned
	// The core's reasons: "ran past its timeout 1m", "preempted by t9",
	// "cancelled by request", "job j1 cancelled"; "cancelled", the state,
	// when a task has no reason.
	case strings.HasPrefix(reason, "ran past its timeout"):
		return killTimeout
	case strings.HasPrefix(reason, "preempted by "), strings.HasPrefix(reason, "swapped out by "):
		return killPreempted // "swapped out by the gavel round: …" too
	case strings.HasPrefix(reason, "cancelled"), strings.HasSuffix(reason, " cancelled"):
		return killCancelled
	default:
		return killRevoked
	}
}

var (
	deviceHealthyDesc = prometheus.NewDesc("hetsched_agent_device_healthy",
		"1 if the device is healthy (as this agent reports it to the server), else 0.",
		[]string{"type", "model", "device"}, nil)
	deviceUtilDesc = prometheus.NewDesc("hetsched_agent_device_utilization_ratio",
		"The device's utilization (0 to 1) at the last heartbeat's sample; devices whose discovery measures it (not declared ones).",
		[]string{"type", "device"}, nil)
	deviceMemDesc = prometheus.NewDesc("hetsched_agent_device_memory_used_bytes",
		"The device's memory in use at the last heartbeat's sample; devices whose discovery measures it (not declared ones).",
		[]string{"type", "device"}, nil)
)

// deviceCollector exports the node's devices from the monitors' latest
// samples (taken with each heartbeat; a scrape samples nothing).
type deviceCollector struct{ a *Agent }

func (deviceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- deviceHealthyDesc
	ch <- deviceUtilDesc
	ch <- deviceMemDesc
}

func (c deviceCollector) Collect(ch chan<- prometheus.Metric) {
	devs := c.a.opt.Node.Devices
	c.a.mu.Lock()
	defer c.a.mu.Unlock()
	for _, d := range devs {
		s, sampled := c.a.health[d.ID]
		healthy := 1.0
		if d.Unhealthy || sampled && !s.Healthy { // as nodes() reports it
			healthy = 0
		}
		ch <- prometheus.MustNewConstMetric(deviceHealthyDesc, prometheus.GaugeValue, healthy, d.Type, d.Model, d.ID)
		if !sampled || d.Simulated {
			continue
		}
		ch <- prometheus.MustNewConstMetric(deviceUtilDesc, prometheus.GaugeValue, min(max(s.Utilization, 0), 1), d.Type, d.ID)
		ch <- prometheus.MustNewConstMetric(deviceMemDesc, prometheus.GaugeValue, float64(max(s.MemoryUsed, 0)), d.Type, d.ID)
	}
}

// serveMetrics serves GET /metrics from reg on ln (other paths: 404,
// other methods: 405) until the returned stop, which returns once the
// server's goroutine has.
func serveMetrics(ln net.Listener, reg prometheus.Gatherer, log *slog.Logger) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(log.Handler(), slog.LevelError),
		MaxRequestsInFlight: 4,
		Timeout:             20 * time.Second,
	}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close() // a scrape still running past the wait
		}
		<-done
	}
}
