package agent

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hetsched/hetsched/internal/agent/discover"
	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
)

// Options configure a node agent.
type Options struct {
	Server string // http(s)://host:port of the control plane
	Token  string // agent token ("" when auth is off, or with a certificate)
	// TLS, for an https:// Server: the CA to trust and the agent's
	// certificate (certs.ClientTLSConfig); nil: the system's roots.
	TLS *tls.Config
	// Node is the node to register (discover.Node builds it); Monitors
	// report its devices' live state.
	Node     api.Node
	Monitors []discover.Monitor
	// WorkDir holds the tasks' directories (logs, results); it must
	// survive an agent restart for reconciliation.
	WorkDir string
	// LogsListen is where task logs are served to the server (default
	// 127.0.0.1:0); LogsURL overrides the advertised address.
	LogsListen string
	LogsURL    string
	// MetricsAddr is where GET /metrics is served (Prometheus text, the
	// agent's own registry); "" serves none. A listen failure stops Run
	// unless MetricsBestEffort, where it is logged and Run goes on
	// without metrics (the CLI's default address, taken by another agent
	// on the same machine).
	MetricsAddr       string
	MetricsBestEffort bool
	// Simulated: the node is simulated (hetsched up's fleet): its
	// heartbeats carry no CPU or memory use (this machine's is not its).
	Simulated bool
	// Grace is the SIGTERM→SIGKILL grace of a killed task (default 10s),
	// and of a checkpointed task that names none.
	Grace time.Duration
	// CheckpointRoot is where tasks' checkpoint directories live
	// (checkpoint.dir, under the tenant's name): a filesystem every node
	// mounts at the same path, so that a checkpoint follows its task
	// between nodes. Empty: WorkDir/checkpoints, on this node only.
	CheckpointRoot string
	// Shim and ShimEnv start the executor's shim (default: this binary's
	// agent-shim subcommand).
	Shim    []string
	ShimEnv []string
	// HostRoot is where /proc is read for usage (default "/").
	HostRoot string
	// KillOnExit kills the running tasks when Run returns (a sandbox such
	// as up, tests), and Run returns once their shims have exited;
	// otherwise they outlive the agent and the next one adopts them.
	// Killed so, they are reported lost (re-queued) when an agent on this
	// work dir next connects.
	KillOnExit bool
	Logger     *slog.Logger
}

// Agent runs a node's assigned tasks.
type Agent struct {
	opt Options
	log *slog.Logger
	x   atomic.Pointer[executor.Executor] // set at the first registration
	// cluster is the server's cluster id the executor's directory is for.
	cluster string
	host    hostUsage
	sess    *session
	m       *agentMetrics
	// metricsAddr is the address /metrics is served on ("" when none).
	metricsAddr atomic.Pointer[string]

	mu sync.Mutex
	// fenced marks attempts killed by fencing (reported lost).
	fenced map[key]bool
	// stopping are the attempts this agent stopped, until their results;
	// waiting, the assignments held back until those free their devices
	// (checkpoint.go).
	stopping map[key]stopping
	waiting  map[key]waitingStart
	// done is set when Run returns: held-back starts are dropped.
	done   atomic.Bool
	health map[string]discover.DeviceSample // latest monitor samples
	// fenceFile holds the deadline past which every task's shim kills it
	// (the server's notready deadline from the last acknowledged
	// heartbeat): tasks stop even if this agent is dead.
	fenceFile string
	// probes runs the service replicas' probes (probes.go); cpuSeen is
	// each running attempt's CPU at the last heartbeat (for its rate).
	probes  *prober
	cpuSeen map[key]cpuSample
}

// cpuSample is an attempt's CPU so far, and when it was read.
type cpuSample struct {
	cpu time.Duration
	at  time.Time
}

type key struct {
	task    string
	attempt int
}

// New prepares an agent; Run connects it.
func New(opt Options) (*Agent, error) {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if err := opt.Node.Validate(); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if opt.WorkDir == "" {
		return nil, errors.New("work-dir: required")
	}
	if opt.CheckpointRoot != "" && !filepath.IsAbs(opt.CheckpointRoot) {
		return nil, fmt.Errorf("checkpoint-root: must be an absolute path (the same on every node), got %q", opt.CheckpointRoot)
	}
	if opt.Grace <= 0 {
		opt.Grace = 10 * time.Second
	}
	if opt.HostRoot == "" {
		opt.HostRoot = "/"
	}
	if opt.LogsListen == "" {
		opt.LogsListen = "127.0.0.1:0"
	}
	c, err := newClient(opt.Server, opt.Token, opt.TLS)
	if err != nil {
		return nil, err
	}
	lg := opt.Logger.With("node", opt.Node.Name)
	a := &Agent{opt: opt, log: lg, host: hostUsage{root: os.DirFS(opt.HostRoot)},
		fenced: map[key]bool{}, health: map[string]discover.DeviceSample{},
		stopping: map[key]stopping{}, waiting: map[key]waitingStart{}}
	a.sess = &session{name: opt.Node.Name, c: c, r: a, rep: newReporter(), log: lg, nudge: make(chan struct{}, 1)}
	a.cpuSeen = map[key]cpuSample{}
	a.probes = newProber(lg, func() runsSource {
		if x := a.x.Load(); x != nil {
			return x
		}
		return nil
	}, a.sess.beatSoon)
	a.fenceFile = filepath.Join(opt.WorkDir, "fence")
	a.m = newAgentMetrics(a)
	a.sess.onAck = func(sent time.Time, deadline time.Duration) {
		if err := executor.WriteFence(a.fenceFile, executor.FenceDeadline(sent, deadline)); err != nil {
			lg.Error("cannot write the fence file: tasks may be killed early", "err", err)
		}
	}
	return a, nil
}

// Run serves logs, connects, recovers what a previous agent left running
// for the same cluster, and keeps the node connected until ctx ends.
// Running tasks are left running when it returns (they outlive the agent;
// the next one adopts them) unless KillOnExit.
//
// Task directories live under WorkDir/clusters/<cluster id>: a server
// started on a fresh store is a new cluster whose generated task ids
// (t1, t2, ...) must not meet the old cluster's attempts. A server that
// answers with another cluster id than the one this agent runs tasks for
// stops the agent with an error.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var runErr error
	defer func() {
		if x := a.x.Load(); x != nil {
			x.Close()
		}
	}()
	a.sess.onRegister = func(reply *agentapi.RegisterReply) error {
		if x := a.x.Load(); x != nil {
			if reply.Cluster != a.cluster {
				runErr = fmt.Errorf("the server now belongs to cluster %q, but this agent runs tasks of cluster %q: restart the agent", reply.Cluster, a.cluster)
				return runErr
			}
			return nil
		}
		if err := api.ValidateID("cluster", reply.Cluster); err != nil {
			runErr = fmt.Errorf("the server sent a bad cluster id: %w", err)
			return runErr
		}
		x, err := executor.New(executor.Options{Dir: filepath.Join(a.opt.WorkDir, "clusters", reply.Cluster),
			Shim: a.opt.Shim, ShimEnv: a.opt.ShimEnv, Logger: a.log})
		if err == nil {
			err = x.Recover()
		}
		if err != nil {
			runErr = fmt.Errorf("the work dir: %w", err)
			return runErr
		}
		a.cluster = reply.Cluster
		a.x.Store(x)
		wg.Add(1)
		go func() { defer wg.Done(); a.collect(ctx, x) }()
		return nil
	}
	if stop, err := a.listenMetrics(); err != nil {
		return err
	} else if stop != nil {
		defer stop()
	}
	ln, err := net.Listen("tcp", a.opt.LogsListen)
	if err != nil {
		return fmt.Errorf("logs-listen: %w", err)
	}
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	a.sess.logsToken = hex.EncodeToString(tok)
	a.sess.logs = a.opt.LogsURL
	if a.sess.logs == "" {
		a.sess.logs = "http://" + ln.Addr().String()
	}
	srv := &http.Server{Handler: logHandler(a.x.Load, a.sess.logsToken), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	wg.Add(1)
	go func() { defer wg.Done(); a.probes.run(ctx) }()
	a.sess.run(ctx)
	a.done.Store(true)
	cancel()
	wg.Wait()
	if x := a.x.Load(); x != nil && a.opt.KillOnExit {
		a.killAll(x)
	}
	return runErr
}

// listenMetrics serves /metrics on MetricsAddr, if set; stop (nil when
// nothing is served) shuts it down.
func (a *Agent) listenMetrics() (stop func(), err error) {
	if a.opt.MetricsAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", a.opt.MetricsAddr)
	if err != nil {
		if a.opt.MetricsBestEffort {
			a.log.Warn("cannot serve /metrics; running without metrics", "addr", a.opt.MetricsAddr, "err", err)
			return nil, nil
		}
		return nil, fmt.Errorf("metrics-listen: %w", err)
	}
	addr := ln.Addr().String()
	a.metricsAddr.Store(&addr)
	a.log.Info("serving metrics", "url", "http://"+addr+"/metrics")
	stopServer := serveMetrics(ln, a.m.reg, a.log)
	return func() {
		stopServer()
		a.metricsAddr.Store(nil)
	}, nil
}

// MetricsListenAddr is the address /metrics is served on while Run runs
// ("" when it serves none).
func (a *Agent) MetricsListenAddr() string {
	if p := a.metricsAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// Gatherer is the agent's metrics registry (what /metrics serves).
func (a *Agent) Gatherer() prometheus.Gatherer { return a.m.reg }

// stoppedReason marks tasks killed because their agent stopped; their
// results are reported lost, so the server runs them again.
const stoppedReason = "agent stopped"

// killAllWait bounds killAll's wait beyond the grace: a shim may wait
// 10s for its killed group to disappear and 2s for the output pipes
// (executor's groupGoneWait, drainWait) before it writes its result.
const killAllWait = 15 * time.Second

// killAll kills the running tasks and waits until their shims have
// written their results and exited (x.Quiet), so that nothing writes in
// the work dir once Run returns; it gives up after the grace and
// killAllWait.
//
// They run again elsewhere, so checkpointed tasks get their checkpoint
// signal and grace.
func (a *Agent) killAll(x *executor.Executor) {
	running := x.Running()
	grace := a.opt.Grace
	for _, s := range running {
		x.Checkpoint(s.Task, stoppedReason)
		grace = max(grace, s.CheckpointGrace)
	}
	deadline := time.Now().Add(grace + killAllWait)
	for !x.Quiet() {
		if time.Now().After(deadline) {
			a.log.Error("tasks still stopping after the grace; returning without them", "running", len(x.Running()), "waited", grace+killAllWait)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// KillNow SIGKILLs the commands of the running tasks without their grace
// (see executor.KillNow): while Run stops with KillOnExit, it ends the
// wait for tasks that ignore SIGTERM. It returns how many it signalled.
func (a *Agent) KillNow() int {
	x := a.x.Load()
	if x == nil {
		return 0
	}
	return x.KillNow(stoppedReason)
}

// Connected reports how many times the agent registered (for tests and
// the up command's readiness).
func (a *Agent) Connected() int64 { return a.sess.connected.Load() }

// collect turns executor results into status reports.
func (a *Agent) collect(ctx context.Context, x *executor.Executor) {
	for {
		select {
		case <-ctx.Done():
			return
		case r, ok := <-x.Results():
			if !ok {
				return
			}
			k := key{r.Task, r.Attempt}
			a.mu.Lock()
			fenced := a.fenced[k]
			delete(a.fenced, k)
			a.mu.Unlock()
			a.stopped(k)
			a.probes.remove(r.Task, r.Attempt)
			a.mu.Lock()
			delete(a.cpuSeen, k)
			a.mu.Unlock()
			up := agentapi.StatusUpdate{Task: r.Task, Attempt: r.Attempt, ExitCode: r.ExitCode, Reason: r.Reason, Stop: stopReport(r.Stop)}
			switch {
			case fenced, r.ExitCode == -1, r.Killed && strings.Contains(r.Reason, stoppedReason),
				r.Killed && strings.HasPrefix(r.Reason, executor.FencedPrefix):
				up.State = agentapi.StatusLost
			case r.TimedOut:
				up.State = agentapi.StatusTimeout
			case r.Killed:
				up.State = agentapi.StatusFailed // the server revoked it; this report is stale there
			case r.ExitCode == 0:
				up.State = agentapi.StatusSucceeded
			default:
				up.State = agentapi.StatusFailed
			}
			a.m.ended(r, fenced)
			a.log.Info("task ended", "task", r.Task, "attempt", r.Attempt, "state", up.State, "exit", r.ExitCode, "reason", r.Reason)
			a.sess.rep.add(up, func() {
				if err := x.Ack(r.Task, r.Attempt); err != nil {
					a.log.Warn("ack result", "task", r.Task, "err", err)
				}
			})
		}
	}
}

func (a *Agent) nodes() []api.Node {
	n := a.opt.Node
	n.Devices = append([]api.Device(nil), n.Devices...)
	a.mu.Lock()
	for i := range n.Devices {
		if s, ok := a.health[n.Devices[i].ID]; ok && !s.Healthy {
			n.Devices[i].Unhealthy = true
		}
	}
	a.mu.Unlock()
	return []api.Node{n}
}

func (a *Agent) beats() []agentapi.Beat {
	b := agentapi.Beat{Node: a.opt.Node.Name, Simulated: a.opt.Simulated}
	if !a.opt.Simulated {
		b.CPU, b.MemoryUsed = a.host.sample()
	}
	for _, m := range a.opt.Monitors {
		s, err := m.Sample()
		if err != nil {
			a.log.Warn("device sample failed", "err", err)
			continue
		}
		if b.Devices == nil {
			b.Devices = map[string]agentapi.DeviceBeat{}
		}
		a.mu.Lock()
		for id, d := range s {
			a.health[id] = d
			healthy := d.Healthy
			b.Devices[id] = agentapi.DeviceBeat{Utilization: min(max(d.Utilization, 0), 1), MemoryUsed: d.MemoryUsed, Healthy: &healthy, Reason: d.Reason}
		}
		a.mu.Unlock()
	}
	b.Tasks = a.taskBeats()
	return []agentapi.Beat{b}
}

// taskBeats are the running replicas' CPU rates since the last heartbeat
// and their probe states.
func (a *Agent) taskBeats() map[string]agentapi.TaskBeat {
	x := a.x.Load()
	if x == nil {
		return nil
	}
	running := x.Running()
	if len(running) == 0 {
		return nil
	}
	now := time.Now()
	out := make(map[string]agentapi.TaskBeat, min(len(running), agentapi.MaxTaskBeats))
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range running {
		if len(out) >= agentapi.MaxTaskBeats {
			break
		}
		k := key{s.Task, s.Attempt}
		tb, replica := a.probes.state(s.Task, s.Attempt)
		if !replica {
			continue // only a service's autoscaler reads a task's use
		}
		if cpu, ok := x.CPU(s.Task, s.Attempt); ok {
			if prev, seen := a.cpuSeen[k]; seen && cpu >= prev.cpu && now.After(prev.at) {
				tb.CPU = float64(cpu-prev.cpu) / float64(now.Sub(prev.at))
			}
			a.cpuSeen[k] = cpuSample{cpu, now}
		}
		out[s.Task] = tb
	}
	return out
}

func (a *Agent) sync(snapshot []agentapi.Assignment) {
	received := time.Now()
	want := make(map[string]int, len(snapshot))
	for _, as := range snapshot {
		want[as.Task] = as.Attempt
	}
	x := a.x.Load()
	for _, s := range x.Running() {
		if at, ok := want[s.Task]; !ok || at != s.Attempt {
			a.log.Warn("killing a task this node is no longer assigned", "task", s.Task, "attempt", s.Attempt)
			a.stop(x, s, unassignedPrefix+a.opt.Node.Name+" any more")
		}
	}
	a.mu.Lock()
	for k := range a.waiting {
		if at, ok := want[k.task]; !ok || at != k.attempt {
			delete(a.waiting, k)
		}
	}
	a.mu.Unlock()
	for i := range snapshot {
		a.start(snapshot[i], received)
	}
}

func (a *Agent) assign(as agentapi.Assignment) { a.start(as, time.Now()) }

// start starts an assignment received at received, unless it runs or ran
// already, or holds it back while an attempt being stopped holds one of
// its devices (checkpoint.go).
func (a *Agent) start(as agentapi.Assignment, received time.Time) {
	x := a.x.Load()
	k := key{as.Task, as.Attempt}
	running := x.Running()
	if slices.ContainsFunc(running, func(s executor.Spec) bool { return key{s.Task, s.Attempt} == k }) {
		a.launch(x, as, received) // runs already: only its report
		return
	}
	now := time.Now()
	a.mu.Lock()
	held, bound := a.heldBack(&as, running, now)
	if held {
		if _, ok := a.waiting[k]; !ok {
			a.waiting[k] = waitingStart{as: as, received: received, until: now.Add(bound)}
			time.AfterFunc(bound, a.startWaiting)
		}
	}
	a.mu.Unlock()
	if held {
		a.log.Info("waiting for a stopping task to free the devices", "task", as.Task, "attempt", as.Attempt, "atMost", bound)
		return
	}
	a.launch(x, as, received)
}

// launch starts an assignment's attempt unless it runs or ran already,
// and reports it running.
func (a *Agent) launch(x *executor.Executor, as agentapi.Assignment, received time.Time) {
	spec, err := a.specOf(x, &as)
	launched := false
	if err == nil {
		launched, err = x.Launch(spec)
	}
	if launched {
		a.m.start.Observe(time.Since(received).Seconds())
	}
	if err == nil && as.Service != "" {
		env := spec.Env
		if dir := x.WorkDir(as.Task, as.Attempt); dir != "" {
			env = maps.Clone(env)
			env["PWD"], env["HETSCHED_WORK_DIR"] = dir, dir
		}
		a.probes.add(&as, env)
	}
	if err != nil {
		a.m.exits.WithLabelValues(exitFailed).Inc()
		a.log.Error("cannot start task", "task", as.Task, "err", err)
		a.sess.rep.add(agentapi.StatusUpdate{Task: as.Task, Attempt: as.Attempt, State: agentapi.StatusFailed, ExitCode: 127, Reason: "the agent could not start it: " + err.Error()}, nil)
		return
	}
	if as.State == "scheduled" {
		a.sess.rep.add(agentapi.StatusUpdate{Task: as.Task, Attempt: as.Attempt, State: agentapi.StatusRunning}, nil)
	}
}

func (a *Agent) revoke(task string, attempt int, reason string) {
	a.log.Info("stopping task", "task", task, "attempt", attempt, "reason", reason)
	a.unwait(task, attempt)
	x := a.x.Load()
	for _, s := range x.Running() {
		if s.Task == task && s.Attempt == attempt {
			a.stop(x, s, reason)
			return
		}
	}
	// Not seen running yet (or over): the kill file stops a shim that is
	// still starting.
	x.KillAttempt(task, attempt, reason)
}

// fence marks the running attempts lost. The shims kill them themselves,
// at once (SIGKILL, no grace), at the deadline in the fence file, which is
// the same deadline this is called at; killing them here with the grace
// would let them run on past it.
func (a *Agent) fence(string) {
	x := a.x.Load()
	if x == nil {
		return
	}
	running := x.Running()
	a.mu.Lock()
	for _, s := range running {
		a.fenced[key{s.Task, s.Attempt}] = true
	}
	a.mu.Unlock()
}
