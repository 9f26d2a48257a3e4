package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
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
	base := []string{"--cluster", "synthetic:5", "--workload", "synthetic"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--policy", "nosuch"}, "--policy"},
		{[]string{"--seeds", "0"}, "--seeds"},
		{[]string{"--protocol", "odd"}, "--protocol"},
		{[]string{"--stop-at", "-1"}, "--stop-at: must be in (0, 100]"},
		{[]string{"--stop-at", "0"}, "--stop-at"},
		{[]string{"--arrival-scale", "0"}, "--arrival-scale: must be in (0, 1000]"},
		{[]string{"--durations", "guessed"}, "--durations"},
		{[]string{"--format", "philly"}, "apply to file:PATH workloads only"},
		{[]string{"--throughputs", "x.csv"}, "--throughputs: applies to file:PATH"},
		{[]string{"--columns", "submit=a"}, "--columns: duration: required"},
		{[]string{"--sample-size", "-1"}, "--sample-size"},
		{[]string{"--las-thresholds", "2h,1h"}, "--las-thresholds: want 1 to 8 positive ascending"},
		{[]string{"--las-promote", "-1"}, "--las-promote: must be 0 (never) to 1000"},
		{[]string{"--starve-factor", "-1"}, "--starve-factor: must be 0 (no bound) to 1000"},
		{[]string{"--starve-limit", "-1s"}, "--starve-limit: must not be negative"},
		{[]string{"--gavel-round", "-1m"}, "--gavel-round: must be 0"},
		{[]string{"--gavel-objective", "speed"}, "--gavel-objective: must be fairness, throughput or agnostic"},
		{[]string{"--restart-cost", "30s"}, "--restart-cost: applies with --resume"},
		{[]string{"--share-round", "-1s"}, "--share-round"},
	} {
		c := newSim()
		c.SetOut(&bytes.Buffer{})
		c.SetErr(&bytes.Buffer{})
		c.SetArgs(append(append([]string{}, base...), tc.args...))
		if err := c.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	c := newSim()
	c.SetOut(&bytes.Buffer{})
	c.SetErr(&bytes.Buffer{})
	c.SetArgs([]string{"--cluster", "nosuch", "--workload", "synthetic"})
	if err := c.Execute(); err == nil {
		t.Errorf("an unknown cluster was accepted")
	}
}

// TestSimWorkloadFile: a CSV of one's own, outside ../shared, with a
// column mapping, under known durations and chosen seeds; the report says
// which durations it used and warns of jobs that never ran.
func TestSimWorkloadFile(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "my jobs.csv")
	var b strings.Builder
	b.WriteString("submitted,runtime,gpus\n")
	for i := range 40 {
		b.WriteString(strings.Join([]string{itoa(i * 10), itoa(50 + i%7*30), itoa(1 + i%2)}, ",") + "\n")
	}
	b.WriteString("400,60,64\n") // no node has 64 GPUs
	if err := os.WriteFile(csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := newSim()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--cluster", "synthetic:4", "--workload", "file:" + csv, "--columns", "submit=submitted,duration=runtime,gpus=gpus",
		"--policy", "sjf", "--durations", "known", "--seeds", "2", "--seed-base", "7", "-o", "json", "--traces", filepath.Join(dir, "none")})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var doc struct {
		Runs []struct {
			Seed       int64  `json:"seed"`
			Jobs       int    `json:"jobs"`
			Unfinished int    `json:"unfinished"`
			Durations  string `json:"durations"`
			Workload   string `json:"workload"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("%v: %s", err, stdout.String())
	}
	if len(doc.Runs) != 2 || doc.Runs[0].Seed != 7 || doc.Runs[1].Seed != 8 {
		t.Fatalf("runs %+v, want seeds 7 and 8", doc.Runs)
	}
	for _, r := range doc.Runs {
		if r.Jobs != 41 || r.Unfinished != 1 || r.Durations != "known" || r.Workload != "file:"+csv {
			t.Errorf("run %+v", r)
		}
	}
	if !strings.Contains(stderr.String(), "warning: sjf: 1 of 41 jobs (mean over 2 runs) did not finish") {
		t.Errorf("no warning of the unfinished job: %s", stderr.String())
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
