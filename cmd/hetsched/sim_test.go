package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimCommand: hetsched sim runs two policies and two seeds on a
// synthetic cluster and workload, prints one row per policy, and writes
// the JSON and the HTML report; bad flags are refused naming them.
func TestSimCommand(t *testing.T) {
	out := t.TempDir()
	cmd := newSim()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--cluster", "synthetic:20", "--workload", "synthetic:jobs=200,rate=0.5", "--policy", "least-allocated,binpack",
		"--seeds", "2", "--out", out})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	table := stdout.String()
	for _, want := range []string{"POLICY", "least-allocated", "binpack", "JCT MEAN"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	var doc struct {
		Runs []struct {
			Policy    string `json:"policy"`
			Seed      int64  `json:"seed"`
			Completed int    `json:"completed"`
		} `json:"runs"`
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) != 4 {
		t.Fatalf("%d runs, want 4", len(doc.Runs))
	}
	for _, r := range doc.Runs {
		if r.Completed == 0 {
			t.Errorf("run %+v completed nothing", r)
		}
	}
	if h, err := os.ReadFile(filepath.Join(out, "report.html")); err != nil || !bytes.Contains(h, []byte("<svg")) {
		t.Errorf("report: %v", err)
	}
	for _, args := range [][]string{
		{"--cluster", "synthetic:5", "--workload", "synthetic", "--policy", "nosuch"},
		{"--cluster", "synthetic:5", "--workload", "synthetic", "--seeds", "0"},
		{"--cluster", "nosuch", "--workload", "synthetic"},
		{"--cluster", "synthetic:5", "--workload", "synthetic", "--protocol", "odd"},
	} {
		c := newSim()
		c.SetOut(&bytes.Buffer{})
		c.SetErr(&bytes.Buffer{})
		c.SetArgs(args)
		if err := c.Execute(); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}
