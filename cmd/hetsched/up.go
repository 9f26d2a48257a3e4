package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/demo"
	"github.com/hetsched/hetsched/internal/telemetry"
	"github.com/hetsched/hetsched/internal/up"
)

func newUp() *cobra.Command {
	var opt up.Options
	var verbose bool
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a control plane plus agents for a default heterogeneous fleet on this machine",
		Long: `Run the control plane (embedded store) with in-process agents for a default
heterogeneous fleet: two 8-GPU nodes of different models (H100, A100), one
4-TPU node and two CPU nodes, whose devices are declared and marked
simulated, next to this machine as discovered (real CPU and memory, GPUs in
an nvml build, TPUs). Every task's command runs on this machine with the
device variables (CUDA_VISIBLE_DEVICES, TPU_VISIBLE_CHIPS, ...) of the
devices the scheduler chose, and $HETSCHED_SHARED_DIR (DATA-DIR/shared),
a directory every task shares. Queues: --queues FILE (the format of
examples/queues.yaml), else a default tree (team-a, team-b) on a store
without queues; hetsched apply -f FILE changes them.

Ctrl-C stops everything: running tasks get SIGTERM and --grace to exit,
and up says which it waits for; a second Ctrl-C kills them at once.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The first Ctrl-C (or SIGTERM) stops, giving running tasks
			// their grace; the second kills them.
			sigs := make(chan os.Signal, 2)
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
			defer signal.Stop(sigs)
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			kill, done := make(chan struct{}), make(chan struct{})
			defer close(done)
			go func() {
				select {
				case <-sigs:
					cancel()
				case <-done:
					return
				}
				select {
				case <-sigs:
					close(kill)
				case <-done:
				}
			}()
			opt.Kill = kill
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			opt.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			tr, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "hetsched-up"})
			if err != nil {
				return err
			}
			opt.Tracing = tr
			defer shutdownTracing(tr, opt.Logger)
			return up.Run(ctx, cmd.OutOrStdout(), opt)
		},
	}
	cmd.Flags().StringVar(&opt.DataDir, "data-dir", up.DefaultDataDir(), "directory of the store and the agents' work dirs")
	cmd.Flags().StringVar(&opt.Listen, "listen", "127.0.0.1:7070", "API address (loopback: up runs without auth)")
	cmd.Flags().StringVar(&opt.Queues, "queues", "", "queue tree file (YAML or JSON, the format of examples/queues.yaml) to put at start; default: team-a and team-b on a store without queues")
	cmd.Flags().StringVar(&opt.Policy, "policy", core.DefaultConfig().Policy, "scheduling policy (see hetsched policies)")
	cmd.Flags().DurationVar(&opt.Grace, "grace", 10*time.Second, "SIGTERM to SIGKILL grace when a task is killed")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "log server and agent activity (info level)")
	return cmd
}

func newDemo() *cobra.Command {
	var policy string
	var quiet bool
	var horizon time.Duration
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Drive the scheduling core through the default fleet and workload in simulated time",
		Long: `Drive the scheduling core with the embedded demo workload on the default
fleet (the nodes of "up") in simulated time, printing every decision the
core makes. Nothing runs: tasks "run" for their duration divided by the
chosen alternative's speed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			fleet, err := demo.DefaultFleet()
			if err != nil {
				return err
			}
			fleet.Nodes = append(fleet.Nodes, demo.LocalNode())
			work, err := demo.DefaultWaves()
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "hetsched demo: scheduling core with policy %q on %d nodes (%s is this machine), simulated time.\n\n", policy, len(fleet.Nodes), fleet.Nodes[len(fleet.Nodes)-1].Name)
			s, err := demo.Run(w, fleet, work, demo.Options{Policy: policy, Quiet: quiet, Horizon: horizon})
			if err != nil {
				return err
			}
			demo.PrintSummary(w, s)
			fmt.Fprintln(w, "\nNext: try another policy (hetsched policies; hetsched demo --policy binpack),")
			fmt.Fprintln(w, "run the real thing (hetsched up), or measure the core (hetsched-bench core).")
			return nil
		},
	}
	cmd.Flags().StringVar(&policy, "policy", core.DefaultConfig().Policy, "scheduling policy (see hetsched policies)")
	cmd.Flags().BoolVarP(&quiet, "quiet", "q", false, "print only the summary")
	cmd.Flags().DurationVar(&horizon, "horizon", 48*time.Hour, "stop the simulated run at this time")
	return cmd
}

func newPolicies() *cobra.Command {
	return &cobra.Command{
		Use:   "policies",
		Short: "List the scheduling policies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, name := range core.Policies() {
				fmt.Fprintf(cmd.OutOrStdout(), "%-18s %s\n", name, core.DescribePolicy(name))
			}
			return nil
		},
	}
}
