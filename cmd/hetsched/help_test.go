package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// eachCommand calls fn for every command under root that a user runs
// (not hidden, not the help or completion plumbing).
func eachCommand(root *cobra.Command, fn func(*cobra.Command)) {
	for _, c := range root.Commands() {
		if c.Hidden || c.Name() == "help" || c.Name() == "__complete" {
			continue
		}
		fn(c)
		eachCommand(c, fn)
	}
}

// TestHelpShowsEachDefaultOnce (issue 45 §1.5): no flag's help says its
// default twice (its usage text and pflag's "(default …)").
func TestHelpShowsEachDefaultOnce(t *testing.T) {
	eachCommand(newRoot(), func(c *cobra.Command) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			n := strings.Count(f.Usage, "(default")
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" && f.DefValue != "0s" {
				n++ // pflag adds one
			}
			if n > 1 {
				t.Errorf("%s --%s says its default twice: %q (default %q)", c.CommandPath(), f.Name, f.Usage, f.DefValue)
			}
		})
	})
}

// TestEveryCommandHasExamples (issue 45 §1.5): every command a user runs
// shows how, as kubectl's do.
func TestEveryCommandHasExamples(t *testing.T) {
	eachCommand(newRoot(), func(c *cobra.Command) {
		if c.HasSubCommands() && !c.Runnable() {
			return // a group: its commands have them
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s has no Examples section", c.CommandPath())
		}
	})
}

// TestExamplesParse: every example line that runs hetsched names a command
// that exists and flags it takes.
func TestExamplesParse(t *testing.T) {
	eachCommand(newRoot(), func(c *cobra.Command) {
		for _, line := range strings.Split(c.Example, "\n") {
			line, _, _ = strings.Cut(line, "#")
			fields := strings.Fields(line)
			i := slices.Index(fields, "hetsched")
			if i < 0 {
				if i = slices.Index(fields, "./cmd/hetsched"); i < 0 {
					continue
				}
			}
			args := fields[i+1:]
			if len(args) == 0 || strings.ContainsAny(line, "<>$|;&") && !strings.Contains(line, "\"$") {
				continue // a shell construct around it
			}
			root := newRoot()
			cmd, rest, err := root.Find(args)
			if err != nil {
				t.Errorf("%s example %q: %v", c.CommandPath(), line, err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s example %q: %v", c.CommandPath(), line, err)
			}
		}
	})
}
