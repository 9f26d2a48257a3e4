package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

// getKinds are get's kinds (singulars are accepted too).
func getKinds() []string { return []string{"tasks", "jobs", "nodes", "queues", "servers", "services"} }

// kindOf is the plural of a get kind, or "".
func kindOf(arg string) string {
	for _, k := range getKinds() {
		if arg == k || arg+"s" == k {
			return k
		}
	}
	return ""
}

// newGet is `hetsched get tasks|jobs|nodes|queues [-w] [-l SELECTOR]`.
func newGet() *cobra.Command {
	var f clientFlags
	var list cli.ListOptions
	var watch bool
	get := &cobra.Command{
		Use:   "get tasks|jobs|nodes|queues|servers|services",
		Short: "List tasks, jobs, nodes, queues, services or the control plane's servers (-w: then their changes as they happen)",
		Example: `  hetsched get tasks -w                      # the table, then a row per change
  hetsched get tasks -l team=vision,tier!=low -o wide
  hetsched get nodes -l nvidia.com/gpu.model=H100-80GB -o name`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeKinds(getKinds()...),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind := kindOf(args[0])
			if kind == "" {
				return fmt.Errorf("get: unknown kind %q (tasks, jobs, nodes, queues, servers or services)", args[0])
			}
			if (kind == "servers" || kind == "services") && (watch || list.Selector != "") {
				return fmt.Errorf("get %s: takes neither --watch nor --selector", kind)
			}
			if list.Selector != "" && (kind == "jobs" || kind == "queues") {
				return fmt.Errorf("--selector: %s have no labels (only tasks and nodes do)", kind)
			}
			if list.Selector != "" {
				if _, err := cli.ParseSelector(list.Selector); err != nil {
					return err
				}
			}
			c, err := f.client()
			if err != nil {
				return err
			}
			out, note := cmd.OutOrStdout(), cmd.ErrOrStderr()
			if watch {
				// Ctrl-C ends the watch (exit 0).
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return cli.Watch(ctx, c, out, note, cli.WatchOptions{Kind: kind, List: list, Output: f.output})
			}
			ctx := cmd.Context()
			switch kind {
			case "tasks":
				return cli.GetTasks(ctx, c, out, note, list, f.output)
			case "jobs":
				return cli.GetJobs(ctx, c, out, list.State, f.output)
			case "nodes":
				return cli.GetNodesSelected(ctx, c, out, list.Selector, f.output)
			case "servers":
				return cli.GetServers(ctx, c, out, f.output)
			case "services":
				return cli.GetServices(ctx, c, out, f.output)
			}
			return cli.GetQueues(ctx, c, out, f.output)
		},
	}
	f.add(get)
	fl := get.Flags()
	fl.StringVar(&list.State, "state", "", "only tasks (or jobs) in this state")
	fl.StringVarP(&list.Selector, "selector", "l", "", "only tasks (by metadata) or nodes (by labels) that match: k=v,k!=v,k,!k")
	fl.BoolVarP(&watch, "watch", "w", false, "after the list, print a row for each change until Ctrl-C")
	fl.IntVar(&list.Limit, "limit", 100, "show at most this many tasks (standard error says when there are more)")
	fl.BoolVar(&list.All, "all", false, fmt.Sprintf("show every task (at most %d)", cli.MaxList))
	fl.StringVar(&list.Sort, "sort", "submitted", "order: submitted (newest first), state or name")
	return get
}
