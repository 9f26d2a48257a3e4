package main

import (
	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

// newVersion is `hetsched version [-o table|json|yaml]`.
func newVersion() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the binary's version, VCS commit and time, and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.CheckOutput(output); err != nil {
				return err
			}
			return cli.Version(cmd.OutOrStdout(), output)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", cli.Table, "table, json or yaml")
	return cmd
}
