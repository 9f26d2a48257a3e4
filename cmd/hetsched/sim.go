package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/sim"
	"github.com/hetsched/hetsched/internal/sim/report"
	"github.com/hetsched/hetsched/internal/sim/trace"
)

func newSim() *cobra.Command {
	var clusterSpec, workloadSpec, policies, out, traces, protocol, output string
	var seeds, sample, maxVisit, parallel int
	var stopAt, arrivalScale float64
	var progress, noObserve, known, profile bool
	cmd := &cobra.Command{
		Use:   "sim --cluster C --workload W --policy p1,p2,...",
		Short: "Replay a workload trace on a cluster through the scheduling core, per policy and seed",
		Long: `A discrete-event simulator on the same scheduling core as the server (no
second implementation of any policy). It replays a workload on a cluster
once per policy and seed, prints a table, and with --out writes
results.json and report.html (utilization over time per device type, JCT
CDF, GPU allocation ratio against arrived demand).

Clusters: openb, openb-gpu (Alibaba openb nodes), pai (Alibaba PAI 2020
machines), gavel:V100,P100,K80 (GPU counts), synthetic:N, file:PATH (the
server's --nodes format).
Workloads: openb:default|gpushare40|multigpu20, philly[:LIMIT],
gavel:TRACE (e.g. max_min_fairness), synthetic:jobs=N,...
--protocol fgd is the FGD paper's (ATC'23): jobs shuffled per seed, no
departures, submission stops when the arrived GPU demand reaches --stop-at
(1.3) of the capacity; replay (default) follows arrival times and run
times. Traces are read from --traces (default ../shared/traces).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if clusterSpec == "" || workloadSpec == "" {
				return fmt.Errorf("--cluster and --workload are required")
			}
			if seeds < 1 || seeds > 1000 {
				return fmt.Errorf("--seeds: must be 1..1000, got %d", seeds)
			}
			if protocol != "replay" && protocol != "fgd" {
				return fmt.Errorf("--protocol: must be replay or fgd, got %q", protocol)
			}
			if arrivalScale < 0 || arrivalScale > 1000 {
				return fmt.Errorf("--arrival-scale: must be in (0, 1000], got %v", arrivalScale)
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("-o: must be table or json, got %q", output)
			}
			var pols []string
			for _, p := range strings.Split(policies, ",") {
				if p = strings.TrimSpace(p); p == "" {
					continue
				}
				cfg := core.DefaultConfig()
				cfg.Policy = p
				if err := cfg.Validate(); err != nil {
					return fmt.Errorf("--policy: %v", err)
				}
				pols = append(pols, p)
			}
			if len(pols) == 0 {
				return fmt.Errorf("--policy: name at least one (hetsched policies lists them)")
			}
			cluster, err := trace.LoadCluster(clusterSpec, traces)
			if err != nil {
				return err
			}
			work, err := trace.LoadWorkload(workloadSpec, traces, cluster)
			if err != nil {
				return err
			}
			type runKey struct {
				policy string
				seed   int64
			}
			var keys []runKey
			for _, p := range pols {
				for s := 1; s <= seeds; s++ {
					keys = append(keys, runKey{p, int64(s)})
				}
			}
			results := make([]sim.Result, len(keys))
			errs := make([]error, len(keys))
			bar := newProgressBar(cmd.ErrOrStderr(), progress && len(work.Jobs) >= 10000, len(keys)*len(work.Jobs))
			workers := parallel
			if workers <= 0 {
				workers = min(runtime.GOMAXPROCS(0), len(keys))
			}
			var wg sync.WaitGroup
			next := make(chan int)
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range next {
						k := keys[i]
						cfg := sim.Config{Policy: k.policy, Seed: k.seed, Cluster: cluster, Workload: work,
							FGD: protocol == "fgd", StopAt: stopAt, SampleSize: sample, MaxVisit: maxVisit,
							ArrivalScale: arrivalScale, NoObserve: noObserve, KnownWorkload: known, Profile: profile,
							Progress: bar.track(i)}
						results[i], errs[i] = sim.Run(cfg)
					}
				}()
			}
			for i := range keys {
				next <- i
			}
			close(next)
			wg.Wait()
			bar.done()
			for i, err := range errs {
				if err != nil {
					return fmt.Errorf("%s seed %d: %w", keys[i].policy, keys[i].seed, err)
				}
			}
			w := cmd.OutOrStdout()
			if output == "json" {
				if err := report.JSON(w, results); err != nil {
					return err
				}
			} else if err := report.Table(w, results); err != nil {
				return err
			}
			if out != "" {
				if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
				if err := writeFile(filepath.Join(out, "results.json"), func(f io.Writer) error { return report.JSON(f, results) }); err != nil {
					return err
				}
				title := fmt.Sprintf("%s on %s", work.Name, cluster.Name)
				if err := writeFile(filepath.Join(out, "report.html"), func(f io.Writer) error { return report.HTML(f, title, results) }); err != nil {
					return err
				}
				fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s and %s\n", filepath.Join(out, "results.json"), filepath.Join(out, "report.html"))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&clusterSpec, "cluster", "", "cluster: openb, openb-gpu, pai, gavel:V,P,K, synthetic:N, file:PATH")
	f.StringVar(&workloadSpec, "workload", "", "workload: openb:default|gpushare40|multigpu20, philly[:LIMIT], gavel:TRACE, synthetic:...")
	f.StringVar(&policies, "policy", "least-allocated", "policies, comma-separated (hetsched policies)")
	f.IntVar(&seeds, "seeds", 1, "seeds per policy (1..N)")
	f.StringVar(&out, "out", "", "directory for results.json and report.html")
	f.StringVar(&traces, "traces", filepath.Join("..", "shared", "traces"), "directory of the traces")
	f.StringVar(&protocol, "protocol", "replay", "replay (arrival and run times) or fgd (ATC'23: shuffled, no departures, stop at --stop-at)")
	f.Float64Var(&stopAt, "stop-at", 1.3, "fgd: stop submitting when the arrived GPU demand reaches this fraction of the capacity")
	f.IntVar(&sample, "sample-size", 0, "fitting nodes scored per placement (0: the policy's own)")
	f.IntVar(&maxVisit, "max-visit", 0, "nodes looked at per group per attempt (0: the core's default)")
	f.IntVar(&parallel, "parallel", 0, "runs at once (0: one per CPU)")
	f.Float64Var(&arrivalScale, "arrival-scale", 1, "multiply arrival times (0.5: arrivals twice as dense)")
	f.BoolVar(&known, "known-workload", false, "declare the workload's request mix to the core up front (fgd's typical pods, as the FGD reference knows its pod list)")
	f.BoolVar(&profile, "profile", false, "declare each job class's run time per device model up front (Gavel's profiled throughputs)")
	f.BoolVar(&noObserve, "no-observe", false, "do not feed nodes' allocated fractions back as utilization")
	f.BoolVar(&progress, "progress", true, "a progress bar on standard error for long runs")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	return cmd
}

func writeFile(path string, fn func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// progressBar draws one line on w: the jobs submitted over all runs.
type progressBar struct {
	mu    sync.Mutex
	w     io.Writer
	on    bool
	total int
	per   map[int]int
	last  time.Time
	start time.Time
}

func newProgressBar(w io.Writer, on bool, total int) *progressBar {
	return &progressBar{w: w, on: on, total: total, per: map[int]int{}, start: time.Now()}
}

// track returns run i's progress callback (nil when the bar is off).
func (b *progressBar) track(i int) func(done, total int) {
	if !b.on {
		return nil
	}
	return func(done, _ int) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.per[i] = done
		if time.Since(b.last) < 200*time.Millisecond {
			return
		}
		b.last = time.Now()
		sum := 0
		for _, d := range b.per {
			sum += d
		}
		frac := float64(sum) / float64(max(b.total, 1))
		const width = 30
		n := int(frac * width)
		fmt.Fprintf(b.w, "\r[%s%s] %3.0f%% %d/%d jobs, %s", strings.Repeat("=", n), strings.Repeat(" ", width-n), 100*frac, sum, b.total, time.Since(b.start).Round(time.Second))
	}
}

func (b *progressBar) done() {
	if b.on {
		fmt.Fprintln(b.w)
	}
}
