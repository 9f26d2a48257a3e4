package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/demo"
)

func newUp() *cobra.Command {
	var policy string
	var quiet bool
	var horizon time.Duration
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run hetsched on its embedded default fleet",
		Long: `Run hetsched on its embedded default fleet: two 8-GPU nodes of different
models (H100, A100), one 4-TPU node, two CPU nodes and this machine.

Today "up" drives the scheduling core with the embedded demo workload in
simulated time and prints every decision the core makes; the HTTP control
plane and the node agents that will run real commands are not built yet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := cmd.OutOrStdout()
			fleet, err := demo.DefaultFleet()
			if err != nil {
				return err
			}
			fleet.Nodes = append(fleet.Nodes, demo.LocalNode())
			work, err := demo.DefaultWorkload()
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "hetsched up: scheduling core with policy %q on %d nodes (%s is this machine).\n", policy, len(fleet.Nodes), fleet.Nodes[len(fleet.Nodes)-1].Name)
			fmt.Fprintln(w, "Not yet here: the HTTP API server and node agents. The workload below runs in simulated time;")
			fmt.Fprintln(w, "every placement, preemption and wait is the real core's decision.")
			fmt.Fprintln(w)
			s, err := demo.Run(w, fleet, work, demo.Options{Policy: policy, Quiet: quiet, Horizon: horizon})
			if err != nil {
				return err
			}
			demo.PrintSummary(w, s)
			fmt.Fprintln(w, "\nNext: try another policy (hetsched policies; hetsched up --policy binpack),")
			fmt.Fprintln(w, "or measure the core (hetsched bench core).")
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
