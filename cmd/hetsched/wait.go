package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

// bareWait is the text pflag gives a --wait written without "=" (and
// the help shows: --wait duration[=2s]). "--wait=2s" reads the same, so it
// too may take a duration after it; submit takes no other argument.
const bareWait = "2s"

// waitFlag is --wait[=DUR] that also takes "--wait DUR": pflag gives a
// flag with an optional value its default when "=" is absent and leaves
// the next word as an argument, so a bare --wait is remembered and
// takeArg claims a duration that follows it.
type waitFlag struct {
	d    time.Duration
	bare bool
}

func (w *waitFlag) String() string {
	if w.d == 0 {
		return "0" // pflag's zero: the help shows no default
	}
	return w.d.String()
}

func (w *waitFlag) Type() string { return "duration" }

func (w *waitFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration (30s, 5m): %q", s)
	}
	if d < 0 {
		return fmt.Errorf("must not be negative, got %s", d)
	}
	w.d, w.bare = d, s == bareWait
	return nil
}

func (w *waitFlag) add(cmd *cobra.Command, usage string) {
	cmd.Flags().Var(w, "wait", usage)
	cmd.Flags().Lookup("wait").NoOptDefVal = bareWait
}

// takeArg takes "--wait DUR"'s DUR from args (the arguments before any
// "--"): after a bare --wait, a first argument that is a duration is the
// wait's value. It returns the arguments left.
func (w *waitFlag) takeArg(args []string) ([]string, error) {
	if !w.bare || len(args) == 0 {
		return args, nil
	}
	d, err := time.ParseDuration(args[0])
	if err != nil {
		return args, nil
	}
	if d < 0 {
		return nil, fmt.Errorf("--wait: must not be negative, got %s", d)
	}
	w.d, w.bare = d, false
	return args[1:], nil
}
