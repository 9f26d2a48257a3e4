package main

import (
	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

// bareWait is the value pflag gives a --wait written without "=": the
// end of the work.
const bareWait = "end"

// waitFlag is --wait[=WHAT] (cli.ParseWait) that also takes "--wait
// WHAT": pflag gives a flag with an optional value its default when "="
// is absent and leaves the next word as an argument, so a bare --wait is
// remembered and takeArg claims a value that follows it.
type waitFlag struct {
	m    cli.WaitMode
	s    string
	bare bool
}

func (w *waitFlag) String() string { return w.s }

func (w *waitFlag) Type() string { return "end|DUR|placed[:DUR]" }

func (w *waitFlag) Set(s string) error {
	m, err := cli.ParseWait(s)
	if err != nil {
		return err
	}
	w.m, w.s, w.bare = m, s, s == bareWait
	return nil
}

func (w *waitFlag) add(cmd *cobra.Command, usage string) {
	cmd.Flags().Var(w, "wait", usage)
	cmd.Flags().Lookup("wait").NoOptDefVal = bareWait
}

// takeArg takes "--wait WHAT"'s WHAT from args (the arguments before any
// "--"): after a bare --wait, a first argument that is a wait value is
// the wait's. It returns the arguments left.
func (w *waitFlag) takeArg(args []string) ([]string, error) {
	if !w.bare || len(args) == 0 {
		return args, nil
	}
	m, err := cli.ParseWait(args[0])
	if err != nil {
		return args, nil
	}
	w.m, w.s, w.bare = m, args[0], false
	return args[1:], nil
}
