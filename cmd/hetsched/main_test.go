package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestBenchCoreJSON(t *testing.T) {
	out, err := run(t, "bench", "core", "--shape", "fleet", "--nodes", "100", "--tasks", "2000", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Shape            string  `json:"shape"`
		Placements       int     `json:"placements"`
		PlacementsPerSec float64 `json:"placementsPerSec"`
		NsPerPlacement   float64 `json:"nsPerPlacement"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if r.Shape != "fleet" || r.Placements != 2000 || r.PlacementsPerSec <= 0 || r.NsPerPlacement <= 0 {
		t.Errorf("unexpected result %+v", r)
	}
}

func TestBenchCoreBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "core", "-o", "xml"},
		{"bench", "core", "--nodes", "5"},
		{"bench", "core", "--shape", "mesh"},
		{"bench", "core", "--shape", "peer", "--nodes", "-1"},
		{"bench", "core", "--shape", "peer", "--policy", "nope", "--nodes", "2", "--tasks", "2"},
	} {
		if _, err := run(t, args...); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// TestBenchOutputChecked: every bench command refuses an unknown -o before
// it starts its run (these would otherwise start servers for minutes).
func TestBenchOutputChecked(t *testing.T) {
	for _, c := range []string{"core", "api", "http", "pending", "fleet", "job", "preempt", "inflight", "batch"} {
		_, err := run(t, "bench", c, "-o", "yaml")
		if err == nil || !strings.Contains(err.Error(), `-o: must be text or json, got "yaml"`) {
			t.Errorf("bench %s -o yaml: %v", c, err)
		}
	}
}

func TestDemoQuiet(t *testing.T) {
	out, err := run(t, "demo", "-q")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"simulated time", "submitted 19", "still pending 0", "nvidia.com/gpu"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q:\n%s", want, out)
		}
	}
}

func TestPolicies(t *testing.T) {
	out, err := run(t, "policies")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"round-robin", "least-allocated", "weighted-feedback", "sjf", "binpack", "spread", "load-predict", "hetero-aware", "fgd"} {
		if !strings.Contains(out, p) {
			t.Errorf("policies lacks %s", p)
		}
	}
}
