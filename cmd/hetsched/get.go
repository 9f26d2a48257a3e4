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
func getKinds() []string {
	return []string{"tasks", "jobs", "nodes", "queues", "servers", "services", "cluster"}
}

// kindOf is the plural of a get kind, or "".
func kindOf(arg string) string {
	for _, k := range getKinds() {
		if arg == k || arg+"s" == k || arg == "top" && k == "cluster" {
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
		Use:   "get tasks|jobs|nodes|queues|servers|services|cluster [NAME]",
		Short: "List tasks, jobs, nodes, queues, services or the control plane's servers, or one by NAME; cluster: capacity and allocation per resource and device model (-w: then their changes as they happen)",
		Example: `  hetsched get tasks -w                      # the table, then a row per change
  hetsched get tasks --state PD,R            # pending and running (squeue -t PD,R; or pending,running)
  hetsched get tasks --user ann              # ann's tasks (squeue -u ann)
  hetsched get task train-1                  # one row
  hetsched get tasks -l team=vision,tier!=low -o wide
  hetsched get nodes -l nvidia.com/gpu.model=H100-80GB -o name
  hetsched get cluster                       # capacity, allocation and utilization per resource and device model`,
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: completeKinds(getKinds()...),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind := kindOf(args[0])
			if kind == "" {
				return fmt.Errorf("get: unknown kind %q (tasks, jobs, nodes, queues, servers, services or cluster)", args[0])
			}
			if len(args) == 2 {
				if watch || list.Selector != "" || list.State != "" || list.User != "" {
					return fmt.Errorf("get %s NAME: takes neither --watch, --selector, --state nor --user", kind)
				}
				c, err := f.client()
				if err != nil {
					return err
				}
				return cli.GetOne(cmd.Context(), c, cmd.OutOrStdout(), kind, args[1], f.output)
			}
			if kind == "cluster" {
				if watch || list.Selector != "" || list.State != "" || list.User != "" {
					return fmt.Errorf("get cluster: takes neither --watch, --selector, --state nor --user")
				}
				c, err := f.client()
				if err != nil {
					return err
				}
				return cli.GetCluster(cmd.Context(), c, cmd.OutOrStdout(), f.output)
			}
			if list.State != "" {
				list.State = cli.StateList(list.State)
			}
			if (kind == "servers" || kind == "services") && (watch || list.Selector != "") {
				return fmt.Errorf("get %s: takes neither --watch nor --selector", kind)
			}
			if list.User != "" && kind != "tasks" {
				return fmt.Errorf("--user: only tasks are listed by user (hetsched history --user lists finished work)")
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
	fl.StringVar(&list.State, "state", "", "only tasks in these states, comma-separated, by name or squeue's code (PD,R,CD,F,CA,TO); jobs: one state")
	fl.StringVar(&list.User, "user", "", "only this user's tasks (squeue -u)")
	fl.StringVarP(&list.Selector, "selector", "l", "", "only tasks (by metadata) or nodes (by labels) that match: k=v,k!=v,k,!k")
	fl.BoolVarP(&watch, "watch", "w", false, "after the list, print a row for each change until Ctrl-C")
	fl.IntVar(&list.Limit, "limit", 100, "show at most this many tasks (standard error says when there are more)")
	fl.BoolVar(&list.All, "all", false, fmt.Sprintf("show every task (at most %d)", cli.MaxList))
	fl.StringVar(&list.Sort, "sort", "submitted", "order: submitted (newest first), state or name")
	return get
}
