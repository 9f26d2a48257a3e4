// Package up is `hetsched up`: a control plane with its embedded store plus
// in-process node agents for the default heterogeneous fleet (two 8-GPU
// nodes of different models, one 4-TPU node, two CPU nodes; their devices
// declared and marked simulated) and this machine (its real CPU, memory
// and any GPUs or TPUs discovery finds). Every agent runs its tasks'
// commands on this machine, with the device variables of the devices the
// scheduler chose.
package up

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/agent"
	"github.com/hetsched/hetsched/internal/agent/discover"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/cli"
	"github.com/hetsched/hetsched/internal/demo"
	"github.com/hetsched/hetsched/internal/poolctl"
	"github.com/hetsched/hetsched/internal/server"
	"github.com/hetsched/hetsched/internal/telemetry"
)

// Options are the `hetsched up` flags.
type Options struct {
	DataDir string
	Listen  string
	Policy  string
	// Queues is a queue tree file (the --queues format) put at start;
	// empty: the default tree (demo.DefaultQueues) when the store has no
	// queues yet, else the store's.
	Queues string
	// Grace is the SIGTERM→SIGKILL grace of killed tasks (default 10s).
	Grace time.Duration
	// Shim and ShimEnv start the agents' per-task shim (default: this
	// binary's agent-shim subcommand).
	Shim    []string
	ShimEnv []string
	Logger  *slog.Logger
	// Tracing traces the server's requests and tasks (server.Options'
	// Tracing); nil: off.
	Tracing *telemetry.Tracing
	// Ready, when set, is called with the API URL once every agent has
	// registered.
	Ready func(url string)
	// Kill, when it is closed (or sent on) while up stops, kills the
	// running tasks at once instead of waiting for their grace: the second
	// Ctrl-C.
	Kill <-chan struct{}
	// PoolScaleOut and PoolScaleIn, when set, replace the node pool's
	// scaleOutAfter and scaleInAfter (tests).
	PoolScaleOut, PoolScaleIn time.Duration
	// AgentMetrics is where the agents' metrics are served (default
	// AgentMetricsAddr; "off": nowhere); AgentMetricsReady, when set, is
	// told their URL.
	AgentMetrics      string
	AgentMetricsReady func(url string)
}

// SharedDirEnv names the directory every task of up finds in its
// environment: all of up's nodes are this machine, so tasks (of one job,
// or one example feeding the next) share files there, under the user's
// data dir rather than a /tmp every user and run shares.
const SharedDirEnv = "HETSCHED_SHARED_DIR"

// DefaultDataDir is where `up` keeps its store and agent work dirs.
func DefaultDataDir() string {
	if d, err := os.UserHomeDir(); err == nil && d != "" {
		return filepath.Join(d, ".hetsched", "up")
	}
	return filepath.Join(os.TempDir(), "hetsched-up")
}

// Run serves until ctx ends, then stops the agents (their running tasks are
// killed: up is a single-machine sandbox) and the server.
func Run(ctx context.Context, out io.Writer, opt Options) error {
	lg := opt.Logger
	if lg == nil {
		lg = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if opt.DataDir == "" {
		opt.DataDir = DefaultDataDir()
	}
	if opt.Listen == "" {
		opt.Listen = "127.0.0.1:7070"
	}
	if opt.Grace <= 0 {
		opt.Grace = 10 * time.Second
	}
	// The shims get attempt directories under it as arguments, with the
	// directory as their working directory: a relative path would not
	// name it from there.
	dataDir, err := filepath.Abs(opt.DataDir)
	if err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	opt.DataDir = dataDir
	fleet, err := demo.DefaultFleet()
	if err != nil {
		return err
	}
	defaults, err := demo.DefaultQueues()
	if err != nil {
		return err
	}
	local, notes, err := localNode()
	if err != nil {
		return err
	}
	shared := filepath.Join(opt.DataDir, "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	shimEnv := append(slices.Clip(opt.ShimEnv), SharedDirEnv+"="+shared)
	checkpoints, err := filepath.Abs(filepath.Join(shared, "checkpoints"))
	if err != nil {
		return fmt.Errorf("data-dir: %w", err)
	}
	// The server stops after the agents (stop below), not with ctx: while
	// they stop, it still answers (which tasks they wait for, their
	// reports).
	sctx, stopServer := context.WithCancel(context.Background())
	defer stopServer()
	addr := make(chan string, 1)
	srvErr := make(chan error, 1)
	burst := BurstPool()
	if opt.PoolScaleOut > 0 {
		burst.ScaleOutAfter = api.Duration(opt.PoolScaleOut)
	}
	if opt.PoolScaleIn > 0 {
		burst.ScaleInAfter = api.Duration(opt.PoolScaleIn)
	}
	pool := newInProcessPool()
	go func() {
		srvErr <- server.Run(sctx, io.Discard, server.Options{
			Listen: opt.Listen, DataDir: filepath.Join(opt.DataDir, "store"), Policy: opt.Policy,
			QueuesFile: opt.Queues, Logger: lg, Tracing: opt.Tracing, Ready: func(a string) { addr <- a },
			NodePools: []api.NodePool{burst}, PoolProviders: map[string]poolctl.Provider{burst.Name: pool}, PoolPeriod: 2 * time.Second,
		})
	}()
	var url string
	select {
	case a := <-addr:
		url = "http://" + a
	case err := <-srvErr:
		return fmt.Errorf("server: %w", err)
	case <-ctx.Done():
		stopServer()
		<-srvErr
		return nil
	}
	nodes := append(fleet.Nodes, local.node)
	newAgent := func(n api.Node, mons []discover.Monitor) (*agent.Agent, error) {
		return agent.New(agent.Options{Server: url, Node: n, Monitors: mons, Simulated: n.Name != local.node.Name,
			WorkDir: agentWorkDir(opt.DataDir, n.Name), Grace: opt.Grace,
			// One machine: every node's checkpoints in one place, so that a
			// checkpointed task resumes on whichever node it lands.
			CheckpointRoot: checkpoints,
			Shim:           opt.Shim, ShimEnv: shimEnv, KillOnExit: true, Logger: lg})
	}
	var agents []*agent.Agent
	set := &agentSet{agents: map[string]*agent.Agent{}}
	pool.set = set
	for _, n := range nodes {
		var mons []discover.Monitor
		if n.Name == local.node.Name {
			mons = local.monitors
		}
		a, err := newAgent(n, mons)
		if err != nil {
			stopServer()
			<-srvErr
			return fmt.Errorf("agent %s: %w", n.Name, err)
		}
		agents = append(agents, a)
		set.add(n.Name, a)
	}
	var wg sync.WaitGroup
	actx, stopAgents := context.WithCancel(context.Background())
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Run(actx); err != nil {
				lg.Error("agent stopped", "err", err)
			}
		}()
	}
	pool.start(actx, &wg, func(n api.Node) (*agent.Agent, error) { return newAgent(n, nil) })
	stop := func() {
		stopAgents()
		wg.Wait()
		stopServer()
		<-srvErr
	}
	// Wait for every agent's first registration.
	for _, a := range agents {
		for a.Connected() == 0 {
			select {
			case <-ctx.Done():
				stop()
				return nil
			case err := <-srvErr:
				stopAgents()
				wg.Wait()
				return fmt.Errorf("server: %w", err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	c := cli.NewClient(url, "", 10*time.Second)
	queues, source, err := setUpQueues(ctx, c, opt.Queues, defaults)
	if err != nil {
		stop()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	printBanner(out, url, opt.DataDir, nodes, local, notes, queues, source)
	if opt.AgentMetrics != "off" {
		addr := opt.AgentMetrics
		if addr == "" {
			addr = AgentMetricsAddr
		}
		murl, stopMetrics, err := serveAgentMetrics(set, addr)
		if err != nil {
			fmt.Fprintf(out, "agent metrics: not served (%v)\n", err)
		} else {
			defer stopMetrics()
			fmt.Fprintf(out, "agent metrics: %s (every node's, labelled node; deploy/prometheus's hetsched-agent job)\n", murl)
			if opt.AgentMetricsReady != nil {
				opt.AgentMetricsReady(murl)
			}
		}
	}
	if opt.Ready != nil {
		opt.Ready(url)
	}
	select {
	case <-ctx.Done():
		shutdown(out, c, opt, agents, stop)
		return nil
	case err := <-srvErr:
		stopAgents()
		wg.Wait()
		return fmt.Errorf("server: %w", err)
	}
}

// shutdown stops the agents (their tasks get SIGTERM, then SIGKILL after
// the grace) and the server, saying which tasks it waits for; opt.Kill
// (the second Ctrl-C) kills them at once.
func shutdown(out io.Writer, c *cli.Client, opt Options, agents []*agent.Agent, stop func()) {
	tasks := runningTasks(c)
	if len(tasks) == 0 {
		fmt.Fprintln(out, "\nhetsched up: stopping the agents and the server…")
	} else {
		them, it := "them", "tasks"
		if len(tasks) == 1 {
			them, it = "it", "task"
		}
		fmt.Fprintf(out, "\nhetsched up: stopping: waiting up to %s for %d %s to exit (%s); press Ctrl-C again to kill %s now\n",
			opt.Grace, len(tasks), it, describeTasks(tasks), them)
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		fmt.Fprintln(out, "hetsched up: stopped.")
		return
	case <-opt.Kill:
	}
	fmt.Fprintln(out, "hetsched up: killing the running tasks now (SIGKILL)…")
	// Commands still starting when the agents were told to stop are
	// caught by the next round.
	deadline := time.After(killWait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, a := range agents {
			a.KillNow()
		}
		select {
		case <-stopped:
			fmt.Fprintln(out, "hetsched up: stopped (tasks killed).")
			return
		case <-deadline:
			fmt.Fprintf(out, "hetsched up: not stopped %s after the kill; exiting anyway\n", killWait)
			return
		case <-tick.C:
		}
	}
}

// killWait bounds how long up waits for its agents and server once the
// tasks were killed.
const killWait = 5 * time.Second

type localInfo struct {
	node     api.Node
	monitors []discover.Monitor
}

// localNode discovers this machine: CPU and memory, NVIDIA GPUs (nvml
// builds) and TPUs.
func localNode() (localInfo, []string, error) {
	n, monitors, notes, err := discover.Local(demo.LocalNode().Name, "")
	if err != nil {
		return localInfo{}, notes, fmt.Errorf("discover this machine: %w", err)
	}
	n.Labels = map[string]string{"hetsched.io/local": "true"}
	return localInfo{node: n, monitors: monitors}, notes, nil
}

func printBanner(w io.Writer, url, dataDir string, nodes []api.Node, local localInfo, notes []string, queues []cli.QueueSpec, source string) {
	fmt.Fprintf(w, "hetsched is up: %s\n", url)
	fmt.Fprintf(w, "web UI: %s/ui/\n", url)
	fmt.Fprintf(w, "data: %s (store, agent work dirs, and shared/: every task's $%s; delete it to start afresh)\n\n", dataDir, SharedDirEnv)
	fmt.Fprintln(w, "nodes (each with an in-process agent; every command runs on this machine):")
	for _, n := range nodes {
		fmt.Fprintf(w, "  %-22s %s\n", n.Name, describe(n, n.Name == local.node.Name))
	}
	for _, n := range notes {
		fmt.Fprintf(w, "  (this machine: %s)\n", n)
	}
	b := BurstPool()
	fmt.Fprintf(w, "\nnode pool %s: %d..%d nodes of 4 L4 GPUs, started as in-process agents when GPU tasks have waited %s,\n  drained and removed after %s idle (hetsched get nodes -l %s=%s)\n",
		b.Name, b.Min, b.Max, time.Duration(b.ScaleOutAfter), time.Duration(b.ScaleInAfter), api.PoolLabel, b.Name)
	fmt.Fprintf(w, "\nqueues (%s; hetsched apply -f FILE changes them):\n", source)
	printQueueTree(w, queues)
	fmt.Fprintf(w, `
try, in another terminal:
  export HETSCHED_SERVER=%s
  go run ./cmd/hetsched get nodes
  go run ./cmd/hetsched get queues
  go run ./cmd/hetsched submit -f examples/data-prep.yaml --wait
  go run ./cmd/hetsched submit -f examples/train-gang.yaml
  go run ./cmd/hetsched submit -f examples/sweep.yaml
  go run ./cmd/hetsched submit -f examples/pipeline.yaml    # prep → 2-node GPU gang → TPU eval
  go run ./cmd/hetsched submit -f examples/mapreduce.yaml   # shards near their data, then a reduce
  examples/tpu-inference.sh            # TPU inference through leases
%s  go run ./cmd/hetsched apply -f examples/queues.yaml     # more queues (research, prod, ...)
  go run ./cmd/hetsched get tasks
  go run ./cmd/hetsched logs <task-id> -f
  curl -s %s/metrics | grep hetsched_

Ctrl-C stops (running tasks get SIGTERM and their grace; Ctrl-C again kills them).
`, url, runInQueue(queues), url)
}

// runInQueue is the banner's line that runs a command in a queue of the
// tree (its first top queue), or nothing without queues.
func runInQueue(queues []cli.QueueSpec) string {
	first := ""
	for _, q := range queues {
		if (q.Parent == "" || q.Parent == api.RootQueue) && (first == "" || q.Name < first) {
			first = q.Name
		}
	}
	if first == "" {
		return ""
	}
	return fmt.Sprintf("  go run ./cmd/hetsched run --queue %s --gpu 1 -- sh -c 'echo $CUDA_VISIBLE_DEVICES'\n", first)
}

func describe(n api.Node, local bool) string {
	var parts []string
	if v, ok := n.Capacity["cpu"]; ok {
		parts = append(parts, fmt.Sprintf("%g CPUs", float64(v)/1000))
	}
	if v, ok := n.Capacity["memory"]; ok {
		parts = append(parts, fmt.Sprintf("%.0fGi", float64(v)/(1<<30)))
	}
	models := map[string]int{}
	sim := false
	for _, d := range n.Devices {
		models[d.Type+" "+d.Model]++
		sim = sim || d.Simulated
	}
	keys := make([]string, 0, len(models))
	for k := range models {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d× %s", models[k], k))
	}
	s := strings.Join(parts, ", ")
	switch {
	case local:
		s += "  (this machine)"
	case sim:
		s += "  (devices simulated)"
	}
	return s
}
