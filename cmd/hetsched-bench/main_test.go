package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
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
	out, err := run(t, "core", "--shape", "fleet", "--nodes", "100", "--tasks", "2000", "-o", "json")
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
		{"core", "-o", "xml"},
		{"core", "--nodes", "5"},
		{"core", "--shape", "mesh"},
		{"core", "--shape", "peer", "--nodes", "-1"},
		{"core", "--shape", "peer", "--policy", "nope", "--nodes", "2", "--tasks", "2"},
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
		_, err := run(t, c, "-o", "yaml")
		if err == nil || !strings.Contains(err.Error(), `-o: must be text or json, got "yaml"`) {
			t.Errorf("%s -o yaml: %v", c, err)
		}
	}
}

// TestShippingBinaryLinksNoBenchmark (issue 42 §1): the hetsched command
// depends on none of the benchmark harnesses.
func TestShippingBinaryLinksNoBenchmark(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/hetsched/hetsched/cmd/hetsched").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, bench := range []string{"/internal/benchcore", "/internal/benchhttp", "/internal/benchkube", "/internal/loadgen"} {
			if strings.HasSuffix(pkg, bench) || strings.Contains(pkg, bench+"/") {
				t.Errorf("cmd/hetsched depends on %s", pkg)
			}
		}
	}
}
