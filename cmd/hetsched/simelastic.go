package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/sim/elastic"
)

// newSimElastic is `hetsched sim elastic`: the diurnal elastic run of
// issue 44 §4 against the static fleet sized for its peak.
func newSimElastic() *cobra.Command {
	var targets string
	var days int
	var seed int64
	var output string
	cmd := &cobra.Command{
		Use:   "elastic [--targets 50,70,90]",
		Short: "A diurnal inference service autoscaling on a GPU utilization target, training beside it, and a node pool, against a static fleet sized for the peak",
		Long: `Simulates, through the scheduling core, the service autoscaler and the node
pool planner of the server: requests per second following a daily sinusoid
(800 at 04:00 to 4,000 at 16:00, ±5 % noise), one GPU per replica serving
100 requests per second, replicas ready a minute after placement; training
jobs (1.5 an hour, 1-8 GPUs, 30 min to 4 h, low priority); 4 static 8-GPU
nodes and a pool of up to 12 more at $16 an hour (2 minutes to provision,
scaled out after 30 s of waiting, in after 10 minutes idle). Each target
runs twice: elastic, and static with the elastic run's peak node count
for the whole time. docs/evaluation.md §8 has the table.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rows []elastic.Result
			for _, f := range strings.Split(targets, ",") {
				target, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(f, "%")))
				if err != nil || target < 10 || target > 100 {
					return fmt.Errorf("--targets: %q is not a percentage from 10 to 100", f)
				}
				cfg := elastic.Defaults(target)
				cfg.Days, cfg.Seed = days, seed
				e, s, err := elastic.Compare(cfg)
				if err != nil {
					return err
				}
				rows = append(rows, e, s)
			}
			out := cmd.OutOrStdout()
			if output == "json" {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(map[string]any{"runs": rows})
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TARGET\tFLEET\tNODES\tGPU-HOURS\tCOST\tSERVICE P99\tTRAINING P99\tALL P99\tSLO MINUTES\tREPLICA UTIL\tMAX REPLICAS\tTRAINING DONE")
			for _, r := range rows {
				fleet := "elastic"
				if r.Static {
					fleet = "static peak"
				}
				fmt.Fprintf(tw, "%d%%\t%s\t%d\t%.0f\t$%.0f\t%.0f s\t%.0f s\t%.0f s\t%d of %d\t%.0f%%\t%d\t%d\n", r.Target, fleet, r.Nodes, r.GPUHours, r.Cost,
					r.ReplicaP99, r.TrainP99, r.AllP99, r.SLOMinutes, r.Minutes, 100*r.MeanUtil, r.MaxReplicas, r.TrainDone)
			}
			return tw.Flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&targets, "targets", "50,70,90", "GPU utilization targets, percent, comma-separated")
	f.IntVar(&days, "days", 2, "simulated days")
	f.Int64Var(&seed, "seed", 1, "the seed of the noise and the training arrivals")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}
