package trace

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

func TestSyntheticDeterministic(t *testing.T) {
	cfg := SynthConfig{Jobs: 500}
	a, b := Synthetic(cfg, 7), Synthetic(cfg, 7)
	if d := cmp.Diff(a, b); d != "" {
		t.Fatalf("same seed, different workloads (-first +second):\n%s", d)
	}
	c := Synthetic(cfg, 8)
	if cmp.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave the same workload")
	}
	// Changing Pinned or TPUAlt changes only those decisions.
	p := Synthetic(SynthConfig{Jobs: 500, Pinned: 1}, 7)
	for i := range a.Arrivals {
		if a.Arrivals[i].At != p.Arrivals[i].At || a.Arrivals[i].Duration != p.Arrivals[i].Duration ||
			a.Arrivals[i].Task.Metadata["class"] != p.Arrivals[i].Task.Metadata["class"] {
			t.Fatalf("job %d differs beyond pinning: %+v vs %+v", i, a.Arrivals[i], p.Arrivals[i])
		}
	}
}

func TestSyntheticDistribution(t *testing.T) {
	cfg := DefaultSynthConfig()
	cfg.Jobs = 20000
	w := Synthetic(cfg, 1)
	if len(w.Arrivals) != cfg.Jobs || w.Name != "synthetic" {
		t.Fatalf("%d jobs named %q, want %d named synthetic", len(w.Arrivals), w.Name, cfg.Jobs)
	}
	kinds := map[string]int{}
	tiers := [4]int{}
	queues := map[string]int{}
	var sumDur float64
	gpuJobs, pinned, alts := 0, 0, 0
	for i, j := range w.Arrivals {
		if err := j.Task.Validate(); err != nil {
			t.Fatalf("job %s: %v", j.ID, err)
		}
		if i > 0 && j.At < w.Arrivals[i-1].At {
			t.Fatalf("job %s arrives before the one ahead of it", j.ID)
		}
		if j.Duration < time.Second || j.Duration > 1000*cfg.MeanDuration {
			t.Fatalf("job %s: duration %v outside [1s, 1000×mean]", j.ID, j.Duration)
		}
		kinds[j.Task.Metadata["class"]]++
		tiers[*j.Task.Priority]++
		queues[j.Task.Queue]++
		sumDur += j.Duration.Seconds()
		if g := j.Task.Resources[GPU]; g > 0 {
			gpuJobs++
			if j.Task.NodeSelector != nil {
				pinned++
			}
			if len(j.Task.Alternatives) > 0 {
				alts++
				if g > 4000 || j.Task.NodeSelector != nil {
					t.Fatalf("job %s: a TPU alternative on %v GPUs, selector %v", j.ID, g, j.Task.NodeSelector)
				}
			}
			if j.ByModel["A100"] != j.Duration || j.ByModel["H100"] != time.Duration(math.Round(float64(j.Duration)/2)) {
				t.Fatalf("job %s: ByModel %v for duration %v", j.ID, j.ByModel, j.Duration)
			}
		}
	}
	near := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol*want {
			t.Errorf("%s = %.4g, want %.4g ± %.0f%%", what, got, want, tol*100)
		}
	}
	n := float64(cfg.Jobs)
	near("mean inter-arrival (s)", w.Arrivals[len(w.Arrivals)-1].At.Seconds()/(n-1), 1/cfg.Rate, 0.05)
	near("mean duration (s)", sumDur/n, cfg.MeanDuration.Seconds(), 0.1)
	for i, k := range sizeKinds {
		near("fraction of "+k, float64(kinds[k])/n, cfg.Sizes.weights()[i], 0.15)
	}
	for p := range tiers {
		near("fraction of tier "+api.TierNames[p], float64(tiers[p])/n, cfg.Tiers[p], 0.2)
	}
	near("pinned fraction of GPU jobs", float64(pinned)/float64(gpuJobs), cfg.Pinned, 0.1)
	if len(queues) != cfg.Queues || queues["q-0"] == 0 || queues["q-3"] == 0 {
		t.Errorf("queues %v, want q-0..q-3", queues)
	}
	if alts == 0 {
		t.Error("no job has a TPU alternative")
	}
}

func TestSyntheticKinds(t *testing.T) {
	one := func(s SizeMix) Arrival {
		t.Helper()
		w := Synthetic(SynthConfig{Jobs: 1, Sizes: s, Dist: DistConstant, MeanDuration: time.Minute, Pinned: 1,
			Models: []ModelShare{{Name: "X1", Weight: 1, Speed: 4}}}, 3)
		return w.Arrivals[0]
	}
	j := one(SizeMix{GPU4: 1})
	want := Arrival{ID: "syn-000000", Duration: time.Minute,
		Task: j.Task, ByModel: map[string]time.Duration{"X1": 15 * time.Second}}
	want.Task.Resources = resource.List{"nvidia.com/gpu": 4000, "cpu": 32000, "memory": 128 << 30}
	want.Task.NodeSelector = map[string]string{"gpu.model": "X1"}
	if d := cmp.Diff(want, j); d != "" {
		t.Fatalf("a 4-GPU job (-want +got):\n%s", d)
	}
	j = one(SizeMix{TPU: 1})
	if d := cmp.Diff(resource.List{"google.com/tpu": 4000, "cpu": 32000, "memory": 128 << 30}, j.Task.Resources); d != "" {
		t.Fatalf("a TPU job's resources (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]time.Duration{SynthTPUModel: time.Minute}, j.ByModel); d != "" {
		t.Fatalf("a TPU job's ByModel (-want +got):\n%s", d)
	}
	j = one(SizeMix{CPU: 1})
	c := j.Task.Resources["cpu"]
	if j.ByModel != nil || len(j.Task.Resources) != 2 || c < 1000 || c > 16000 || j.Task.Resources["memory"] != c/1000*4<<30 {
		t.Fatalf("a CPU job: %+v", j)
	}
}

func TestSynthConfigValidate(t *testing.T) {
	if err := (SynthConfig{}).Validate(); err != nil {
		t.Fatalf("zero config (defaults): %v", err)
	}
	if err := DefaultSynthConfig().Validate(); err != nil {
		t.Fatalf("DefaultSynthConfig: %v", err)
	}
	for _, tc := range []struct {
		mod  func(*SynthConfig)
		want string
	}{
		{func(c *SynthConfig) { c.Jobs = -1 }, "jobs"},
		{func(c *SynthConfig) { c.Jobs = MaxSynthJobs + 1 }, "jobs"},
		{func(c *SynthConfig) { c.Rate = math.NaN() }, "rate"},
		{func(c *SynthConfig) { c.Rate = 1e-9 }, "rate"},
		{func(c *SynthConfig) { c.MeanDuration = time.Millisecond }, "mean"},
		{func(c *SynthConfig) { c.Dist = "pareto" }, "dist"},
		{func(c *SynthConfig) { c.Sigma = 9 }, "sigma"},
		{func(c *SynthConfig) { c.Pinned = 1.5 }, "pinned"},
		{func(c *SynthConfig) { c.TPUAlt = -0.1 }, "tpualt"},
		{func(c *SynthConfig) { c.Queues = 1001 }, "queues"},
		{func(c *SynthConfig) { c.CPUPerGPU = -1 }, "cpuPerGPU"},
		{func(c *SynthConfig) { c.MemoryPerGPU = -1 }, "memoryPerGPU"},
		{func(c *SynthConfig) { c.Sizes.CPU = -1 }, "sizes"},
		{func(c *SynthConfig) { c.Tiers[2] = math.Inf(1) }, "tiers"},
		{func(c *SynthConfig) { c.Models = []ModelShare{} }, "models"},
		{func(c *SynthConfig) { c.Models = []ModelShare{{Name: "a b", Weight: 1, Speed: 1}} }, "models[0].name"},
		{func(c *SynthConfig) {
			c.Models = []ModelShare{{Name: "a", Weight: 1, Speed: 1}, {Name: "a", Weight: 1, Speed: 1}}
		}, "models[1].name"},
		{func(c *SynthConfig) { c.Models = []ModelShare{{Name: "a", Weight: 1}} }, "models[0].speed"},
		{func(c *SynthConfig) { c.Models = []ModelShare{{Name: "a", Speed: 1}} }, "models"},
	} {
		cfg := DefaultSynthConfig()
		tc.mod(&cfg)
		err := cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), "synthetic "+tc.want+":") {
			t.Errorf("config %+v: error %v, want one naming %s", cfg, err, tc.want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Synthetic with an invalid config did not panic")
		}
	}()
	Synthetic(SynthConfig{Dist: "pareto"}, 1)
}

func TestSyntheticCluster(t *testing.T) {
	c := SyntheticCluster(10)
	if c.Name != "synthetic:10" || len(c.Nodes) != 10 {
		t.Fatalf("%q with %d nodes", c.Name, len(c.Nodes))
	}
	models := map[string]int{}
	for _, n := range c.Nodes {
		if err := n.Validate(); err != nil {
			t.Fatalf("node %s: %v", n.Name, err)
		}
		m := n.Labels[ModelLabel] + n.Labels[TPUModelLabel]
		models[m] += len(n.Devices)
	}
	want := map[string]int{"A100": 24, "H100": 16, "L4": 8, SynthTPUModel: 4, "": 0}
	if d := cmp.Diff(want, models); d != "" {
		t.Fatalf("devices by model (-want +got):\n%s", d)
	}
	if d := cmp.Diff(api.Node{Name: "syn-node-0004", Capacity: resource.List{"cpu": 112000, "memory": 384 << 30},
		Labels:  map[string]string{"tpu.model": SynthTPUModel},
		Devices: []api.Device{{Type: "google.com/tpu", ID: "0", Model: SynthTPUModel}, {Type: "google.com/tpu", ID: "1", Model: SynthTPUModel}, {Type: "google.com/tpu", ID: "2", Model: SynthTPUModel}, {Type: "google.com/tpu", ID: "3", Model: SynthTPUModel}},
	}, c.Nodes[4]); d != "" {
		t.Fatalf("the TPU node (-want +got):\n%s", d)
	}
	if n := len(SyntheticCluster(-3).Nodes); n != 0 {
		t.Fatalf("SyntheticCluster(-3) has %d nodes", n)
	}
}
