package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

// newServiceCommands are `scale`, `rollout restart` and `delete` for
// services (get, describe and apply take services too).
func newServiceCommands() []*cobra.Command {
	var sf clientFlags
	scale := &cobra.Command{
		Use:     "scale service NAME --replicas N",
		Short:   "Set a service's replica count by hand (a service that autoscales is refused: change its min and max)",
		Example: `  hetsched scale service echo --replicas 4`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "service" && args[0] != "services" {
				return fmt.Errorf("scale: the kind must be service, got %q", args[0])
			}
			n, err := cmd.Flags().GetInt("replicas")
			if err != nil || !cmd.Flags().Changed("replicas") {
				return fmt.Errorf("scale: --replicas N is required")
			}
			c, err := sf.client()
			if err != nil {
				return err
			}
			return cli.Scale(cmd.Context(), c, cmd.OutOrStdout(), args[1], n)
		},
		ValidArgsFunction: completeKindThenName(&sf, []string{"service"}, false),
	}
	sf.add(scale)
	scale.Flags().Int("replicas", 0, "the replica count to run")

	var rf clientFlags
	rollout := &cobra.Command{Use: "rollout", Short: "Manage a service's rollout"}
	restart := &cobra.Command{
		Use:   "restart service NAME",
		Short: "Replace every replica of a service, one by one within its rollout's maxSurge and maxUnavailable",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "service" && args[0] != "services" {
				return fmt.Errorf("rollout restart: the kind must be service, got %q", args[0])
			}
			c, err := rf.client()
			if err != nil {
				return err
			}
			return cli.RolloutRestart(cmd.Context(), c, cmd.OutOrStdout(), args[1], time.Now())
		},
		ValidArgsFunction: completeKindThenName(&rf, []string{"service"}, false),
	}
	rf.add(restart)
	rollout.AddCommand(restart)

	var df clientFlags
	del := &cobra.Command{
		Use:   "delete service NAME",
		Short: "Stop a service's replicas and delete it",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "service" && args[0] != "services" {
				return fmt.Errorf("delete: the kind must be service (cancel takes tasks and jobs), got %q", args[0])
			}
			c, err := df.client()
			if err != nil {
				return err
			}
			return cli.DeleteService(cmd.Context(), c, cmd.OutOrStdout(), args[1])
		},
		ValidArgsFunction: completeKindThenName(&df, []string{"service"}, false),
	}
	df.add(del)
	return []*cobra.Command{scale, rollout, del}
}
