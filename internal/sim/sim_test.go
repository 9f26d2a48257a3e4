package sim

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/sim/trace"
)

func gpuNode(name, model string, gpus int) api.Node {
	n := api.Node{Name: name, Labels: map[string]string{"gpu.model": model},
		Capacity: resource.List{resource.CPU: 32000, resource.Memory: 128 << 30}}
	for i := 0; i < gpus; i++ {
		n.Devices = append(n.Devices, api.Device{Type: "nvidia.com/gpu", ID: strconv.Itoa(i), Model: model})
	}
	return n
}

func gpuJob(i int, arrival, dur time.Duration, gpus int64) trace.Arrival {
	p := 2
	return trace.Arrival{ID: "job" + strconv.Itoa(i), At: arrival, Duration: dur,
		Task: api.Task{Priority: &p, Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": gpus * 1000}}}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// TestRunMeasures: ten 1-GPU jobs of 10 s arriving a second apart on 16
// GPUs all run at once: JCT 10 s (plus the medium tier's batch window),
// makespan and GPU utilization follow.
func TestRunMeasures(t *testing.T) {
	var jobs []trace.Arrival
	for i := 0; i < 10; i++ {
		jobs = append(jobs, gpuJob(i, time.Duration(i)*time.Second, 10*time.Second, 1))
	}
	r, err := Run(Config{Policy: "least-allocated",
		Cluster:  trace.Cluster{Name: "c", Nodes: []api.Node{gpuNode("a", "A100", 8), gpuNode("b", "A100", 8)}},
		Workload: trace.Workload{Name: "w", Arrivals: jobs}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Jobs != 10 || r.Placed != 10 || r.Completed != 10 || r.Unplaced != 0 {
		t.Fatalf("counts: %+v", r)
	}
	// Medium tasks wait for their batch window (5 ms) unless 8 wait.
	window := 0.0025
	if !near(r.JCT.Mean, 10+window) || !near(r.QueueDelay[2].P50, window) {
		t.Errorf("JCT %+v, delay %+v", r.JCT, r.QueueDelay[2])
	}
	if !near(r.Makespan, 19+window) {
		t.Errorf("makespan %v", r.Makespan)
	}
	// 100 GPU-seconds over 16 GPUs × the makespan.
	if want := 100 / (16 * (19 + window)); !near(r.Utilization["nvidia.com/gpu"], want) {
		t.Errorf("GPU utilization %v, want %v", r.Utilization["nvidia.com/gpu"], want)
	}
	if r.SLO[2] != 1 || r.GPUs != 16 {
		// A 5 ms wait meets the medium tier's 5 ms target.
		t.Errorf("SLO %v GPUs %d", r.SLO, r.GPUs)
	}
}

// TestRunTimeByModel: a job's run time comes from the model of the GPUs it
// was given.
func TestRunTimeByModel(t *testing.T) {
	j := gpuJob(0, 0, time.Hour, 1)
	j.ByModel = map[string]time.Duration{"V100": 20 * time.Second, "K80": 80 * time.Second}
	j.Task.NodeSelector = map[string]string{"gpu.model": "K80"}
	r, err := Run(Config{Cluster: trace.Cluster{Nodes: []api.Node{gpuNode("v", "V100", 1), gpuNode("k", "K80", 1)}},
		Workload: trace.Workload{Arrivals: []trace.Arrival{j}}})
	if err != nil {
		t.Fatal(err)
	}
	if !near(r.JCT.Mean, 80.0025) {
		t.Errorf("JCT %v, want 80 s on the K80 (+ the batch window)", r.JCT.Mean)
	}
}

// TestFGDProtocol: jobs never depart; submission stops once the arrived
// GPU demand reaches 130 % of the capacity; the allocation ratio is taken
// at each point; a seed reorders the jobs, the same seed the same way.
func TestFGDProtocol(t *testing.T) {
	var jobs []trace.Arrival
	for i := 0; i < 40; i++ {
		jobs = append(jobs, gpuJob(i, 0, time.Hour, int64(1+i%3)))
	}
	cfg := Config{FGD: true, Seed: 7,
		Cluster:  trace.Cluster{Nodes: []api.Node{gpuNode("a", "A100", 8), gpuNode("b", "A100", 8)}},
		Workload: trace.Workload{Arrivals: jobs}}
	r, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 0 {
		t.Errorf("%d jobs departed", r.Completed)
	}
	if len(r.AllocAt) != 5 || r.AllocAt[4].Arrived != 1.3 {
		t.Fatalf("alloc points %+v", r.AllocAt)
	}
	for _, p := range r.AllocAt {
		if p.Alloc <= 0 || p.Alloc > 1 {
			t.Errorf("point %+v", p)
		}
	}
	// Submission stopped before passing 130 % of 16 GPUs: some of the 40
	// jobs (80 GPUs) were never submitted; all 16 GPUs are taken.
	if r.Jobs == 0 || r.Jobs >= 40 || r.Placed+r.Unplaced != r.Jobs || r.AllocAt[4].Alloc != 1 {
		t.Errorf("jobs %d placed %d unplaced %d, at 130%%: %+v", r.Jobs, r.Placed, r.Unplaced, r.AllocAt[4])
	}
	again, _ := Run(cfg)
	if diff := cmp.Diff(r.AllocAt, again.AllocAt); diff != "" {
		t.Errorf("same seed, different result:\n%s", diff)
	}
	cfg.Seed = 8
	other, _ := Run(cfg)
	if cmp.Equal(r.Series, other.Series) {
		t.Errorf("seeds 7 and 8 gave the same run")
	}
}

// TestWideJobRunsAsGang: a job asking for more GPUs than a node has runs
// as a gang of one node's worth per task, placed together, done with its
// last task; it waits for two whole nodes.
func TestWideJobRunsAsGang(t *testing.T) {
	small := gpuJob(0, 0, 30*time.Second, 4)
	wide := gpuJob(1, time.Second, 10*time.Second, 16)
	r, err := Run(Config{Cluster: trace.Cluster{Nodes: []api.Node{gpuNode("a", "A100", 8), gpuNode("b", "A100", 8)}},
		Workload: trace.Workload{Arrivals: []trace.Arrival{small, wide}}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Completed != 2 || r.Unplaced != 0 {
		t.Fatalf("%+v", r)
	}
	// The wide job starts when the small one ends (30.0025 s) and runs 10 s:
	// done at 40.0025 s, arrived at 1 s.
	if !near(r.Makespan, 40.0025) || !near(r.JCT.Max, 39.0025) {
		t.Errorf("makespan %v, JCT %+v", r.Makespan, r.JCT)
	}
	if u := r.Utilization["nvidia.com/gpu"]; !near(u, (4*30+16*10)/(16*40.0025)) {
		t.Errorf("GPU utilization %v", u)
	}
}

// TestEveryPolicyCompletesTheWork: each registered policy runs a mixed
// workload to completion through the same core.
func TestEveryPolicyCompletesTheWork(t *testing.T) {
	var jobs []trace.Arrival
	for i := 0; i < 60; i++ {
		j := gpuJob(i, time.Duration(i)*500*time.Millisecond, time.Duration(5+i%7)*time.Second, int64(i%3))
		j.Task.Queue = "q" + strconv.Itoa(i%2)
		jobs = append(jobs, j)
	}
	nodes := []api.Node{gpuNode("a", "A100", 4), gpuNode("b", "V100", 4), gpuNode("c", "V100", 2)}
	for _, p := range strings.Split(core.PolicyNames(), ", ") {
		r, err := Run(Config{Policy: p, Cluster: trace.Cluster{Nodes: nodes}, Workload: trace.Workload{Arrivals: jobs}})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if r.Completed != 60 || r.Policy != p {
			t.Errorf("%s: completed %d of 60", p, r.Completed)
		}
		// Two queues with the same demand: close to equal shares.
		if r.Queues != 2 || r.Fairness < 0.9 || r.Fairness > 1 {
			t.Errorf("%s: %d queues, Jain's index %v", p, r.Queues, r.Fairness)
		}
	}
}

// TestFairnessSeesAHog: one queue with all the work and one with a
// trickle are far from equal shares.
func TestFairnessSeesAHog(t *testing.T) {
	var jobs []trace.Arrival
	for i := 0; i < 40; i++ {
		j := gpuJob(i, time.Duration(i)*time.Second, 20*time.Second, 1)
		j.Task.Queue = "big"
		if i%10 == 0 {
			j.Task.Queue = "small"
		}
		jobs = append(jobs, j)
	}
	r, err := Run(Config{Cluster: trace.Cluster{Nodes: []api.Node{gpuNode("a", "A100", 8)}}, Workload: trace.Workload{Arrivals: jobs}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Fairness > 0.8 || r.Fairness < 0.5 {
		t.Errorf("Jain's index %v for a 9:1 split", r.Fairness)
	}
}

// TestSeries: the time series samples the whole run on an even time grid,
// in order, with the demand present falling back to zero as jobs complete.
func TestSeries(t *testing.T) {
	var jobs []trace.Arrival
	for i := 0; i < 50; i++ {
		jobs = append(jobs, gpuJob(i, time.Duration(i)*time.Second, 30*time.Second, 1))
	}
	r, err := Run(Config{MaxSamples: 40, Cluster: trace.Cluster{Nodes: []api.Node{gpuNode("a", "A100", 8)}}, Workload: trace.Workload{Arrivals: jobs}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Series) < 20 || len(r.Series) > 40 {
		t.Fatalf("%d samples", len(r.Series))
	}
	peak := 0.0
	for i, s := range r.Series {
		if i > 0 && s.T <= r.Series[i-1].T {
			t.Fatalf("sample %d at %v after %v", i, s.T, r.Series[i-1].T)
		}
		peak = max(peak, s.Alloc["nvidia.com/gpu"])
		if s.Demand < s.Alloc["nvidia.com/gpu"]-1e-9 {
			t.Errorf("sample %d: demand %v below allocation %v", i, s.Demand, s.Alloc["nvidia.com/gpu"])
		}
	}
	last := r.Series[len(r.Series)-1]
	if peak != 1 || last.Demand != 0 || last.T < r.Makespan-1 {
		t.Errorf("peak %v, last %+v, makespan %v", peak, last, r.Makespan)
	}
}

// TestUnplacedJobsCount: a job no node can ever hold misses its tier's
// SLO (attainment is over every submitted job), is counted unfinished
// and left out of JCT; the tier's job count says so.
func TestUnplacedJobsCount(t *testing.T) {
	jobs := []trace.Arrival{gpuJob(0, 0, 10*time.Second, 1), gpuJob(1, time.Second, 10*time.Second, 4)}
	for i := range jobs {
		jobs[i].Task.Priority = ptrInt(0)
	}
	r, err := Run(Config{Policy: "least-allocated",
		Cluster:  trace.Cluster{Name: "c", Nodes: []api.Node{gpuNode("a", "A100", 2)}},
		Workload: trace.Workload{Name: "w", Arrivals: jobs}})
	if err != nil {
		t.Fatal(err)
	}
	if r.TierJobs != [4]int{2, 0, 0, 0} || r.Unplaced != 1 || r.Unfinished != 1 || r.Completed != 1 || r.JCT.N != 1 {
		t.Fatalf("counts: tiers %v unplaced %d unfinished %d completed %d JCT n %d", r.TierJobs, r.Unplaced, r.Unfinished, r.Completed, r.JCT.N)
	}
	if !near(r.SLO[0], 0.5) || r.SLO[1] != 1 {
		t.Errorf("SLO %v, want 0.5 for urgent (one of two placed in time) and 1 for an empty tier", r.SLO)
	}
	if r.Protocol != "replay" || r.Durations != "learned" {
		t.Errorf("protocol %q, durations %q", r.Protocol, r.Durations)
	}
}

// TestKnownDurations: with the true run times told, sjf runs the short
// job that arrived second before the long one that arrived first, both
// waiting for the only GPU; learning them, it cannot tell them apart and
// keeps arrival order.
func TestKnownDurations(t *testing.T) {
	jobs := []trace.Arrival{
		gpuJob(0, 0, 100*time.Second, 1),            // holds the GPU
		gpuJob(1, time.Second, 1000*time.Second, 1), // long, first in line
		gpuJob(2, 2*time.Second, 10*time.Second, 1), // short, second
	}
	jct := map[bool]float64{}
	for _, known := range []bool{false, true} {
		r, err := Run(Config{Policy: "sjf", KnownDurations: known,
			Cluster:  trace.Cluster{Name: "c", Nodes: []api.Node{gpuNode("a", "A100", 1)}},
			Workload: trace.Workload{Name: "w", Arrivals: jobs}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Completed != 3 {
			t.Fatalf("known=%v: %d completed", known, r.Completed)
		}
		if want := map[bool]string{false: "learned", true: "known"}[known]; r.Durations != want {
			t.Errorf("durations %q, want %q", r.Durations, want)
		}
		jct[known] = r.JCT.Mean
	}
	// Short first: JCTs 100, 108, 1108 (mean 438.7); long first: 100,
	// 1099, 1108 (mean 769).
	if !(jct[true] < 500 && jct[false] > 700) {
		t.Errorf("mean JCT known %v, learned %v: want the short job first only when durations are known", jct[true], jct[false])
	}
}

func ptrInt(v int) *int { return &v }

// TestSRTFResumesFromCheckpoint: under srtf with known durations a short
// job swaps out a long one that ran past the minimum run time; with
// Resume the long job's next attempt runs only the work left, after the
// restart cost; without it, all of it again.
func TestSRTFResumesFromCheckpoint(t *testing.T) {
	jobs := []trace.Arrival{gpuJob(0, 0, 100*time.Second, 1), gpuJob(1, 70*time.Second, 10*time.Second, 1)}
	end := map[bool]float64{}
	for _, resume := range []bool{false, true} {
		r, err := Run(Config{Policy: "srtf", KnownDurations: true, Resume: resume, RestartCost: 5 * time.Second,
			Cluster:  trace.Cluster{Name: "c", Nodes: []api.Node{gpuNode("a", "A100", 1)}},
			Workload: trace.Workload{Name: "w", Arrivals: jobs}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Completed != 2 || r.Preemptions != 1 || r.PreemptedJobs != 1 || r.MaxPreemptions != 1 {
			t.Fatalf("resume=%v: completed %d, preemptions %d (%d jobs, max %d)", resume, r.Completed, r.Preemptions, r.PreemptedJobs, r.MaxPreemptions)
		}
		end[resume] = r.Makespan
	}
	// Long: 0–70 s, swapped out; short 70–80 s; long again from 80 s:
	// with Resume 5 s of restart and the 30 s left (ends at 115 s),
	// without it 100 s (ends at 180 s). The medium tier's batch window
	// adds milliseconds.
	if math.Abs(end[true]-115) > 0.1 || math.Abs(end[false]-180) > 0.1 {
		t.Errorf("makespan with resume %v, without %v; want 115 and 180", end[true], end[false])
	}
}
