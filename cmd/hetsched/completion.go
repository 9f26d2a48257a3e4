package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

// completionTimeout bounds the server request behind one completion.
const completionTimeout = 2 * time.Second

// newCompletion is `hetsched completion bash|zsh|fish|powershell`:
// cobra's completion scripts, which ask the binary (its hidden __complete
// command) for task ids, job ids, node and queue names from the server.
func newCompletion() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script (task ids, node names... come from the server)",
		Long: `Print a shell completion script. Names (task and job ids, node and queue
names) are completed from the server named by the command line's --server
(else $HETSCHED_SERVER), with its --token and TLS flags, within 2s.

  bash:        source <(hetsched completion bash)
  zsh:         hetsched completion zsh > "${fpath[1]}/_hetsched"
  fish:        hetsched completion fish | source
  powershell:  hetsched completion powershell | Out-String | Invoke-Expression`,
		Args:                  cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
		ValidArgs:             []string{"bash", "zsh", "fish", "powershell"},
		DisableFlagsInUseLine: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			root, w := cmd.Root(), cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(w, true)
			case "zsh":
				return root.GenZshCompletion(w)
			case "fish":
				return root.GenFishCompletion(w, true)
			}
			return root.GenPowerShellCompletionWithDesc(w)
		},
	}
}

// completionClient is f's client for completions: the command line's
// server, token and TLS, and a short timeout.
func (f *clientFlags) completionClient() (*cli.Client, error) {
	g := *f
	g.output, g.timeout = cli.Table, completionTimeout
	return g.client()
}

// names completes kind's names from the server; on any error, none (and
// never a message into the shell).
func (f *clientFlags) names(cmd *cobra.Command, kind, prefix string) []string {
	c, err := f.completionClient()
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	names, err := cli.Names(ctx, c, kind, prefix)
	if err != nil {
		return nil
	}
	return names
}

// prefixed is the words that start with prefix.
func prefixed(words []string, prefix string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out = append(out, w)
		}
	}
	return out
}

// completeName completes the first argument with kind's names.
func completeName(f *clientFlags, kind string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return f.names(cmd, kind, prefix), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeKindThenName completes the first argument with kinds (and, with
// bare, also task ids: cancel ID), the second with the first's names.
func completeKindThenName(f *clientFlags, kinds []string, bare bool) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			out := prefixed(kinds, prefix)
			if bare && prefix != "" {
				out = append(out, f.names(cmd, "task", prefix)...)
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		case 1:
			for _, k := range kinds {
				if args[0] == k || args[0] == k+"s" {
					return f.names(cmd, k, prefix), cobra.ShellCompDirectiveNoFileComp
				}
			}
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeKinds completes get's kind.
func completeKinds(kinds ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return prefixed(kinds, prefix), cobra.ShellCompDirectiveNoFileComp
	}
}
