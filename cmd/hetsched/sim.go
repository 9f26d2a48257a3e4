package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/sim"
	"github.com/hetsched/hetsched/internal/sim/report"
	"github.com/hetsched/hetsched/internal/sim/trace"
)

// simFlags are hetsched sim's flags.
type simFlags struct {
	cluster, workload, policies, out, traces, protocol, output  string
	format, throughputs, columns, durations                     string
	seeds, sample, maxVisit, parallel, lasPromote, starveFactor int
	starveLimit, gangReserve                                    time.Duration
	seedBase                                                    int64
	stopAt, arrivalScale                                        float64
	progress, noObserve, known, profile, resume                 bool
	restartCost, shareRound, shareMinRun, gavelRound            time.Duration
	gavelObjective, cpuProfile                                  string
	lasThresholds                                               []time.Duration
}

// validate checks the flags; errors name the flag and the reason.
func (f *simFlags) validate() error {
	switch {
	case f.cluster == "" || f.workload == "":
		return fmt.Errorf("--cluster and --workload are required")
	case f.seeds < 1 || f.seeds > 1000:
		return fmt.Errorf("--seeds: must be 1..1000, got %d", f.seeds)
	case f.seedBase < -1<<53 || f.seedBase > 1<<53:
		return fmt.Errorf("--seed-base: must be within ±2^53, got %d", f.seedBase)
	case f.protocol != "replay" && f.protocol != "fgd":
		return fmt.Errorf("--protocol: must be replay or fgd, got %q", f.protocol)
	case !(f.stopAt > 0 && f.stopAt <= 100):
		return fmt.Errorf("--stop-at: must be in (0, 100] (a fraction of the GPU capacity, 1.3 for 130 %%), got %v", f.stopAt)
	case !(f.arrivalScale > 0 && f.arrivalScale <= 1000):
		return fmt.Errorf("--arrival-scale: must be in (0, 1000], got %v", f.arrivalScale)
	case f.output != "table" && f.output != "json":
		return fmt.Errorf("-o: must be table or json, got %q", f.output)
	case f.durations != "known" && f.durations != "learned":
		return fmt.Errorf("--durations: must be known (tell the policies each job's true run time) or learned, got %q", f.durations)
	case f.sample < 0:
		return fmt.Errorf("--sample-size: must be 0 (the policy's own) or more, got %d", f.sample)
	case f.maxVisit < 0:
		return fmt.Errorf("--max-visit: must be 0 (the core's default) or more, got %d", f.maxVisit)
	case f.lasThresholds != nil && !lasValid(f.lasThresholds):
		return fmt.Errorf("--las-thresholds: want 1 to 8 positive ascending durations, got %v", f.lasThresholds)
	case f.gavelRound < 0 || f.gavelRound > 24*time.Hour:
		return fmt.Errorf("--gavel-round: must be 0 (the default, 6m) to 24h, got %v", f.gavelRound)
	case f.gavelObjective != "fairness" && f.gavelObjective != "throughput" && f.gavelObjective != "agnostic":
		return fmt.Errorf("--gavel-objective: must be fairness, throughput or agnostic, got %q", f.gavelObjective)
	case f.lasPromote < 0 || f.lasPromote > 1000:
		return fmt.Errorf("--las-promote: must be 0 (never) to 1000, got %d", f.lasPromote)
	case f.starveFactor < 0 || f.starveFactor > 1000:
		return fmt.Errorf("--starve-factor: must be 0 (no bound) to 1000, got %d", f.starveFactor)
	case f.starveLimit < 0:
		return fmt.Errorf("--starve-limit: must not be negative, got %v", f.starveLimit)
	case f.gangReserve < 0:
		return fmt.Errorf("--gang-reserve-after: must not be negative (0: never), got %v", f.gangReserve)
	case f.restartCost < 0 || f.restartCost > 24*time.Hour:
		return fmt.Errorf("--restart-cost: must be 0..24h, got %v", f.restartCost)
	case f.restartCost > 0 && !f.resume:
		return fmt.Errorf("--restart-cost: applies with --resume (a job restarted in full pays its whole run again)")
	case f.shareRound < 0 || f.shareMinRun < 0:
		return fmt.Errorf("--share-round and --share-min-run: must not be negative")
	case f.parallel < 0:
		return fmt.Errorf("--parallel: must be 0 (one per CPU) or more, got %d", f.parallel)
	}
	return nil
}

// lasValid reports whether the core takes ths as its las thresholds.
func lasValid(ths []time.Duration) bool {
	cfg := core.DefaultConfig()
	cfg.LASThresholds = ths
	return cfg.Validate() == nil
}

// policyList reads --policy: each name must be a policy.
func (f *simFlags) policyList() ([]string, error) {
	var pols []string
	for _, p := range strings.Split(f.policies, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		cfg := core.DefaultConfig()
		cfg.Policy = p
		if err := cfg.Validate(); err != nil && p != sim.IdealSRTF {
			return nil, fmt.Errorf("--policy: %v (or %s, the simulator's SRTF bound)", err, sim.IdealSRTF)
		}
		pols = append(pols, p)
	}
	if len(pols) == 0 {
		return nil, fmt.Errorf("--policy: name at least one (hetsched policies lists them)")
	}
	return pols, nil
}

// load reads the cluster and the workload the flags name.
func (f *simFlags) load() (trace.Cluster, trace.Workload, error) {
	cluster, err := trace.LoadCluster(f.cluster, f.traces)
	if err != nil {
		return trace.Cluster{}, trace.Workload{}, err
	}
	o := trace.WorkloadOptions{TracesDir: f.traces, Cluster: cluster, Format: f.format, Throughputs: f.throughputs}
	if f.columns != "" {
		cols, err := trace.ParseColumns(f.columns)
		if err != nil {
			return trace.Cluster{}, trace.Workload{}, fmt.Errorf("--columns: %w", err)
		}
		o.Columns = &cols
	}
	if f.throughputs != "" && !strings.HasPrefix(f.workload, "file:") {
		return trace.Cluster{}, trace.Workload{}, fmt.Errorf("--throughputs: applies to file:PATH workloads only (gavel:NAME reads the shared table)")
	}
	work, err := trace.LoadWorkloadWith(f.workload, o)
	return cluster, work, err
}

func newSim() *cobra.Command {
	var fl simFlags
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
gavel:TRACE (e.g. max_min_fairness), synthetic:jobs=N,..., or file:PATH,
a file anywhere: an openb pod list, a Philly job list or a Gavel trace
(told from the first line, or --format), or any CSV with --columns
submit=COL,duration=COL,gpus=COL,... (see docs/evaluation.md).
--protocol fgd is the FGD paper's (ATC'23): jobs shuffled per seed, no
departures, submission stops when the arrived GPU demand reaches --stop-at
(1.3) of the capacity; replay (default) follows arrival times and run
times. Traces are read from --traces (default ../shared/traces).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runSim(cmd, &fl) },
	}
	f := cmd.Flags()
	f.StringVar(&fl.cluster, "cluster", "", "cluster: openb, openb-gpu, pai, gavel:V,P,K, synthetic:N, file:PATH")
	f.StringVar(&fl.workload, "workload", "", "workload: openb:default|gpushare40|multigpu20, philly[:LIMIT], gavel:TRACE, synthetic:..., file:PATH")
	f.StringVar(&fl.format, "format", "auto", "a file: workload's format: auto (from its first line), openb, philly, gavel or csv")
	f.StringVar(&fl.throughputs, "throughputs", "", "a gavel file's throughput table (default: the shared simulation_throughputs_isolated.csv)")
	f.StringVar(&fl.columns, "columns", "", "a csv file's column mapping: submit=COL,duration=COL,gpus=COL,... or a .yaml file of the same keys")
	f.StringVar(&fl.durations, "durations", "learned", "known (the policies are told each job's true run time) or learned (from finished jobs)")
	f.StringVar(&fl.policies, "policy", "least-allocated", "policies, comma-separated (hetsched policies), and srtf-ideal: the simulator's SRTF bound (re-packs the whole cluster at every event, for free)")
	f.IntVar(&fl.seeds, "seeds", 1, "seeds per policy")
	f.Int64Var(&fl.seedBase, "seed-base", 1, "the first seed: runs use seed-base .. seed-base+seeds-1")
	f.StringVar(&fl.out, "out", "", "directory for results.json and report.html")
	f.StringVar(&fl.traces, "traces", filepath.Join("..", "shared", "traces"), "directory of the traces")
	f.StringVar(&fl.protocol, "protocol", "replay", "replay (arrival and run times) or fgd (ATC'23: shuffled, no departures, stop at --stop-at)")
	f.Float64Var(&fl.stopAt, "stop-at", 1.3, "fgd: stop submitting when the arrived GPU demand reaches this fraction of the capacity")
	f.IntVar(&fl.sample, "sample-size", 0, "fitting nodes scored per placement (0: the policy's own)")
	f.IntVar(&fl.maxVisit, "max-visit", 0, "nodes looked at per group per attempt (0: the core's default)")
	f.IntVar(&fl.parallel, "parallel", 0, "runs at once (0: one per CPU)")
	f.Float64Var(&fl.arrivalScale, "arrival-scale", 1, "multiply arrival times (0.5: arrivals twice as dense)")
	f.BoolVar(&fl.known, "known-workload", false, "declare the workload's request mix to the core up front (fgd's typical pods, as the FGD reference knows its pod list)")
	f.BoolVar(&fl.profile, "profile", false, "declare each job class's run time per device model up front (Gavel's profiled throughputs)")
	f.BoolVar(&fl.resume, "resume", false, "a preempted job resumes from its checkpoint (runs only the work left) instead of again in full")
	f.DurationVar(&fl.restartCost, "restart-cost", 0, "with --resume: each resumed attempt's checkpoint save and restore time")
	f.DurationVar(&fl.shareRound, "share-round", 0, "srtf, las: how often blocked tasks try to swap a running one out (0: the core's 1m)")
	f.DurationVar(&fl.shareMinRun, "share-min-run", 0, "srtf, las: the least a task runs before it may be swapped out (0: the core's 1m)")
	f.DurationSliceVar(&fl.lasThresholds, "las-thresholds", nil, "las: the device-service thresholds between its queues, ascending; none given: one, 1h")
	f.Lookup("las-thresholds").DefValue = "" // "(default [])" would say nothing
	f.DurationVar(&fl.gavelRound, "gavel-round", 0, "gavel-rounds: the round length (0: 6m)")
	f.StringVar(&fl.gavelObjective, "gavel-objective", "fairness", "gavel-rounds: fairness (heterogeneity-aware max-min fairness), throughput (total normalised throughput) or agnostic (max-min fairness taking every GPU model as equally fast: Gavel's baseline)")
	f.IntVar(&fl.starveFactor, "starve-factor", core.DefaultConfig().StarveFactor, "sjf, srtf: a job that waited this many times its expected runtime (or --starve-limit, the less) goes ahead of the others and, under srtf, runs to its end; 0: no such bound")
	f.DurationVar(&fl.gangReserve, "gang-reserve-after", core.DefaultConfig().GangReserveAfter, "a gang that waited this long, unable to start, gets a reservation (nodes held while their tasks end; backfill only by known run time); 0: never")
	f.DurationVar(&fl.starveLimit, "starve-limit", core.DefaultConfig().StarveLimit, "sjf, srtf: the longest a job waits before it goes ahead of the others; 0: no fixed limit")
	f.IntVar(&fl.lasPromote, "las-promote", core.DefaultConfig().LASPromote, "las: promote a job that waited this many times its last run back to the first queue (Tiresias' STARVELIMIT); 0: never")
	f.StringVar(&fl.cpuProfile, "cpu-profile", "", "write a Go CPU profile of the run to this file (go tool pprof reads it)")
	f.BoolVar(&fl.noObserve, "no-observe", false, "do not feed nodes' allocated fractions back as utilization")
	f.BoolVar(&fl.progress, "progress", true, "a progress bar on standard error for long runs")
	f.StringVarP(&fl.output, "output", "o", "table", "table or json")
	cmd.AddCommand(newSimElastic())
	return cmd
}

// runSim runs every policy and seed the flags name and reports them.
func runSim(cmd *cobra.Command, fl *simFlags) error {
	if err := fl.validate(); err != nil {
		return err
	}
	pols, err := fl.policyList()
	if err != nil {
		return err
	}
	cluster, work, err := fl.load()
	if err != nil {
		return err
	}
	if fl.cpuProfile != "" {
		pf, err := os.Create(fl.cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer func() { _ = pf.Close() }()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("--cpu-profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	type runKey struct {
		policy string
		seed   int64
	}
	var keys []runKey
	for _, p := range pols {
		for s := range fl.seeds {
			keys = append(keys, runKey{p, fl.seedBase + int64(s)})
		}
	}
	results := make([]sim.Result, len(keys))
	errs := make([]error, len(keys))
	bar := newProgressBar(cmd.ErrOrStderr(), fl.progress && len(work.Arrivals) >= 10000, len(keys)*len(work.Arrivals))
	workers := fl.parallel
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
					FGD: fl.protocol == "fgd", StopAt: fl.stopAt, SampleSize: fl.sample, MaxVisit: fl.maxVisit,
					ArrivalScale: fl.arrivalScale, NoObserve: fl.noObserve, KnownWorkload: fl.known, Profile: fl.profile,
					KnownDurations: fl.durations == "known", Resume: fl.resume, RestartCost: fl.restartCost,
					ShareRound: fl.shareRound, ShareMinRun: fl.shareMinRun, LASThresholds: fl.lasThresholds, LASPromote: fl.lasPromote, StarveFactor: fl.starveFactor, StarveLimit: fl.starveLimit, GangReserveAfter: fl.gangReserve, GavelRound: fl.gavelRound, GavelObjective: fl.gavelObjective, Progress: bar.track(i)}
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
	return writeSimResults(cmd, fl, results, fmt.Sprintf("%s on %s", work.Name, cluster.Name))
}

// writeSimResults prints the table (or JSON), the warnings, and with
// --out results.json and report.html.
func writeSimResults(cmd *cobra.Command, fl *simFlags, results []sim.Result, title string) error {
	w := cmd.OutOrStdout()
	if fl.output == "json" {
		if err := report.JSON(w, results); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(w, "durations %s, protocol %s\n", fl.durations, fl.protocol)
		if err := report.Table(w, results); err != nil {
			return err
		}
	}
	for _, line := range report.Warnings(results) {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning: "+line)
	}
	if fl.out == "" {
		return nil
	}
	if err := os.MkdirAll(fl.out, 0o755); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(fl.out, "results.json"), func(f io.Writer) error { return report.JSON(f, results) }); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(fl.out, "report.html"), func(f io.Writer) error { return report.HTML(f, title, results) }); err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s and %s\n", filepath.Join(fl.out, "results.json"), filepath.Join(fl.out, "report.html"))
	return nil
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
