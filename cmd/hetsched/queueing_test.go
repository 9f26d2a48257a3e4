package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

// TestDescribeShowsQueuePosition: describe of a pending task shows its
// place and, from the running task's declared duration, its estimated
// start; describe of a placed one shows neither.
func TestDescribeShowsQueuePosition(t *testing.T) {
	base := servertest.Start(t, "nodes:\n  - name: gpu-a\n    capacity: {cpu: \"8\", memory: 16Gi}\n    devices:\n      - {type: nvidia.com/gpu, id: \"0\", model: L4}\n")
	file := filepath.Join(t.TempDir(), "tasks.yaml")
	if err := os.WriteFile(file, []byte(`- {id: first, priority: 0, duration: 1h, resources: {nvidia.com/gpu: 1}}
- {id: second, priority: 0, duration: 1h, resources: {nvidia.com/gpu: 1}}
- {id: third, priority: 0, duration: 1h, resources: {nvidia.com/gpu: 1}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, "submit", "-f", file, "--server", base); err != nil {
		t.Fatalf("submit: %v\n%s", err, out)
	}
	out, err := run(t, "describe", "task", "second", "--server", base)
	if err != nil || !regexp.MustCompile(`(?m)^Queue Position: +1 among its class, 0 waiting in more important tiers$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Estimated Start: +\S+ \(in (59m|1h)\S*\)$`).MatchString(out) {
		t.Errorf("describe second: %v\n%s", err, out)
	}
	out, err = run(t, "describe", "task", "third", "--server", base)
	if err != nil || !regexp.MustCompile(`(?m)^Queue Position: +2 among`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^Estimated Start: +unknown$`).MatchString(out) {
		t.Errorf("describe third: %v\n%s", err, out)
	}
	out, err = run(t, "describe", "task", "first", "--server", base)
	if err != nil || regexp.MustCompile(`Queue Position|Estimated Start`).MatchString(out) {
		t.Errorf("describe first: %v\n%s", err, out)
	}
}
