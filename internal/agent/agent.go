package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/agent/discover"
	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
)

// Options configure a node agent.
type Options struct {
	Server string // http://host:port of the control plane
	Token  string // agent token ("" when auth is off)
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
	// Grace is the SIGTERM→SIGKILL grace of a killed task (default 10s).
	Grace time.Duration
	// Shim and ShimEnv start the executor's shim (default: this binary's
	// agent-shim subcommand).
	Shim    []string
	ShimEnv []string
	// HostRoot is where /proc is read for usage (default "/").
	HostRoot string
	// KillOnExit kills the running tasks when Run returns (a sandbox such
	// as up); otherwise they outlive the agent and the next one adopts
	// them. Killed so, they are reported lost (re-queued) when an agent on
	// this work dir next connects.
	KillOnExit bool
	Logger     *slog.Logger
}

// Agent runs a node's assigned tasks.
type Agent struct {
	opt  Options
	log  *slog.Logger
	x    *executor.Executor
	host hostUsage
	sess *session

	mu sync.Mutex
	// want is the attempt the server assigns of each task on this node.
	want map[string]int
	// fenced marks attempts killed by fencing (reported lost).
	fenced map[key]bool
	health map[string]discover.DeviceSample // latest monitor samples
	// fenceFile holds the deadline past which every task's shim kills it
	// (the server's notready deadline from the last acknowledged
	// heartbeat): tasks stop even if this agent is dead.
	fenceFile string
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
	if opt.Grace <= 0 {
		opt.Grace = 10 * time.Second
	}
	if opt.HostRoot == "" {
		opt.HostRoot = "/"
	}
	if opt.LogsListen == "" {
		opt.LogsListen = "127.0.0.1:0"
	}
	c, err := newClient(opt.Server, opt.Token)
	if err != nil {
		return nil, err
	}
	lg := opt.Logger.With("node", opt.Node.Name)
	x, err := executor.New(executor.Options{Dir: filepath.Join(opt.WorkDir), Shim: opt.Shim, ShimEnv: opt.ShimEnv, Logger: lg})
	if err != nil {
		return nil, err
	}
	a := &Agent{opt: opt, log: lg, x: x, host: hostUsage{root: os.DirFS(opt.HostRoot)},
		want: map[string]int{}, fenced: map[key]bool{}, health: map[string]discover.DeviceSample{}}
	a.sess = &session{name: opt.Node.Name, c: c, r: a, rep: newReporter(), log: lg}
	a.fenceFile = filepath.Join(opt.WorkDir, "fence")
	a.sess.onAck = func(sent time.Time, deadline time.Duration) {
		if err := executor.WriteFence(a.fenceFile, sent.Add(deadline)); err != nil {
			lg.Error("cannot write the fence file: tasks may be killed early", "err", err)
		}
	}
	return a, nil
}

// Run serves logs, recovers what a previous agent left running, and keeps
// the node connected until ctx ends. Running tasks are left running when
// it returns (they outlive the agent; the next one adopts them).
func (a *Agent) Run(ctx context.Context) error {
	defer a.x.Close()
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
	srv := &http.Server{Handler: logHandler(a.x, a.sess.logsToken), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := a.x.Recover(); err != nil {
		return fmt.Errorf("recover the work dir: %w", err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a.collect(ctx) }()
	a.sess.run(ctx)
	wg.Wait()
	if a.opt.KillOnExit {
		a.killAll()
	}
	return nil
}

// stoppedReason marks tasks killed because their agent stopped; their
// results are reported lost, so the server runs them again.
const stoppedReason = "agent stopped"

func (a *Agent) killAll() {
	running := a.x.Running()
	for _, s := range running {
		a.x.Kill(s.Task, stoppedReason)
	}
	deadline := time.Now().Add(a.opt.Grace + 2*time.Second)
	for len(a.x.Running()) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}

// Connected reports how many times the agent registered (for tests and
// the up command's readiness).
func (a *Agent) Connected() int64 { return a.sess.connected.Load() }

// collect turns executor results into status reports.
func (a *Agent) collect(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case r, ok := <-a.x.Results():
			if !ok {
				return
			}
			k := key{r.Task, r.Attempt}
			a.mu.Lock()
			fenced := a.fenced[k]
			delete(a.fenced, k)
			a.mu.Unlock()
			up := engine.StatusUpdate{Task: r.Task, Attempt: r.Attempt, ExitCode: r.ExitCode, Reason: r.Reason}
			switch {
			case fenced, r.ExitCode == -1, r.Killed && strings.Contains(r.Reason, stoppedReason),
				r.Killed && strings.HasPrefix(r.Reason, executor.FencedPrefix):
				up.State = "lost"
			case r.TimedOut:
				up.State = "timeout"
			case r.Killed:
				up.State = "failed" // the server revoked it; this report is stale there
			case r.ExitCode == 0:
				up.State = "succeeded"
			default:
				up.State = "failed"
			}
			a.log.Info("task ended", "task", r.Task, "attempt", r.Attempt, "state", up.State, "exit", r.ExitCode, "reason", r.Reason)
			a.sess.rep.add(up, func() {
				if err := a.x.Ack(r.Task, r.Attempt); err != nil {
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

func (a *Agent) beats() []engine.Beat {
	cpu, mem := a.host.sample()
	b := engine.Beat{Node: a.opt.Node.Name, CPU: cpu, MemoryUsed: mem}
	for _, m := range a.opt.Monitors {
		s, err := m.Sample()
		if err != nil {
			a.log.Warn("device sample failed", "err", err)
			continue
		}
		if b.Devices == nil {
			b.Devices = map[string]engine.DeviceBeat{}
		}
		a.mu.Lock()
		for id, d := range s {
			a.health[id] = d
			b.Devices[id] = engine.DeviceBeat{Utilization: min(max(d.Utilization, 0), 1), MemoryUsed: d.MemoryUsed, Healthy: d.Healthy, Reason: d.Reason}
		}
		a.mu.Unlock()
	}
	return []engine.Beat{b}
}

func (a *Agent) sync(snapshot []engine.Assignment) {
	want := make(map[string]int, len(snapshot))
	for _, as := range snapshot {
		want[as.Task] = as.Attempt
	}
	a.mu.Lock()
	a.want = want
	a.mu.Unlock()
	for _, s := range a.x.Running() {
		if at, ok := want[s.Task]; !ok || at != s.Attempt {
			a.log.Warn("killing a task this node is no longer assigned", "task", s.Task, "attempt", s.Attempt)
			a.x.Kill(s.Task, "not assigned to node "+a.opt.Node.Name+" any more")
		}
	}
	for i := range snapshot {
		a.assign(snapshot[i])
	}
}

func (a *Agent) assign(as engine.Assignment) {
	a.mu.Lock()
	a.want[as.Task] = as.Attempt
	a.mu.Unlock()
	spec := executor.Spec{Task: as.Task, Attempt: as.Attempt, Command: as.Command,
		Env: taskEnv(&as, &a.opt.Node), Timeout: time.Duration(as.Timeout), Grace: a.opt.Grace, FenceFile: a.fenceFile}
	for k, v := range as.Env {
		spec.Env[k] = v
	}
	if err := a.x.Start(spec); err != nil {
		a.log.Error("cannot start task", "task", as.Task, "err", err)
		a.sess.rep.add(engine.StatusUpdate{Task: as.Task, Attempt: as.Attempt, State: "failed", ExitCode: 127, Reason: "the agent could not start it: " + err.Error()}, nil)
		return
	}
	if as.State == "scheduled" {
		a.sess.rep.add(engine.StatusUpdate{Task: as.Task, Attempt: as.Attempt, State: "running"}, nil)
	}
}

func (a *Agent) revoke(task string, attempt int, reason string) {
	a.mu.Lock()
	if a.want[task] == attempt {
		delete(a.want, task)
	}
	a.mu.Unlock()
	for _, s := range a.x.Running() {
		if s.Task == task && s.Attempt == attempt {
			a.log.Info("stopping task", "task", task, "attempt", attempt, "reason", reason)
			a.x.Kill(task, reason)
		}
	}
}

func (a *Agent) fence(reason string) {
	running := a.x.Running()
	a.mu.Lock()
	for _, s := range running {
		a.fenced[key{s.Task, s.Attempt}] = true
	}
	a.mu.Unlock()
	for _, s := range running {
		a.x.Kill(s.Task, reason)
	}
}
