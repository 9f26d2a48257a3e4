package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/agent"
	"github.com/hetsched/hetsched/internal/agent/discover"
	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/demo"
	"github.com/hetsched/hetsched/internal/telemetry"
)

func newAgent() *cobra.Command {
	var (
		server, token, name, devices, workDir, logsListen, logsURL string
		checkpointRoot                                             string
		metricsAddr                                                string
		fakeFleet                                                  int
		grace, fakeDuration                                        time.Duration
		verbose                                                    bool
		logs                                                       logFlags
		tlsf                                                       tlsFlags
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run a node agent: discover devices, register, heartbeat, run assigned tasks",
		Long: `Run a node agent. It discovers this machine's CPU and memory (capped by its
cgroup), NVIDIA GPUs (in a build with -tags nvml), TPUs (/dev/accel*) and the
devices declared in --devices (marked simulated), registers them with the
server, heartbeats every 2s and runs the tasks the server assigns to it.

With an https:// --server, --ca names the CA to trust and --cert/--key an
agent certificate (hetsched certs agent --nodes NODE) to authenticate with
instead of a token: the server lets it serve only the nodes it names.

It serves Prometheus metrics (hetsched_agent_*: running tasks, task start
latency, kills by reason, exits by result, device health, utilization and
memory, heartbeat failures, connection state; hetsched_build_info, Go and
process metrics) at GET /metrics on --metrics-listen, loopback by default;
--metrics-listen off (or "") serves none. When the default address is taken
(another agent on this machine) the agent runs without metrics and logs
why; an explicit --metrics-listen it cannot listen on is an error.

With --fake-fleet N it instead registers N simulated nodes whose tasks
"run" for their duration (for scale tests).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			level := logs.level
			if !verbose && fakeFleet > 0 && !cmd.Flags().Changed("log-level") {
				level = "warn"
			}
			lg, err := telemetry.NewLogger(cmd.ErrOrStderr(), logs.format, level)
			if err != nil {
				return err
			}
			if token == "" {
				token = os.Getenv("HETSCHED_TOKEN")
			}
			// The tasks' shims (and the replicas' exec probes) inherit
			// the agent's environment: its token is not theirs to read.
			_ = os.Unsetenv("HETSCHED_TOKEN")
			tc, err := tlsf.config(server)
			if err != nil {
				return err
			}
			if fakeFleet > 0 {
				if name == "" {
					name = "fake"
				}
				f, err := agent.NewFleet(agent.FleetOptions{Server: server, Token: token, TLS: tc, Name: name, Nodes: fakeFleet,
					DefaultDuration: fakeDuration, Logger: lg})
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "hetsched agent: fake fleet %q of %d nodes -> %s\n", name, fakeFleet, server)
				return f.Run(ctx)
			}
			if name == "" {
				name = demo.LocalNode().Name
			}
			if workDir == "" {
				home, err := os.UserHomeDir()
				if err != nil || home == "" {
					return errors.New("--work-dir: required here (no home directory for the default)")
				}
				workDir = filepath.Join(home, ".hetsched", "agent", name)
			}
			if err := os.MkdirAll(workDir, 0o755); err != nil {
				return fmt.Errorf("--work-dir: %w", err)
			}
			node, monitors, notes, err := discover.Local(name, devices)
			if err != nil {
				return err
			}
			for _, n := range notes {
				lg.Info("discovery: " + n)
			}
			for _, d := range node.Devices {
				lg.Info("discovered device", "type", d.Type, "id", d.ID, "model", d.Model, "memory", int64(d.Memory), "simulated", d.Simulated, "topology", d.Topology)
			}
			a, err := agent.New(agent.Options{Server: server, Token: token, TLS: tc, Node: node, Monitors: monitors,
				WorkDir: workDir, LogsListen: logsListen, LogsURL: logsURL, Grace: grace, CheckpointRoot: checkpointRoot, Logger: lg,
				MetricsAddr: metricsListen(metricsAddr), MetricsBestEffort: !cmd.Flags().Changed("metrics-listen")})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "hetsched agent: node %s (%d devices) -> %s\n", node.Name, len(node.Devices), server)
			return a.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&server, "server", envOr("HETSCHED_SERVER", "http://127.0.0.1:7070"), "control plane URL, or the servers of a replicated one comma-separated (the next is tried when one cannot be reached) ($HETSCHED_SERVER)")
	f.StringVar(&token, "token", "", "agent token ($HETSCHED_TOKEN); not needed with --cert")
	tlsf.add(cmd)
	f.StringVar(&name, "name", "", "node name (default local-<hostname>; with --fake-fleet, the name prefix)")
	f.StringVar(&devices, "devices", "", "declared devices file (YAML/JSON {devices: [...]}); they are marked simulated")
	f.StringVar(&workDir, "work-dir", "", "directory for task work dirs, logs and results; keep it across restarts (default ~/.hetsched/agent/NAME)")
	f.StringVar(&logsListen, "logs-listen", "127.0.0.1:0", "address serving task logs to the server")
	f.StringVar(&logsURL, "logs-url", "", "URL the server uses to reach --logs-listen (default http://<logs-listen>)")
	f.StringVar(&metricsAddr, "metrics-listen", defaultAgentMetricsAddr, `address serving GET /metrics (Prometheus); "off" or "" serves none; keep it on loopback or a private network`)
	f.DurationVar(&grace, "grace", 10*time.Second, "SIGTERM to SIGKILL grace when a task is killed (and of a checkpointed task that names none)")
	f.StringVar(&checkpointRoot, "checkpoint-root", "", "absolute path of a filesystem every node mounts at the same path, where tasks' checkpoint.dir live (under their tenant); default: WORK-DIR/checkpoints, on this node only")
	f.IntVar(&fakeFleet, "fake-fleet", 0, "simulate this many nodes instead of running tasks")
	f.DurationVar(&fakeDuration, "fake-duration", time.Second, "with --fake-fleet: how long a task without a duration runs")
	f.BoolVarP(&verbose, "verbose", "v", false, "log at info level with --fake-fleet")
	logs.flags(cmd)
	return cmd
}

// defaultAgentMetricsAddr is the agent's default --metrics-listen: loopback
// (the metrics name devices and the binary's version), next to the
// server's 7070 and the kube scheduler's 7075.
const defaultAgentMetricsAddr = "127.0.0.1:7076"

// metricsListen is --metrics-listen as agent.Options.MetricsAddr: "off"
// serves none.
func metricsListen(flag string) string {
	if strings.EqualFold(strings.TrimSpace(flag), "off") {
		return ""
	}
	return strings.TrimSpace(flag)
}

// newAgentShim is the hidden per-task supervisor the agent starts.
func newAgentShim() *cobra.Command {
	return &cobra.Command{
		Use:                "agent-shim TASKDIR",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			os.Exit(executor.RunShim(args))
			return nil
		},
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
