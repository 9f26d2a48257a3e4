package main

import (
	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/cli"
)

// addAccountingFilters adds history's and usage's filters to cmd.
func addAccountingFilters(cmd *cobra.Command, o *cli.AccountingOptions, defSince string) {
	fl := cmd.Flags()
	fl.StringVar(&o.Since, "since", "", "from this time: RFC 3339, a date (2026-12-01) or an age (7d, 36h) (default "+defSince+")")
	fl.StringVar(&o.Until, "until", "", "up to this time, as --since (default now)")
	fl.StringVarP(&o.User, "user", "u", "", "only this user's work")
	fl.StringVar(&o.Queue, "queue", "", "only this queue's work")
	fl.StringVar(&o.Job, "job", "", "only this job's tasks")
	fl.StringVar(&o.Node, "node", "", "only work that ended on this node")
	fl.StringVar(&o.Model, "model", "", "only work on this device model")
	fl.StringVar(&o.State, "state", "", "only work that ended in these states, comma-separated (failed,timeout)")
	fl.StringVar(&o.Tenant, "tenant", "", "only this tenant's work (admins; a tenant's token reads its own)")
}

// newHistory is `hetsched history`: Slurm's sacct.
func newHistory() *cobra.Command {
	var f clientFlags
	var o cli.AccountingOptions
	cmd := &cobra.Command{
		Use:   "history",
		Short: "List finished work, kept long after the tasks are retired (as sacct): who, where, on what, when, how it ended, CPU- and GPU-hours",
		Example: `  hetsched history                              # what finished in the last 24 hours
  hetsched history --since 7d --user ann --state failed,timeout
  hetsched history --job etl -o wide            # with job, tenant, times, attempts and reasons
  hetsched history --since 2026-12-01 --until 2026-12-02 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return cli.History(cmd.Context(), c, cmd.OutOrStdout(), cmd.ErrOrStderr(), o, f.output)
		},
	}
	f.add(cmd)
	addAccountingFilters(cmd, &o, "24h")
	cmd.Flags().IntVar(&o.Limit, "limit", 100, "show at most this many records (standard error says when there are more)")
	cmd.Flags().BoolVar(&o.All, "all", false, "show every record (at most 100000)")
	return cmd
}

// newUsage is `hetsched usage`: Slurm's sreport.
func newUsage() *cobra.Command {
	var f clientFlags
	var o cli.AccountingOptions
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Report what the work used over a time range, grouped (as sreport): tasks, CPU-hours and device-hours per type, finished and running work clipped to the range",
		Example: `  hetsched usage                                # the last 7 days by queue
  hetsched usage --since 7d --by queue,model    # GPU-hours per queue and device model
  hetsched usage --since 2026-11-01 --until 2026-12-01 --by tenant,user -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.client()
			if err != nil {
				return err
			}
			return cli.Usage(cmd.Context(), c, cmd.OutOrStdout(), o, f.output)
		},
	}
	f.add(cmd)
	addAccountingFilters(cmd, &o, "7d")
	cmd.Flags().StringVar(&o.By, "by", "queue", "group by these fields, comma-separated: tenant, user, queue, model, node, state, job")
	return cmd
}
