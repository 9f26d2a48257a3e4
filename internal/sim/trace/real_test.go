package trace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realTracesDir returns the shared traces directory: $HETSCHED_TRACES, or
// ../shared/traces beside the repository (../../../../shared/traces from
// this package), or a shared/traces inside the checkout. When none is
// there the test is skipped, naming where it looked: the traces are not a
// package any machine can install (the readers' own tests use fixtures).
func realTracesDir(t *testing.T) string {
	t.Helper()
	candidates := []string{"../../../../shared/traces", "../../../shared/traces"}
	if env := os.Getenv("HETSCHED_TRACES"); env != "" {
		candidates = []string{env}
	}
	for _, dir := range candidates {
		if _, err := os.Stat(filepath.Join(dir, PhillyFile)); err == nil {
			return dir
		}
	}
	msg := "shared traces not found at " + strings.Join(candidates, " or ") + " (set HETSCHED_TRACES)"
	t.Skip(msg)
	return ""
}

// TestRealTraces reads every published trace and checks the totals the
// traces' README states.
func TestRealTraces(t *testing.T) {
	dir := realTracesDir(t)
	countGPUs := func(c Cluster) (n int) {
		for _, node := range c.Nodes {
			n += len(node.Devices)
		}
		return n
	}
	for _, tc := range []struct {
		spec        string
		nodes, gpus int
	}{
		{"openb-gpu", 1213, 6212},
		{"openb", 1523, 6212},
		{"pai", 1897, 6742},
	} {
		c, err := LoadCluster(tc.spec, dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Nodes) != tc.nodes || countGPUs(c) != tc.gpus {
			t.Errorf("cluster %s: %d nodes, %d GPUs; want %d and %d", tc.spec, len(c.Nodes), countGPUs(c), tc.nodes, tc.gpus)
		}
	}

	for _, tc := range []struct {
		spec                   string
		jobs                   int
		gpuJobs, shares, over8 int // jobs asking for GPUs, a share of one, more than 8
	}{
		{"openb:default", 8152, 7064, 3078, 0},
		{"openb:gpushare40", 8152, 7064, 4001, 0},
		{"openb:multigpu20", 8324, 7236, 3078, 0},
		{"philly", 82247, 82247, 0, 289}, // every row is kept: none is malformed or has 0 GPUs
	} {
		w, err := LoadWorkload(tc.spec, dir, Cluster{})
		if err != nil {
			t.Fatal(err)
		}
		var gpuMilli int64
		gpuJobs, shares, over8 := 0, 0, 0
		for _, j := range w.Arrivals {
			g := j.Task.Resources[GPU]
			gpuMilli += g
			if g > 0 {
				gpuJobs++
			}
			if g > 0 && g < 1000 {
				shares++
			}
			if g > 8000 {
				over8++
			}
		}
		if len(w.Arrivals) != tc.jobs || gpuJobs != tc.gpuJobs || shares != tc.shares || over8 != tc.over8 {
			t.Errorf("workload %s: %d jobs, %d GPU jobs, %d shares, %d over 8 GPUs; want %d, %d, %d, %d",
				tc.spec, len(w.Arrivals), gpuJobs, shares, over8, tc.jobs, tc.gpuJobs, tc.shares, tc.over8)
		}
		t.Logf("workload %s: %d jobs, %d asking for GPUs (%d a share of one, %d more than 8), %.1f GPUs in all, last arrival %v",
			tc.spec, len(w.Arrivals), gpuJobs, shares, over8, float64(gpuMilli)/1000, w.Arrivals[len(w.Arrivals)-1].At)
		// ReadPhilly sorts; openb_pod_list_default.csv is sorted by
		// creation_time (gpushare40 is not, multigpu20 has no times).
		for i := 1; i < len(w.Arrivals) && (tc.spec == "philly" || tc.spec == "openb:default"); i++ {
			if w.Arrivals[i].At < w.Arrivals[i-1].At {
				t.Fatalf("workload %s: job %s arrives before %s", tc.spec, w.Arrivals[i].ID, w.Arrivals[i-1].ID)
			}
		}
	}

	th, err := readTrace(dir, GavelThroughputsFile, ReadGavelThroughputs)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(th.JobTypes()); n != 26 {
		t.Errorf("Gavel throughputs: %d job types, want 26", n)
	}
	traces, err := filepath.Glob(filepath.Join(dir, "gavel/traces/*.trace"))
	if err != nil || len(traces) == 0 {
		t.Fatalf("no Gavel traces: %v", err)
	}
	for _, path := range traces {
		name := strings.TrimSuffix(filepath.Base(path), ".trace")
		// ReadGavelTrace fails on a job type and scale the table lacks.
		w, err := LoadWorkload("gavel:"+name, dir, Cluster{})
		if err != nil {
			t.Fatal(err)
		}
		restricted := 0
		for _, j := range w.Arrivals {
			if j.Task.NodeSelector != nil {
				restricted++
			}
			if len(j.ByModel) == 0 || j.Duration <= 0 || j.Task.Metadata["class"] == "" {
				t.Fatalf("gavel:%s job %s: ByModel %v, duration %v", name, j.ID, j.ByModel, j.Duration)
			}
		}
		t.Logf("workload gavel:%s: %d jobs, %d restricted to some models", name, len(w.Arrivals), restricted)
	}
}
