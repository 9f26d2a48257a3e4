package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store"
)

// newStore is `hetsched store check|repair --data-dir DIR`.
func newStore() *cobra.Command {
	st := &cobra.Command{Use: "store", Short: "Check or repair a stopped server's store"}
	var dir string
	var skipTables bool
	check := &cobra.Command{
		Use:   "check --data-dir DIR",
		Short: "Report each write-ahead log's records and any damage (file and offset), and whether the store opens; exits 1 if it does not",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := store.Check(dir, store.CheckOptions{SkipTables: skipTables})
			if err != nil {
				return err
			}
			if err := r.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if !r.OK() {
				return errStoreDamaged
			}
			return nil
		},
	}
	check.Flags().StringVar(&dir, "data-dir", "", "the store's directory (the server must be stopped)")
	check.Flags().BoolVar(&skipTables, "skip-tables", false, "check only the logs, not every table's data")
	var yes bool
	var rdir string
	repair := &cobra.Command{
		Use:   "repair --data-dir DIR [--yes]",
		Short: "Salvage a store with a damaged log: keep every record before the damage, set the rest aside (never deleted); without --yes only say what it would do",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := store.Repair(rdir, store.RepairOptions{Yes: yes})
			if err != nil {
				return err
			}
			if err := r.WriteText(cmd.OutOrStdout()); err != nil {
				return err
			}
			if !yes && len(r.Plan) > 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing was changed: run again with --yes to do it")
			}
			if !r.OK() {
				return errStoreDamaged
			}
			return nil
		},
	}
	repair.Flags().StringVar(&rdir, "data-dir", "", "the store's directory (the server must be stopped)")
	repair.Flags().BoolVar(&yes, "yes", false, "do the repair (without it, nothing is changed)")
	for _, c := range []*cobra.Command{check, repair} {
		_ = c.MarkFlagRequired("data-dir")
	}
	st.AddCommand(check, repair)
	return st
}

// errStoreDamaged makes check and repair exit 1 after their report.
var errStoreDamaged = errs.New(errs.Unavailable, "data-dir", "the store does not open as it is (see the report above)")
