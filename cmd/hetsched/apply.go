package main

import (
	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

// newApply is `hetsched apply -f FILE`: queues and nodes from a file.
func newApply() *cobra.Command {
	var flags clientFlags
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update queues and nodes from a file (YAML or JSON; -f - reads standard input)",
		Long: `Create or update the queues and nodes a file declares: a queue tree
(queues:, the format of examples/queues.yaml and --queues) and a node list
(nodes:, the format of the server's --nodes inventory), either or both in
one file. Queues go first, parents before their children; nodes are put as
nodes of the static inventory (admin; a node an agent holds is refused).
Each object prints one line: queue/team-a created, configured or unchanged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := flags.client()
			if err != nil {
				return err
			}
			body, err := readSpecFlag(cmd, file)
			if err != nil {
				return err
			}
			return cli.Apply(cmd.Context(), c, cmd.OutOrStdout(), body, flags.output)
		},
	}
	flags.add(cmd)
	cmd.Flags().StringVarP(&file, "file", "f", "", "file of queues: and/or nodes: (- reads standard input)")
	return cmd
}
