package sim

import (
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/sim/trace"
)

// TestIdealSRTFRepacksAtEveryEvent: on two 8-GPU nodes, a 16-GPU job of
// 10 h runs from 0. At 1 h a 1-GPU job of 1 h and a 2-GPU job of 3 h
// arrive with less time left: the reference stops the wide job (it needs
// both nodes whole), runs both on one node (best fit), and resumes the
// wide one for free once they are done (4 h), with 9 h left: JCTs 1 h,
// 3 h and 13 h. A job with no GPU runs at once; a 24-GPU job never fits.
func TestIdealSRTFRepacksAtEveryEvent(t *testing.T) {
	h := time.Hour
	wide := gpuJob(0, 0, 10*h, 16)
	short := gpuJob(1, h, h, 1)
	pair := gpuJob(2, h, 3*h, 2)
	cpu := gpuJob(3, 0, h, 0)
	huge := gpuJob(4, 0, h, 24)
	r, err := Run(Config{Policy: IdealSRTF, Cluster: trace.Cluster{Nodes: []api.Node{gpuNode("a", "A100", 8), gpuNode("b", "A100", 8)}},
		Workload: trace.Workload{Arrivals: []trace.Arrival{wide, short, pair, cpu, huge}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 4 || r.Unplaced != 1 || r.Jobs != 5 {
		t.Fatalf("completed %d, unplaced %d, jobs %d; want 4, 1, 5", r.Completed, r.Unplaced, r.Jobs)
	}
	want := []float64{1, 1, 3, 13}
	if r.JCT.N != 4 || !near(r.JCT.Max, want[3]*3600) || !near(r.JCT.Mean, (1+1+3+13)*3600/4.0) {
		t.Fatalf("JCT %+v; want max %v h, mean %v h", r.JCT, want[3], (1+1+3+13)/4.0)
	}
	if !near(r.Makespan, 13*3600) {
		t.Errorf("makespan %v s, want 13 h", r.Makespan)
	}
	if one, multi := r.JCTByWidth["one-node"], r.JCTByWidth["multi-node"]; one.N != 3 || multi.N != 1 || !near(multi.Mean, 13*3600) || !near(one.Mean, (1+1+3)*3600/3.0) {
		t.Errorf("JCT by width %+v; want the wide job's 13 h apart from the others' (1, 1, 3 h)", r.JCTByWidth)
	}
	if _, err := Run(Config{Policy: IdealSRTF, FGD: true, Cluster: trace.Cluster{Nodes: []api.Node{gpuNode("a", "A100", 8)}},
		Workload: trace.Workload{Arrivals: []trace.Arrival{short}}}); err == nil {
		t.Error("the fgd protocol was accepted for the reference bound")
	}
}

// TestJCTByWidth: a replay splits JCT into jobs that fit one node and
// wider ones, and leaves the split out when no job is wider.
func TestJCTByWidth(t *testing.T) {
	h := time.Hour
	nodes := []api.Node{gpuNode("a", "A100", 8), gpuNode("b", "A100", 8)}
	for _, pol := range []string{"least-allocated", IdealSRTF} {
		r, err := Run(Config{Policy: pol, KnownDurations: true, Cluster: trace.Cluster{Nodes: nodes},
			Workload: trace.Workload{Arrivals: []trace.Arrival{gpuJob(0, 0, 2*h, 16), gpuJob(1, 0, h, 4), gpuJob(2, 3*h, h, 8)}}})
		if err != nil {
			t.Fatal(err)
		}
		if one, multi := r.JCTByWidth["one-node"], r.JCTByWidth["multi-node"]; one.N != 2 || multi.N != 1 || multi.Mean < 2*3600 {
			t.Errorf("%s: JCT by width %+v, want 2 one-node jobs and the 16-GPU one", pol, r.JCTByWidth)
		}
		r, err = Run(Config{Policy: pol, KnownDurations: true, Cluster: trace.Cluster{Nodes: nodes},
			Workload: trace.Workload{Arrivals: []trace.Arrival{gpuJob(1, 0, h, 4)}}})
		if err != nil {
			t.Fatal(err)
		}
		if r.JCTByWidth != nil {
			t.Errorf("%s: JCT by width %+v without a multi-node job, want none", pol, r.JCTByWidth)
		}
	}
}
