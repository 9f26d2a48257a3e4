// Command hetsched is the scheduler's one binary. This file and its
// siblings only parse flags and call into internal packages.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		var exit *cli.ExitError
		if errors.As(err, &exit) {
			// The work's own exit code (run, submit --wait).
			if exit.Err != nil {
				fmt.Fprintln(os.Stderr, "hetsched:", exit.Err)
			}
			os.Exit(exit.Code)
		}
		fmt.Fprintln(os.Stderr, "hetsched:", err)
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "hetsched",
		Short:         "A scheduler for heterogeneous clusters (CPU, GPU, TPU and other accelerators)",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       cli.VersionText(), // --version
	}
	root.SetVersionTemplate("{{.Version}}")
	root.AddCommand(newUp(), newDemo(), newServer(), newAgent(), newAgentShim(), newPolicies(), newSim(), newNode(), newStore())
	root.AddCommand(newCerts(), newVersion())
	root.AddCommand(newApply(), newKube())
	root.AddCommand(newClientCommands()...)
	root.AddCommand(newServiceCommands()...)
	addExamples(root)
	return root
}
