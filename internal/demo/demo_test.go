package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

func fixture(t *testing.T) (api.NodesFile, Waves) {
	t.Helper()
	f, err := DefaultFleet()
	if err != nil {
		t.Fatal(err)
	}
	// A fixed stand-in for this machine keeps the run deterministic.
	f.Nodes = append(f.Nodes, api.Node{Name: "local-test", Capacity: resource.List{resource.CPU: 4000, resource.Memory: 8 << 30}})
	w, err := DefaultWaves()
	if err != nil {
		t.Fatal(err)
	}
	return f, w
}

func TestDefaultFleetMatchesTheBrief(t *testing.T) {
	f, _ := fixture(t)
	gpuModels := map[string]int{}
	tpus, cpuOnly := 0, 0
	for _, n := range f.Nodes {
		if err := n.Validate(); err != nil {
			t.Fatalf("node %s: %v", n.Name, err)
		}
		if len(n.Devices) == 0 {
			cpuOnly++
		}
		for _, d := range n.Devices {
			if !d.Simulated {
				t.Errorf("node %s device %s: declared devices must be marked simulated", n.Name, d.ID)
			}
			switch d.Type {
			case "nvidia.com/gpu":
				gpuModels[d.Model]++
			case "google.com/tpu":
				tpus++
			}
		}
	}
	if len(gpuModels) != 2 || gpuModels["H100-80GB"] != 8 || gpuModels["A100-40GB"] != 8 {
		t.Errorf("want two 8-GPU nodes of different models, got %v", gpuModels)
	}
	if tpus != 4 {
		t.Errorf("want one 4-TPU node, got %d TPUs", tpus)
	}
	if cpuOnly != 3 { // two CPU nodes and the local stand-in
		t.Errorf("want 3 nodes without devices, got %d", cpuOnly)
	}
}

func TestRunPlacesEveryWave(t *testing.T) {
	f, w := fixture(t)
	var out bytes.Buffer
	s, err := Run(&out, f, w, Options{})
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, a := range w.Arrivals {
		total += len(a.Tasks)
	}
	if s.Submitted != total || s.Succeeded != total || s.Unplaced != 0 || s.Expired != 0 || s.Skipped != 0 {
		t.Fatalf("summary %+v, want all %d tasks succeeded", s, total)
	}
	if s.Preempted == 0 || !strings.Contains(out.String(), "for hotfix-rollout") {
		t.Errorf("the urgent 8-GPU hotfix must preempt someone; output:\n%s", out.String())
	}
	if s.MaxDelay[0] != 0 {
		t.Errorf("urgent tasks waited %s", s.MaxDelay[0])
	}
	// Every medium and low task fits at once in this workload, so first
	// attempts wait only for their batch window.
	if s.MaxFirstDelay[2] > 5*time.Millisecond || s.MaxFirstDelay[3] > 20*time.Millisecond {
		t.Errorf("batched tiers waited past their windows: medium %s low %s", s.MaxFirstDelay[2], s.MaxFirstDelay[3])
	}
	if !strings.Contains(out.String(), "google.com/tpu:") {
		t.Errorf("no task ran on the TPU node:\n%s", out.String())
	}
	if u := s.Utilization["nvidia.com/gpu"]; u <= 0 || u > 1 {
		t.Errorf("GPU utilization %v out of (0,1]", u)
	}
	// eval-llm depends on both trainings: it must start after they finish.
	text := out.String()
	if strings.Index(text, "place    eval-llm") < strings.LastIndex(text, "finish   train-llm") {
		t.Errorf("eval-llm placed before the trainings finished:\n%s", text)
	}
}

func TestRunWithEveryPolicy(t *testing.T) {
	for _, p := range core.Policies() {
		f, w := fixture(t)
		var out bytes.Buffer
		s, err := Run(&out, f, w, Options{Policy: p, Quiet: true})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if s.Succeeded != s.Submitted || s.Unplaced != 0 {
			t.Errorf("%s: %+v", p, s)
		}
		if out.Len() != 0 {
			t.Errorf("%s: quiet run printed %q", p, out.String())
		}
	}
}

func TestRunRejectsUnknownPolicy(t *testing.T) {
	f, w := fixture(t)
	_, err := Run(&bytes.Buffer{}, f, w, Options{Policy: "fastest"})
	if err == nil || !strings.Contains(err.Error(), "policy") {
		t.Fatalf("want a policy error, got %v", err)
	}
}

func TestLocalNodeIsValid(t *testing.T) {
	n := LocalNode()
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	if n.Capacity[resource.CPU] <= 0 {
		t.Errorf("local node has no cpu: %v", n.Capacity)
	}
}

// TestDefaultQueuesFitTheFleet: up's default tree is a valid tree whose
// guarantees the default fleet can hold.
func TestDefaultQueuesFitTheFleet(t *testing.T) {
	qs, err := DefaultQueues()
	if err != nil {
		t.Fatal(err)
	}
	if len(qs) < 2 {
		t.Fatalf("%d queues", len(qs))
	}
	f, _ := fixture(t)
	capacity := resource.List{}
	for _, n := range f.Nodes {
		for r, v := range n.Capacity {
			capacity[r] += v
		}
		for _, d := range n.Devices {
			capacity[resource.Name(d.Type)] += 1000
		}
	}
	all := map[string]*api.Queue{}
	held := resource.List{}
	for i := range qs {
		q := &qs[i]
		if err := api.ValidateQueueTree(q, all); err != nil {
			t.Fatalf("queue %s: %v", q.Name, err)
		}
		all[q.Name] = q
		if q.Parent == "" {
			for r, v := range q.Guaranteed {
				held[r] += v
			}
		}
	}
	for r, v := range held {
		if v > capacity[r] {
			t.Errorf("the top queues are guaranteed %s of %s; the fleet has %s", r.Format(v), r, r.Format(capacity[r]))
		}
	}
}
