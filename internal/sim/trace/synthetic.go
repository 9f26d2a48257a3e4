package trace

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// SizeMix weighs the kinds of synthetic job: CPU-only, 1, 2, 4 or 8 GPUs,
// or one TPU host (SynthTPUChips chips). Weights are relative (they need
// not sum to 1) and non-negative.
type SizeMix struct {
	CPU, GPU1, GPU2, GPU4, GPU8, TPU float64
}

func (m SizeMix) weights() []float64 { return []float64{m.CPU, m.GPU1, m.GPU2, m.GPU4, m.GPU8, m.TPU} }

// sizeKinds names SizeMix's kinds, in weights() order; a job's
// Metadata["class"] is its kind.
var sizeKinds = []string{"cpu", "gpu1", "gpu2", "gpu4", "gpu8", "tpu"}

// ModelShare is one GPU model of the synthetic mix: how often a pinned
// job asks for it (Weight) and how fast it runs jobs (Speed; 1 is the
// reference: a job runs for Duration/Speed on it).
type ModelShare struct {
	Name   string
	Weight float64
	Speed  float64
}

// Synthetic TPU hosts and jobs.
const (
	SynthTPUModel = "tpu-v5e"
	SynthTPUChips = 4
)

// Duration distributions of SynthConfig.Dist.
const (
	DistLogNormal   = "lognormal"
	DistExponential = "exponential"
	DistConstant    = "constant"
)

// SynthConfig describes a synthetic workload. Zero fields take the
// defaults of DefaultSynthConfig, except Pinned and TPUAlt, where 0 means
// none.
type SynthConfig struct {
	// Jobs is how many jobs (default 1000, at most MaxSynthJobs).
	Jobs int
	// Rate is the mean arrival rate, jobs per second, of a Poisson process
	// (default 0.05: one job every 20 s on average).
	Rate float64
	// MeanDuration is the mean run time at speed 1 (default 1h).
	MeanDuration time.Duration
	// Dist is the run-time distribution: lognormal (default; shape
	// Sigma, default 1.5: a long tail), exponential or constant. Run
	// times are clamped to [1s, 1000×MeanDuration].
	Dist  string
	Sigma float64
	// Sizes weighs the job kinds (default CPU .2, 1 GPU .45, 2 GPUs .15,
	// 4 GPUs .1, 8 GPUs .05, TPU .05).
	Sizes SizeMix
	// Models are the GPU models (default H100 weight .3 speed 2, A100 .5
	// speed 1, L4 .2 speed .4). Every GPU job gets ByModel[m] =
	// Duration/Speed for each of them.
	Models []ModelShare
	// Pinned is the fraction of GPU jobs that must run on one model
	// (NodeSelector gpu.model, drawn by weight); DefaultSynthConfig: 0.2.
	Pinned float64
	// TPUAlt is the fraction of unpinned 1-4 GPU jobs that may run on a
	// TPU host instead (an Alternative of SynthTPUChips chips, speed 1);
	// DefaultSynthConfig: 0.1.
	TPUAlt float64
	// Tiers weighs the priorities 0 (urgent) to 3 (low) (default .05,
	// .15, .5, .3).
	Tiers [4]float64
	// Queues is how many queues, "q-0".."q-<N-1>", drawn uniformly
	// (default 4, at most 1000).
	Queues int
	// CPUPerGPU (millicores, default 8000) and MemoryPerGPU (bytes,
	// default 32Gi) come with each GPU or TPU chip. A CPU-only job asks
	// for 1, 2, 4, 8 or 16 cores (uniformly) and 4Gi a core.
	CPUPerGPU    int64
	MemoryPerGPU int64
}

// MaxSynthJobs bounds SynthConfig.Jobs.
const MaxSynthJobs = 1_000_000

// DefaultSynthConfig returns the defaults documented on SynthConfig.
func DefaultSynthConfig() SynthConfig {
	return SynthConfig{
		Jobs:         1000,
		Rate:         0.05,
		MeanDuration: time.Hour,
		Dist:         DistLogNormal,
		Sigma:        1.5,
		Sizes:        SizeMix{CPU: 0.2, GPU1: 0.45, GPU2: 0.15, GPU4: 0.1, GPU8: 0.05, TPU: 0.05},
		Models: []ModelShare{
			{Name: "H100", Weight: 0.3, Speed: 2},
			{Name: "A100", Weight: 0.5, Speed: 1},
			{Name: "L4", Weight: 0.2, Speed: 0.4},
		},
		Pinned:       0.2,
		TPUAlt:       0.1,
		Tiers:        [4]float64{0.05, 0.15, 0.5, 0.3},
		Queues:       4,
		CPUPerGPU:    8000,
		MemoryPerGPU: 32 << 30,
	}
}

// withDefaults fills zero fields from DefaultSynthConfig.
func (c SynthConfig) withDefaults() SynthConfig {
	d := DefaultSynthConfig()
	c.Jobs = cmp.Or(c.Jobs, d.Jobs)
	c.Rate = cmp.Or(c.Rate, d.Rate)
	c.MeanDuration = cmp.Or(c.MeanDuration, d.MeanDuration)
	c.Dist = cmp.Or(c.Dist, d.Dist)
	c.Sigma = cmp.Or(c.Sigma, d.Sigma)
	c.Sizes = cmp.Or(c.Sizes, d.Sizes)
	if c.Models == nil {
		c.Models = d.Models
	}
	c.Tiers = cmp.Or(c.Tiers, d.Tiers)
	c.Queues = cmp.Or(c.Queues, d.Queues)
	c.CPUPerGPU = cmp.Or(c.CPUPerGPU, d.CPUPerGPU)
	c.MemoryPerGPU = cmp.Or(c.MemoryPerGPU, d.MemoryPerGPU)
	return c
}

// Validate checks the configuration, with defaults applied, and returns
// the first problem, naming the field.
func (c SynthConfig) Validate() error {
	c = c.withDefaults()
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("synthetic %s: %s", field, fmt.Sprintf(format, args...))
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.Jobs < 1 || c.Jobs > MaxSynthJobs:
		return bad("jobs", "must be 1..%d, got %d", MaxSynthJobs, c.Jobs)
	case !finite(c.Rate) || c.Rate <= 0 || c.Rate > 1e6:
		return bad("rate", "must be in (0, 1e6] jobs a second, got %v", c.Rate)
	case float64(c.Jobs)/c.Rate > maxSeconds/10:
		return bad("rate", "%d jobs at %v a second arrive over more than %v s", c.Jobs, c.Rate, maxSeconds/10)
	case c.MeanDuration < time.Second || c.MeanDuration > 1000*time.Hour:
		return bad("mean", "must be 1s..1000h, got %v", c.MeanDuration)
	case c.Dist != DistLogNormal && c.Dist != DistExponential && c.Dist != DistConstant:
		return bad("dist", "must be %s, %s or %s, got %q", DistLogNormal, DistExponential, DistConstant, truncate(c.Dist))
	case !finite(c.Sigma) || c.Sigma < 0 || c.Sigma > 5:
		return bad("sigma", "must be in [0, 5], got %v", c.Sigma)
	case !finite(c.Pinned) || c.Pinned < 0 || c.Pinned > 1:
		return bad("pinned", "must be a fraction in [0, 1], got %v", c.Pinned)
	case !finite(c.TPUAlt) || c.TPUAlt < 0 || c.TPUAlt > 1:
		return bad("tpualt", "must be a fraction in [0, 1], got %v", c.TPUAlt)
	case c.Queues < 1 || c.Queues > 1000:
		return bad("queues", "must be 1..1000, got %d", c.Queues)
	case c.CPUPerGPU < 1 || c.CPUPerGPU > 1<<30:
		return bad("cpuPerGPU", "must be 1..%d millicores, got %d", 1<<30, c.CPUPerGPU)
	case c.MemoryPerGPU < 1 || c.MemoryPerGPU > 1<<44:
		return bad("memoryPerGPU", "must be 1..%d bytes, got %d", int64(1)<<44, c.MemoryPerGPU)
	}
	if err := checkWeights(c.Sizes.weights()); err != nil {
		return bad("sizes", "%v", err)
	}
	if err := checkWeights(c.Tiers[:]); err != nil {
		return bad("tiers", "%v", err)
	}
	if len(c.Models) == 0 || len(c.Models) > api.MaxSelectorLabels {
		return bad("models", "name 1 to %d GPU models", api.MaxSelectorLabels)
	}
	ws := make([]float64, len(c.Models))
	seen := map[string]bool{}
	for i, m := range c.Models {
		if err := api.ValidateLabelValue(m.Name); err != nil || m.Name == "" {
			return bad(fmt.Sprintf("models[%d].name", i), "%q is not a model name (a label value)", truncate(m.Name))
		}
		if seen[m.Name] {
			return bad(fmt.Sprintf("models[%d].name", i), "%q is listed twice", m.Name)
		}
		seen[m.Name] = true
		if !finite(m.Speed) || m.Speed < 1e-3 || m.Speed > 1e3 {
			return bad(fmt.Sprintf("models[%d].speed", i), "must be in [0.001, 1000], got %v", m.Speed)
		}
		ws[i] = m.Weight
	}
	if err := checkWeights(ws); err != nil {
		return bad("models", "weights: %v", err)
	}
	return nil
}

func checkWeights(ws []float64) error {
	sum := 0.0
	for _, w := range ws {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 || w > 1e9 {
			return fmt.Errorf("weights must be finite and non-negative, got %v", w)
		}
		sum += w
	}
	if sum <= 0 {
		return errors.New("at least one weight must be positive")
	}
	return nil
}

// pick draws an index with probability proportional to ws.
func pick(r *rand.Rand, ws []float64) int {
	sum := 0.0
	for _, w := range ws {
		sum += w
	}
	x := r.Float64() * sum
	for i, w := range ws {
		if x < w {
			return i
		}
		x -= w
	}
	for i := len(ws) - 1; i > 0; i-- { // rounding: the last positive weight
		if ws[i] > 0 {
			return i
		}
	}
	return 0
}

// Synthetic generates a workload from cfg (zero fields take the defaults
// of DefaultSynthConfig) and seed: the same pair gives the same jobs, on
// every platform (math/rand/v2's PCG, seeded with seed). Arrivals are a
// Poisson process of cfg.Rate from 0 (the first job arrives at 0); jobs
// are in arrival order, IDs "syn-000000".. and Metadata["class"] their
// kind (cpu, gpu1, gpu2, gpu4, gpu8, tpu). Duration is the run time at
// speed 1; GPU jobs also get ByModel for every model of cfg.Models, TPU
// jobs and jobs with a TPU alternative ByModel[SynthTPUModel] = Duration.
// Task.Duration is left unset. It panics if cfg is invalid: check it with
// Validate first (LoadWorkload does).
func Synthetic(cfg SynthConfig, seed int64) Workload {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	r := rand.New(rand.NewPCG(uint64(seed), 0x6865747363686564)) // "hetsched"
	modelWeights := make([]float64, len(cfg.Models))
	for i, m := range cfg.Models {
		modelWeights[i] = m.Weight
	}
	mean := cfg.MeanDuration.Seconds()
	mu := math.Log(mean) - cfg.Sigma*cfg.Sigma/2
	w := Workload{Name: "synthetic", Arrivals: make([]Arrival, 0, cfg.Jobs)}
	t := 0.0
	for i := range cfg.Jobs {
		if i > 0 {
			t += r.ExpFloat64() / cfg.Rate
		}
		var secs float64
		switch cfg.Dist {
		case DistExponential:
			secs = mean * r.ExpFloat64()
		case DistLogNormal:
			secs = math.Exp(mu + cfg.Sigma*r.NormFloat64())
		default:
			secs = mean
		}
		secs = min(max(secs, 1), 1000*mean)
		kind := pick(r, cfg.Sizes.weights())
		prio := pick(r, cfg.Tiers[:])
		j := Arrival{
			ID:       fmt.Sprintf("syn-%06d", i),
			At:       seconds(t),
			Duration: seconds(secs),
			Task: api.Task{
				Queue:    "q-" + strconv.Itoa(r.IntN(cfg.Queues)),
				Priority: ptr(prio),
				Metadata: map[string]string{"class": sizeKinds[kind]},
			},
		}
		switch kind {
		case 0: // CPU-only
			cores := int64(1) << r.IntN(5)
			j.Task.Resources = resource.List{resource.CPU: cores * 1000, resource.Memory: cores << 32}
		case 5: // one TPU host
			j.Task.Resources = tpuRequest(cfg)
			j.ByModel = map[string]time.Duration{SynthTPUModel: j.Duration}
		default:
			gpus := int64(1) << (kind - 1)
			j.Task.Resources = resource.List{
				GPU:             gpus * 1000,
				resource.CPU:    gpus * cfg.CPUPerGPU,
				resource.Memory: gpus * cfg.MemoryPerGPU,
			}
			j.ByModel = make(map[string]time.Duration, len(cfg.Models)+1)
			for _, m := range cfg.Models {
				j.ByModel[m.Name] = time.Duration(math.Round(float64(j.Duration) / m.Speed))
			}
			// Draw every number whatever they decide, so that changing
			// Pinned or TPUAlt does not reshuffle the jobs after.
			pin, alt, model := r.Float64(), r.Float64(), pick(r, modelWeights)
			if pin < cfg.Pinned {
				j.Task.NodeSelector = map[string]string{ModelLabel: cfg.Models[model].Name}
			} else if gpus <= 4 && alt < cfg.TPUAlt {
				j.Task.Alternatives = []api.Alternative{{Resources: tpuRequest(cfg), Speed: 1}}
				j.ByModel[SynthTPUModel] = j.Duration
			}
		}
		w.Arrivals = append(w.Arrivals, j)
	}
	return w
}

func tpuRequest(cfg SynthConfig) resource.List {
	return resource.List{
		TPU:             SynthTPUChips * 1000,
		resource.CPU:    SynthTPUChips * cfg.CPUPerGPU,
		resource.Memory: SynthTPUChips * cfg.MemoryPerGPU,
	}
}

// synthNodeKinds is the repeating pattern of SyntheticCluster's nodes.
var synthNodeKinds = []struct {
	model    string // "" for CPU-only
	tpu      bool
	devices  int
	cpuCores int64
	memGi    int64
}{
	{"A100", false, 8, 96, 1024},
	{"H100", false, 8, 128, 2048},
	{"", false, 0, 64, 256},
	{"L4", false, 4, 48, 192},
	{SynthTPUModel, true, SynthTPUChips, 112, 384},
	{"A100", false, 8, 96, 1024},
	{"", false, 0, 64, 256},
	{"H100", false, 8, 128, 2048},
	{"A100", false, 8, 96, 1024},
	{"L4", false, 4, 48, 192},
}

// MaxSynthNodes bounds SyntheticCluster's size.
const MaxSynthNodes = 100_000

// SyntheticCluster returns n nodes (0 for n < 0, at most MaxSynthNodes)
// named "syn-node-0000"..., repeating a pattern of ten: 3 A100×8 (96
// cores, 1Ti), 2 H100×8 (128 cores, 2Ti), 2 L4×4 (48 cores, 192Gi), 1
// TPU host of SynthTPUChips google.com/tpu chips of model SynthTPUModel
// (112 cores, 384Gi; label tpu.model) and 2 CPU-only nodes (64 cores,
// 256Gi); the first five nodes hold one of each kind. GPU nodes carry the
// label gpu.model. The cluster is named "synthetic:N".
func SyntheticCluster(n int) Cluster {
	n = min(max(n, 0), MaxSynthNodes)
	c := Cluster{Name: "synthetic:" + strconv.Itoa(n), Nodes: make([]api.Node, 0, n)}
	for i := range n {
		k := synthNodeKinds[i%len(synthNodeKinds)]
		typ, label := GPU, ModelLabel
		if k.tpu {
			typ, label = TPU, TPUModelLabel
		}
		c.Nodes = append(c.Nodes, deviceNode(fmt.Sprintf("syn-node-%04d", i), k.cpuCores*1000, k.memGi<<30, typ, k.model, k.devices, label))
	}
	return c
}
