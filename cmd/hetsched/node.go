package main

import (
	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

// newNode is `hetsched node release NAME`.
func newNode() *cobra.Command {
	node := &cobra.Command{Use: "node", Short: "Administer nodes' holders"}
	var f clientFlags
	release := &cobra.Command{
		Use:   "release NODE",
		Short: "Free a node from its holder (the static inventory or an agent): it leaves the cluster, its tasks are re-queued, and the next agent to register it holds it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return cli.ReleaseNode(cmd.Context(), c, cmd.OutOrStdout(), args[0])
		},
	}
	f.add(release)
	node.AddCommand(release)
	return node
}
