package trace

import (
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// fixtureTraces lays out small trace files as the shared traces directory
// does and returns its path.
func fixtureTraces(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFixture(t, dir, OpenbAllNodesFile, openbNodes)
	writeFixture(t, dir, OpenbGPUNodesFile, "sn,cpu_milli,memory_mib,gpu,model\nnode-b,64000,262144,2,P100\n")
	writeFixture(t, dir, "alibaba-openb-2023/openb_pod_list_default.csv", openbPods)
	writeFixture(t, dir, PAIMachinesFile, "m-cpu,CPU,96,512,0\nm-t4,T4,96,512,2\n")
	writeFixture(t, dir, PhillyFile, phillyExcerpt)
	writeFixture(t, dir, GavelThroughputsFile, gavelThroughputs)
	writeFixture(t, dir, "gavel/traces/max_min_fairness.trace", gavelTrace)
	writeFixture(t, dir, "gavel/traces/empty.trace", "\n")
	return dir
}

func TestLoadCluster(t *testing.T) {
	dir := fixtureTraces(t)
	for _, tc := range []struct {
		spec         string
		nodes, gpus  int
		firstNode    string
		firstNodeCPU int64
	}{
		{"openb", 3, 10, "node-a", 32000},
		{"openb-gpu", 1, 2, "node-b", 64000},
		{"pai", 2, 2, "m-cpu", 96000},
		{"gavel", 6, 48, "v100-0", 32000},
		{"gavel:1,0,9", 3, 10, "v100-0", 32000},
		{"synthetic:3", 3, 16, "syn-node-0000", 96000},
	} {
		c, err := LoadCluster(tc.spec, dir)
		if err != nil {
			t.Errorf("LoadCluster(%q): %v", tc.spec, err)
			continue
		}
		g := 0
		for _, n := range c.Nodes {
			g += len(n.Devices)
		}
		if c.Name != tc.spec || len(c.Nodes) != tc.nodes || g != tc.gpus || c.Nodes[0].Name != tc.firstNode ||
			c.Nodes[0].Capacity[resource.CPU] != tc.firstNodeCPU {
			t.Errorf("LoadCluster(%q): %q, %d nodes, %d devices, first %s; want %d nodes, %d devices, first %s",
				tc.spec, c.Name, len(c.Nodes), g, c.Nodes[0].Name, tc.nodes, tc.gpus, tc.firstNode)
		}
	}

	writeFixture(t, dir, "nodes.yaml", "nodes:\n- name: gpu-1\n  labels: {gpu.model: L4}\n  capacity: {cpu: 8, memory: 32Gi}\n"+
		"  devices:\n  - {type: nvidia.com/gpu, id: \"0\", model: L4}\n")
	c, err := LoadCluster("file:"+filepath.Join(dir, "nodes.yaml"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []api.Node{{Name: "gpu-1", Labels: map[string]string{"gpu.model": "L4"},
		Capacity: resource.List{"cpu": 8000, "memory": 32 << 30}, Devices: gpus("L4", 1)}}
	if d := cmp.Diff(want, c.Nodes); d != "" {
		t.Fatalf("file: (-want +got):\n%s", d)
	}
}

func TestLoadClusterErrors(t *testing.T) {
	dir := fixtureTraces(t)
	writeFixture(t, dir, "bad.yaml", "nodes:\n- name: a\n  bogus: 1\n")
	writeFixture(t, dir, "dup.yaml", "nodes:\n- name: a\n- name: a\n")
	writeFixture(t, dir, "none.yaml", "nodes: []\n")
	writeFixture(t, dir, "broken/"+OpenbAllNodesFile, "sn,cpu_milli,memory_mib,gpu,model\nn1,x,1,0,\n")
	for _, tc := range []struct{ spec, dir, want string }{
		{"nope", dir, `cluster "nope": unknown cluster "nope"`},
		{"openb:x", dir, "openb takes no argument"},
		{"pai:1", dir, "pai takes no argument"},
		{"gavel:1,2", dir, "want gavel:V100,P100,K80"},
		{"gavel:1,x,2", dir, "p100 GPUs: not an integer"},
		{"gavel:0,0,100001", dir, "k80 GPUs"},
		{"gavel:0,0,0", dir, `cluster "gavel:0,0,0": no nodes`},
		{"synthetic", dir, "want synthetic:N"},
		{"synthetic:0", dir, "want synthetic:N"},
		{"file:", dir, "want file:PATH"},
		{"file:" + filepath.Join(dir, "bad.yaml"), dir, "bogus"},
		{"file:" + filepath.Join(dir, "dup.yaml"), dir, `nodes[1].name: duplicate node "a"`},
		{"file:" + filepath.Join(dir, "none.yaml"), dir, "no nodes"},
		{"openb", filepath.Join(dir, "broken"), "openb_node_list_all_node.csv: line 2: cpu_milli: not an integer"},
		{"pai", t.TempDir(), "pai_machine_spec.csv"},
	} {
		_, err := LoadCluster(tc.spec, tc.dir)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "cluster ") {
			t.Errorf("LoadCluster(%q): error %v, want one containing %q", tc.spec, err, tc.want)
		}
	}
	_, err := LoadCluster("pai", t.TempDir())
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestLoadWorkload(t *testing.T) {
	dir := fixtureTraces(t)
	for _, tc := range []struct {
		spec    string
		jobs    int
		firstID string
	}{
		{"openb", 5, "pod-0"},
		{"openb:default", 5, "pod-0"},
		{"philly", 3, "philly-3"},
		{"philly:2", 2, "philly-3"},
		{"philly:100", 3, "philly-3"},
		{"gavel", 2, "gavel-1"},
		{"gavel:max_min_fairness", 2, "gavel-1"},
		{"synthetic", 1000, "syn-000000"},
		{"synthetic:jobs=10,rate=2,mean=30m,dist=exponential,queues=2,seed=5", 10, "syn-000000"},
	} {
		w, err := LoadWorkload(tc.spec, dir, Cluster{})
		if err != nil {
			t.Errorf("LoadWorkload(%q): %v", tc.spec, err)
			continue
		}
		if w.Name != tc.spec || len(w.Arrivals) != tc.jobs || w.Arrivals[0].ID != tc.firstID {
			t.Errorf("LoadWorkload(%q): %q with %d jobs, first %s; want %d, first %s", tc.spec, w.Name, len(w.Arrivals), w.Arrivals[0].ID, tc.jobs, tc.firstID)
		}
	}
}

func TestLoadWorkloadErrors(t *testing.T) {
	dir := fixtureTraces(t)
	for _, tc := range []struct{ spec, want string }{
		{"nope", `workload "nope": unknown workload "nope"`},
		{"openb:bogus", "unknown openb workload"},
		{"openb:gpushare40", "no such file"},
		{"philly:0", "want philly:LIMIT"},
		{"philly:x", "want philly:LIMIT"},
		{"gavel:../x", "want gavel:NAME"},
		{"gavel:a/b", "want gavel:NAME"},
		{"gavel:empty", "no jobs"},
		{"gavel:missing", "missing.trace"},
		{"synthetic:jobs=0", "jobs: "},
		{"synthetic:jobs", "want K=V"},
		{"synthetic:bogus=1", `unknown key "bogus"`},
		{"synthetic:rate=1,rate=2", "rate: set twice"},
		{"synthetic:mean=soon", "mean: want a duration"},
		{"synthetic:dist=pareto", "synthetic dist:"},
		{"synthetic:cpu=-1", "cpu: "},
		{"synthetic:pinned=2", "synthetic pinned:"},
		{"synthetic:seed=1.5", "seed: "},
	} {
		_, err := LoadWorkload(tc.spec, dir, Cluster{})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "workload ") {
			t.Errorf("LoadWorkload(%q): error %v, want one containing %q", tc.spec, err, tc.want)
		}
	}
}

func TestParseSynthSpec(t *testing.T) {
	cfg, seed, err := ParseSynthSpec(" jobs=5, rate=0.5 ,mean=90,dist=constant,sigma=0.5,cpu=1,gpu1=0,gpu2=0,gpu4=0,gpu8=0,tpu=0," +
		"pinned=0.5,tpualt=0,tier0=1,tier1=0,tier2=0,tier3=0,queues=3,seed=-9")
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultSynthConfig()
	want.Jobs, want.Rate, want.MeanDuration, want.Dist, want.Sigma = 5, 0.5, 90e9, DistConstant, 0.5
	want.Sizes = SizeMix{CPU: 1}
	want.Pinned, want.TPUAlt, want.Tiers, want.Queues = 0.5, 0, [4]float64{1, 0, 0, 0}, 3
	if d := cmp.Diff(want, cfg); d != "" || seed != -9 {
		t.Fatalf("ParseSynthSpec: seed %d (-want +got):\n%s", seed, d)
	}
}

func TestClusterModels(t *testing.T) {
	def := DefaultSynthConfig().Models
	if d := cmp.Diff(def, clusterModels(def, SyntheticCluster(2).withoutGPUs())); d != "" {
		t.Errorf("no GPUs: (-want +got):\n%s", d)
	}
	// The synthetic cluster has all three default models.
	if d := cmp.Diff(def, clusterModels(def, SyntheticCluster(10))); d != "" {
		t.Errorf("synthetic cluster (-want +got):\n%s", d)
	}
	want := []ModelShare{{Name: "k80", Weight: 24, Speed: 1}, {Name: "p100", Weight: 16, Speed: 1}, {Name: "v100", Weight: 8, Speed: 1}}
	if d := cmp.Diff(want, clusterModels(def, GavelCluster(8, 16, 24))); d != "" {
		t.Errorf("gavel cluster (-want +got):\n%s", d)
	}
	w, err := LoadWorkload("synthetic:jobs=200,pinned=1", "", GavelCluster(8, 16, 24))
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range w.Arrivals {
		if m := j.Task.NodeSelector[ModelLabel]; j.Task.Resources[GPU] > 0 && m != "k80" && m != "p100" && m != "v100" {
			t.Fatalf("job %s pinned to %q, not a Gavel model", j.ID, m)
		}
	}
}

// withoutGPUs returns the cluster's CPU-only nodes.
func (c Cluster) withoutGPUs() Cluster {
	out := Cluster{Name: c.Name}
	for _, n := range c.Nodes {
		if len(n.Devices) == 0 {
			out.Nodes = append(out.Nodes, n)
		}
	}
	return out
}
