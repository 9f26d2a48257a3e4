package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

func TestCLIAgainstARealServer(t *testing.T) {
	base := servertest.Start(t, "nodes:\n  - name: gpu-a\n    capacity: {cpu: \"8\", memory: 16Gi}\n    devices:\n      - {type: nvidia.com/gpu, id: \"0\", model: L4}\n")
	dir := t.TempDir()
	file := filepath.Join(dir, "tasks.yaml")
	os.WriteFile(file, []byte(`- id: prep
  priority: 0
  resources: {cpu: "1"}
- id: train
  priority: 1
  resources: {cpu: "2", nvidia.com/gpu: 1}
`), 0o600)
	out, err := run(t, "submit", "-f", file, "--wait=placed", "--server", base)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if !strings.Contains(out, "prep") || !strings.Contains(out, "train") || !strings.Contains(out, " gpu:0 ") {
		t.Errorf("submit output:\n%s", out)
	}
	out, err = run(t, "get", "tasks", "--server", base)
	if err != nil || !strings.Contains(out, "STATE") || strings.Count(out, "scheduled") != 2 {
		t.Errorf("get tasks: %v\n%s", err, out)
	}
	out, err = run(t, "describe", "task", "train", "--server", base)
	if err != nil || !regexp.MustCompile(`(?m)^State: +scheduled$`).MatchString(out) || !regexp.MustCompile(`(?m)^Node: +gpu-a$`).MatchString(out) {
		t.Errorf("describe: %v\n%s", err, out)
	}
	out, err = run(t, "describe", "task", "train", "--server", base, "-o", "yaml")
	if err != nil || !strings.Contains(out, "state: scheduled") || !strings.Contains(out, "node: gpu-a") {
		t.Errorf("describe -o yaml: %v\n%s", err, out)
	}
	// A task without a command or lease got the server's default lease
	// (issue 16 §1), so it renews.
	out, err = run(t, "renew", "train", "--server", base)
	if err != nil || strings.TrimSpace(out) != "train scheduled renewed" {
		t.Errorf("renew of a task with the default lease: %v %q", err, out)
	}
	out, err = run(t, "complete", "prep", "--server", base)
	if err != nil || strings.TrimSpace(out) != "prep succeeded" {
		t.Errorf("complete: %v %q", err, out)
	}
	out, err = run(t, "cancel", "train", "--server", base)
	if err != nil || strings.TrimSpace(out) != "train cancelled" {
		t.Errorf("cancel: %v %q", err, out)
	}
	out, err = run(t, "cordon", "gpu-a", "--server", base)
	if err != nil || strings.TrimSpace(out) != "gpu-a cordoned" {
		t.Errorf("cordon: %v %q", err, out)
	}
	out, err = run(t, "get", "nodes", "--server", base, "-o", "json")
	if err != nil || !strings.Contains(out, `"cordoned"`) {
		t.Errorf("get nodes: %v\n%s", err, out)
	}
	// Server errors come back plainly, with the field.
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("id: x\npriority: 9\n"), 0o600)
	_, err = run(t, "submit", "-f", bad, "--server", base)
	if err == nil || !strings.Contains(err.Error(), "invalid_argument") || !strings.Contains(err.Error(), "priority") {
		t.Errorf("bad submit: %v", err)
	}
	if _, err := run(t, "describe", "task", "nosuch", "--server", base); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("describe unknown: %v", err)
	}
	// A lease has no logs; the server's reason comes back with the field.
	if _, err := run(t, "logs", "prep", "--server", base); err == nil || !strings.Contains(err.Error(), "no command") || !strings.Contains(err.Error(), "id") {
		t.Errorf("logs of a lease: %v", err)
	}
	if _, err := run(t, "get", "tasks", "-o", "xml", "--server", base); err == nil {
		t.Error("-o xml accepted")
	}
	out, err = run(t, "node", "release", "gpu-a", "--server", base)
	if err != nil || !strings.Contains(out, "gpu-a released from the static inventory") {
		t.Errorf("node release: %v %q", err, out)
	}
	if out, err = run(t, "get", "nodes", "--server", base, "-o", "json"); err != nil || strings.Contains(out, `"gpu-a"`) {
		t.Errorf("a released node is still listed: %v\n%s", err, out)
	}
	if _, err = run(t, "node", "release", "gpu-a", "--server", base); err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("releasing twice: %v", err)
	}
	if _, err := run(t, "get", "tasks", "--server", "http://127.0.0.1:1", "--timeout", "2s"); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("unreachable server: %v", err)
	}
}
