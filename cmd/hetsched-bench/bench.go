package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/benchcore"
)

func newBench() *cobra.Command {
	cmd := &cobra.Command{Use: "bench", Short: "Benchmarks of hetsched's parts",
		// Every bench command's -o is checked here, before its run starts.
		PersistentPreRunE: func(c *cobra.Command, _ []string) error {
			if f := c.Flags().Lookup("output"); f != nil {
				if v := f.Value.String(); v != "text" && v != "json" {
					return fmt.Errorf("-o: must be text or json, got %q", v)
				}
			}
			return nil
		},
	}
	cmd.AddCommand(newBenchCore(), newBenchAPI(), newBenchEcho(), newBenchHTTP(), newBenchPending(), newBenchFleet(), newBenchJob(), newBenchPreempt(), newBenchTiers(), newBenchInflight(), newBenchBatch(), newBenchBulk(), newBenchHA(), newBenchKube())
	return cmd
}

func newBenchCore() *cobra.Command {
	var nodes, tasks int
	var shape, policy, output string
	var presize bool
	cmd := &cobra.Command{
		Use:   "core",
		Short: "Measure the scheduling core's placements per second",
		Long: `Measure the scheduling core in-process, one line per shape.

Without --shape, every default shape runs: "fleet" (10,000 nodes: 6,000
CPU-only, 3,000 with 8 GPUs of three models, 1,000 with 4 TPUs; mixed tasks
of all four tiers) with 10k, 100k and 1M tasks pending, and "peer" (YuniKorn
core's benchmark: tasks of {cpu 1, memory 10} in 2 queues on nodes sized to
end nearly full) at (500, 10k), (5k, 10k) and (10k, 40k), and "churn" (a
full cluster of 16-cpu nodes with --tasks tasks waiting; each cycle one
task finishes and a waiting one is placed). --shape gangs (not a default
shape) fills the fleet's GPUs with low 1-GPU tasks and times the arrival
of --tasks gangs (default 1,000) of 2 to 64 whole-node members at high
priority: their tries and their starts over evictions, as one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			specs := benchcore.DefaultSpecs()
			if shape != "" {
				s := benchcore.Spec{Shape: shape, Nodes: nodes, Tasks: tasks}
				if s.Nodes == 0 {
					s.Nodes = 10000
				}
				if s.Tasks == 0 {
					s.Tasks = 100_000
					if shape == "gangs" {
						s.Tasks = 1000
					}
				}
				specs = []benchcore.Spec{s}
			} else if nodes != 0 || tasks != 0 {
				return fmt.Errorf("--nodes and --tasks need --shape fleet or --shape peer")
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			for _, s := range specs {
				r, err := benchcore.RunSpec(benchcore.Options{Policy: policy, Presize: presize}, s)
				if err != nil {
					return err
				}
				if output == "json" {
					if err := enc.Encode(r); err != nil {
						return err
					}
				} else {
					fmt.Fprintln(cmd.OutOrStdout(), r)
				}
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&nodes, "nodes", 0, "nodes (with --shape; default 10000)")
	cmd.Flags().IntVar(&tasks, "tasks", 0, "tasks (with --shape; default 100000)")
	cmd.Flags().StringVar(&shape, "shape", "", "fleet, peer, churn or gangs (default: all default shapes; gangs: --tasks is the gang count, default 1000)")
	cmd.Flags().StringVar(&policy, "policy", "least-allocated", "scheduling policy")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json (one JSON object per line)")
	cmd.Flags().BoolVar(&presize, "presize", false, "pre-size the core's task index for the task count (core.Config.TaskCapacityHint)")
	return cmd
}

func newBenchPreempt() *cobra.Command {
	var nodes, arrivals, tenants int
	var policy, output string
	cmd := &cobra.Command{
		Use:   "preempt",
		Short: "Time urgent arrivals on a full cluster (arrival to placement, victims chosen)",
		Long: `Fill the heterogeneous fleet exactly with low-priority preemptible work of
--tenants tenant queues (each guaranteed 1/(tenants+1) of every resource),
queue a backlog behind it, then time urgent arrivals one at a time (CPU, GPU and TPU
tasks of the tenants in turn): the core's Submit call, from arrival to
placement with the victims chosen and evicted. Prints p50, p90, p99, max.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodes < 10 || nodes > 1_000_000 {
				return fmt.Errorf("--nodes: must be 10..1000000, got %d", nodes)
			}
			if arrivals < 1 || arrivals > 1_000_000 {
				return fmt.Errorf("--arrivals: must be 1..1000000, got %d", arrivals)
			}
			if tenants < 0 || tenants > 1000 {
				return fmt.Errorf("--tenants: must be 0..1000, got %d", tenants)
			}
			r, err := benchcore.Preempt(benchcore.Options{Policy: policy}, nodes, arrivals, tenants)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), r)
			return err
		},
	}
	cmd.Flags().IntVar(&nodes, "nodes", 10000, "nodes of the fleet")
	cmd.Flags().IntVar(&arrivals, "arrivals", 3000, "urgent arrivals to time")
	cmd.Flags().IntVar(&tenants, "tenants", 4, "tenant queues (each guaranteed 1/(tenants+1) of every resource); 0: no queues")
	cmd.Flags().StringVar(&policy, "policy", "least-allocated", "scheduling policy")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newBenchTiers() *cobra.Command {
	var nodes, backlog int
	var rate float64
	var d time.Duration
	var policy string
	cmd := &cobra.Command{
		Use:   "tiers",
		Short: "Per-tier scheduling delay inside the core, in real time, with the low tier saturated",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if nodes < 1 || nodes > 1_000_000 || backlog < 0 || backlog > 10_000_000 || rate <= 0 || rate > 1e7 || d <= 0 {
				return fmt.Errorf("--nodes 1..1e6, --backlog 0..1e7, --rate (0, 1e7], --duration > 0")
			}
			r, err := benchcore.Tiers(benchcore.Options{Policy: policy}, nodes, backlog, rate, d)
			if err != nil {
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), r)
			return err
		},
	}
	cmd.Flags().IntVar(&nodes, "nodes", 10000, "16-CPU nodes, all full of low-priority tasks")
	cmd.Flags().IntVar(&backlog, "backlog", 100000, "low-priority tasks waiting behind them")
	cmd.Flags().Float64Var(&rate, "rate", 20000, "arrivals (and finishes) per second, mix urgent 1 : high 4 : medium 30 : low 65")
	cmd.Flags().DurationVar(&d, "duration", 5*time.Second, "how long to run")
	cmd.Flags().StringVar(&policy, "policy", "least-allocated", "scheduling policy")
	return cmd
}
