package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

// issue 16 §1: `get jobs` lists jobs, `cancel ID` of a job id cancels the
// job (it said "no task"), and the cancelled job reads cancelled.
func TestCLIJobs(t *testing.T) {
	base := servertest.Start(t, "nodes:\n  - name: c1\n    capacity: {cpu: \"8\", memory: 16Gi}\n")
	file := filepath.Join(t.TempDir(), "job.yaml")
	os.WriteFile(file, []byte("id: etl\nname: nightly\ntasks:\n  - {id: extract, resources: {cpu: \"1\"}, lease: 1h}\n  - {id: load, depends: [extract], resources: {cpu: \"1\"}}\n"), 0o600)
	if out, err := run(t, "submit", "-f", file, "--server", base); err != nil {
		t.Fatalf("submit: %v\n%s", err, out)
	}
	out, err := run(t, "get", "jobs", "--server", base)
	if err != nil || !strings.Contains(out, "etl") || !strings.Contains(out, "nightly") || !strings.Contains(out, "1 blocked") {
		t.Fatalf("get jobs: %v\n%s", err, out)
	}
	if out, err = run(t, "cancel", "etl", "--server", base); err != nil || strings.TrimSpace(out) != "job etl cancelled" {
		t.Fatalf("cancel of a job id: %v %q", err, out)
	}
	if out, err = run(t, "get", "jobs", "--state", "cancelled", "-o", "json", "--server", base); err != nil || !strings.Contains(out, `"etl"`) {
		t.Errorf("cancelled jobs: %v\n%s", err, out)
	}
	if _, err = run(t, "cancel", "nosuch", "--server", base); err == nil || !strings.Contains(err.Error(), `no task or job "nosuch"`) {
		t.Errorf("cancel of an unknown id: %v", err)
	}
	if _, err = run(t, "cancel", "node", "x", "--server", base); err == nil {
		t.Error("cancel node x accepted")
	}
	if _, err = run(t, "cancel", "task", "etl.extract", "--server", base); err == nil || !strings.Contains(err.Error(), "already cancelled") {
		t.Errorf("cancel task of a cancelled job's task: %v", err)
	}
}
