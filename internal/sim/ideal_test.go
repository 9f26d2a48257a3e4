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
		Workload: trace.Workload{Jobs: []trace.Job{wide, short, pair, cpu, huge}}})
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
	if _, err := Run(Config{Policy: IdealSRTF, FGD: true, Cluster: trace.Cluster{Nodes: []api.Node{gpuNode("a", "A100", 8)}},
		Workload: trace.Workload{Jobs: []trace.Job{short}}}); err == nil {
		t.Error("the fgd protocol was accepted for the reference bound")
	}
}
