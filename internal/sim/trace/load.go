package trace

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/api"
)

// DefaultTracesDir is where the shared traces live, relative to the
// repository root (the directory the CLI and benchmarks run from). An
// empty tracesDir means this.
const DefaultTracesDir = "../shared/traces"

// The trace files, relative to the traces directory.
const (
	OpenbAllNodesFile      = "alibaba-openb-2023/openb_node_list_all_node.csv"
	OpenbGPUNodesFile      = "alibaba-openb-2023/openb_node_list_gpu_node.csv"
	OpenbPodsFile          = "alibaba-openb-2023/openb_pod_list_%s.csv" // %s: a workload of OpenbWorkloads
	PAIMachinesFile        = "alibaba-pai-2020/pai_machine_spec.csv"
	PhillyFile             = "philly/philly.csv"
	GavelThroughputsFile   = "gavel/simulation_throughputs_isolated.csv"
	GavelTraceFile         = "gavel/traces/%s.trace" // %s: the trace's name
	DefaultGavelTrace      = "max_min_fairness"
	defaultGavelClusterArg = "8,16,24"
)

// OpenbWorkloads are the openb pod lists.
var OpenbWorkloads = []string{"default", "gpushare40", "multigpu20"}

// Limits of LoadCluster's specs.
const (
	// MaxGavelGPUs bounds each model's count in "gavel:V,P,K".
	MaxGavelGPUs = 100_000
	// maxNodesFileBytes bounds a "file:" nodes file.
	maxNodesFileBytes = 64 << 20
)

// LoadCluster builds the cluster a spec names; trace files are read under
// tracesDir (DefaultTracesDir when empty). Specs:
//
//	openb          Alibaba openb, all 1,523 nodes (CPU-only ones too)
//	openb-gpu      Alibaba openb, the 1,213 GPU nodes (6,212 GPUs)
//	pai            Alibaba PAI 2020, 1,897 machines (6,742 GPUs)
//	gavel[:V,P,K]  GavelCluster(V, P, K), default 8,16,24; each 0..MaxGavelGPUs
//	synthetic:N    SyntheticCluster(N), N 1..MaxSynthNodes
//	file:PATH      a --nodes file (YAML or JSON {"nodes": [...]}, unknown
//	               fields are errors), PATH relative to the working
//	               directory, not tracesDir
//
// The cluster is named spec. A cluster without nodes is an error; errors
// name the spec and the reason (for a trace file, its path and line).
func LoadCluster(spec, tracesDir string) (Cluster, error) {
	c, err := loadCluster(spec, tracesDir)
	if err != nil {
		return Cluster{}, fmt.Errorf("cluster %q: %w", truncate(spec), err)
	}
	if len(c.Nodes) == 0 {
		return Cluster{}, fmt.Errorf("cluster %q: no nodes", truncate(spec))
	}
	c.Name = spec
	return c, nil
}

func loadCluster(spec, dir string) (Cluster, error) {
	kind, arg, hasArg := strings.Cut(spec, ":")
	noArg := func() error {
		if hasArg {
			return fmt.Errorf("%s takes no argument", kind)
		}
		return nil
	}
	switch kind {
	case "openb", "openb-gpu":
		if err := noArg(); err != nil {
			return Cluster{}, err
		}
		file := OpenbAllNodesFile
		if kind == "openb-gpu" {
			file = OpenbGPUNodesFile
		}
		return readTrace(dir, file, ReadOpenbNodes)
	case "pai":
		if err := noArg(); err != nil {
			return Cluster{}, err
		}
		return readTrace(dir, PAIMachinesFile, ReadPAIMachines)
	case "gavel":
		if !hasArg {
			arg = defaultGavelClusterArg
		}
		parts := strings.Split(arg, ",")
		if len(parts) != 3 {
			return Cluster{}, errors.New("want gavel:V100,P100,K80 GPU counts, for example gavel:8,16,24")
		}
		var n [3]int
		for i, p := range parts {
			v, err := parseInt(strings.TrimSpace(p), 0, MaxGavelGPUs)
			if err != nil {
				return Cluster{}, fmt.Errorf("%s GPUs: %v", GavelModels[i], err)
			}
			n[i] = int(v)
		}
		return GavelCluster(n[0], n[1], n[2]), nil
	case "synthetic":
		v, err := parseInt(arg, 1, MaxSynthNodes)
		if err != nil {
			return Cluster{}, fmt.Errorf("want synthetic:N nodes, N 1..%d: %v", MaxSynthNodes, err)
		}
		return SyntheticCluster(int(v)), nil
	case "file":
		if arg == "" {
			return Cluster{}, errors.New("want file:PATH of a nodes file")
		}
		nodes, err := readNodesFile(arg)
		if err != nil {
			return Cluster{}, err
		}
		return Cluster{Nodes: nodes}, nil
	}
	return Cluster{}, fmt.Errorf("unknown cluster %q: want openb, openb-gpu, pai, gavel[:V,P,K], synthetic:N or file:PATH", truncate(kind))
}

// readNodesFile reads a --nodes file as the server does
// (internal/server.LoadNodesFile: YAML or JSON, unknown fields are
// errors, every node valid, names unique). It is repeated here so that the
// simulator does not depend on the server.
func readNodesFile(path string) ([]api.Node, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxNodesFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > maxNodesFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, maxNodesFileBytes)
	}
	var file struct {
		Nodes []api.Node `json:"nodes"`
	}
	if err := yaml.UnmarshalStrict(b, &file); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if err := api.ValidateNodes(file.Nodes); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return file.Nodes, nil
}

// readTrace opens tracesDir/rel and reads it with read; errors name the
// file.
func readTrace[T any](dir, rel string, read func(io.Reader) (T, error)) (T, error) {
	if dir == "" {
		dir = DefaultTracesDir
	}
	path := filepath.Join(dir, filepath.FromSlash(rel))
	f, err := os.Open(path)
	if err != nil {
		var zero T
		return zero, err // *PathError names the path
	}
	defer f.Close()
	v, err := read(f)
	if err != nil {
		return v, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

var traceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// LoadWorkload builds the workload a spec names; trace files are read
// under tracesDir (DefaultTracesDir when empty). Specs:
//
//	openb[:NAME]     an openb pod list, NAME default (the default),
//	                 gpushare40 or multigpu20 (ReadOpenbPods)
//	philly[:LIMIT]   Philly (ReadPhilly), the first LIMIT jobs by arrival
//	                 when LIMIT (1..MaxRows) is given
//	gavel[:NAME]     gavel/traces/NAME.trace, default max_min_fairness,
//	                 with simulation_throughputs_isolated.csv (ReadGavelTrace)
//	synthetic[:K=V,...]  Synthetic; keys: jobs, rate (jobs/s), mean (a Go
//	                 duration like 30m, or seconds), dist (lognormal,
//	                 exponential, constant), sigma, the size weights cpu,
//	                 gpu1, gpu2, gpu4, gpu8, tpu, pinned, tpualt, the tier
//	                 weights tier0..tier3, queues, seed (default 1). Unset
//	                 keys keep DefaultSynthConfig's values.
//
// cluster matters to synthetic workloads only: when its nodes carry
// gpu.model labels, the synthetic GPU models become those of
// DefaultSynthConfig's models the cluster has (their weights and speeds),
// or, when it has none of them, the cluster's own models (the first
// api.MaxSelectorLabels by name) weighted by GPU count at speed 1, so that
// pinned jobs ask for models that exist. The workload is named spec. A
// workload without jobs is an error; errors name the spec and the reason.
func LoadWorkload(spec, tracesDir string, cluster Cluster) (Workload, error) {
	return namedWorkload(spec)(loadWorkload(spec, tracesDir, cluster))
}

// namedWorkload returns a function that names a loaded workload spec, or
// says which spec failed or held no jobs.
func namedWorkload(spec string) func(Workload, error) (Workload, error) {
	return func(w Workload, err error) (Workload, error) {
		if err != nil {
			return Workload{}, fmt.Errorf("workload %q: %w", truncate(spec), err)
		}
		if len(w.Arrivals) == 0 {
			return Workload{}, fmt.Errorf("workload %q: no jobs", truncate(spec))
		}
		w.Name = spec
		return w, nil
	}
}

func loadWorkload(spec, dir string, cluster Cluster) (Workload, error) {
	kind, arg, hasArg := strings.Cut(spec, ":")
	switch kind {
	case "openb":
		if !hasArg {
			arg = "default"
		}
		if !slices.Contains(OpenbWorkloads, arg) {
			return Workload{}, fmt.Errorf("unknown openb workload %q: want %s", truncate(arg), strings.Join(OpenbWorkloads, ", "))
		}
		return readTrace(dir, fmt.Sprintf(OpenbPodsFile, arg), ReadOpenbPods)
	case "philly":
		limit := int64(0)
		if hasArg {
			var err error
			if limit, err = parseInt(arg, 1, MaxRows); err != nil {
				return Workload{}, fmt.Errorf("want philly:LIMIT jobs: %v", err)
			}
		}
		w, err := readTrace(dir, PhillyFile, ReadPhilly)
		if err == nil && limit > 0 && int(limit) < len(w.Arrivals) {
			w.Arrivals = w.Arrivals[:limit:limit]
		}
		return w, err
	case "gavel":
		if !hasArg {
			arg = DefaultGavelTrace
		}
		if !traceName.MatchString(arg) || strings.Contains(arg, "..") {
			return Workload{}, fmt.Errorf("want gavel:NAME of a trace in gavel/traces (letters, digits, '_', '-', '.'), got %q", truncate(arg))
		}
		th, err := readTrace(dir, GavelThroughputsFile, ReadGavelThroughputs)
		if err != nil {
			return Workload{}, err
		}
		return readTrace(dir, fmt.Sprintf(GavelTraceFile, arg), func(r io.Reader) (Workload, error) {
			return ReadGavelTrace(r, th)
		})
	case "synthetic":
		cfg, seed, err := ParseSynthSpec(arg)
		if err != nil {
			return Workload{}, err
		}
		cfg.Models = clusterModels(cfg.Models, cluster)
		if err := cfg.Validate(); err != nil {
			return Workload{}, err
		}
		return Synthetic(cfg, seed), nil
	}
	return Workload{}, fmt.Errorf("unknown workload %q: want openb[:NAME], philly[:LIMIT], gavel[:NAME] or synthetic[:K=V,...]", truncate(kind))
}

// ParseSynthSpec reads the K=V,... argument of a synthetic workload spec
// (see LoadWorkload) over DefaultSynthConfig; seed defaults to 1. The
// result is not validated; errors name the key.
func ParseSynthSpec(arg string) (SynthConfig, int64, error) {
	cfg := DefaultSynthConfig()
	seed := int64(1)
	if strings.TrimSpace(arg) == "" {
		return cfg, seed, nil
	}
	floats := map[string]*float64{
		"rate": &cfg.Rate, "sigma": &cfg.Sigma, "pinned": &cfg.Pinned, "tpualt": &cfg.TPUAlt,
		"cpu": &cfg.Sizes.CPU, "gpu1": &cfg.Sizes.GPU1, "gpu2": &cfg.Sizes.GPU2,
		"gpu4": &cfg.Sizes.GPU4, "gpu8": &cfg.Sizes.GPU8, "tpu": &cfg.Sizes.TPU,
		"tier0": &cfg.Tiers[0], "tier1": &cfg.Tiers[1], "tier2": &cfg.Tiers[2], "tier3": &cfg.Tiers[3],
	}
	parts := strings.Split(arg, ",")
	if len(parts) > 64 {
		return cfg, 0, errors.New("at most 64 settings")
	}
	seen := map[string]bool{}
	for _, p := range parts {
		k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return cfg, 0, fmt.Errorf("want K=V settings separated by commas, got %q", truncate(p))
		}
		if seen[k] {
			return cfg, 0, fmt.Errorf("%s: set twice", truncate(k))
		}
		seen[k] = true
		var err error
		switch k {
		case "jobs":
			var n int64
			n, err = parseInt(v, 1, MaxSynthJobs)
			cfg.Jobs = int(n)
		case "queues":
			var n int64
			n, err = parseInt(v, 1, 1000)
			cfg.Queues = int(n)
		case "seed":
			seed, err = parseInt(v, math.MinInt64, math.MaxInt64)
		case "dist":
			cfg.Dist = v
		case "mean":
			cfg.MeanDuration, err = parseDuration(v)
		default:
			f, known := floats[k]
			if !known {
				return cfg, 0, fmt.Errorf("unknown key %q: want jobs, rate, mean, dist, sigma, cpu, gpu1, gpu2, gpu4, gpu8, tpu, pinned, tpualt, tier0..tier3, queues or seed", truncate(k))
			}
			*f, err = parseFloat(v, 0, 1e9)
		}
		if err != nil {
			return cfg, 0, fmt.Errorf("%s: %v", k, err)
		}
	}
	return cfg, seed, nil
}

// parseDuration reads a Go duration ("30m") or a number of seconds.
func parseDuration(s string) (time.Duration, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	secs, err := parseFloat(s, 0, maxSeconds)
	if err != nil {
		return 0, fmt.Errorf("want a duration like 30m or a number of seconds, got %q", truncate(s))
	}
	return seconds(secs), nil
}

// clusterModels returns the synthetic GPU models for a cluster (see
// LoadWorkload).
func clusterModels(models []ModelShare, c Cluster) []ModelShare {
	gpus := map[string]int{}
	var order []string
	for _, n := range c.Nodes {
		m := n.Labels[ModelLabel]
		count := 0
		for _, d := range n.Devices {
			if d.Type == string(GPU) {
				count++
			}
		}
		if m == "" || count == 0 {
			continue
		}
		if _, ok := gpus[m]; !ok {
			order = append(order, m)
		}
		gpus[m] += count
	}
	if len(gpus) == 0 {
		return models
	}
	var out []ModelShare
	for _, m := range models {
		if gpus[m.Name] > 0 {
			out = append(out, m)
		}
	}
	if len(out) > 0 {
		return out
	}
	slices.Sort(order)
	if len(order) > api.MaxSelectorLabels {
		order = order[:api.MaxSelectorLabels]
	}
	for _, m := range order {
		out = append(out, ModelShare{Name: m, Weight: float64(gpus[m]), Speed: 1})
	}
	return out
}
