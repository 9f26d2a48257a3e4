package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

const oneGPUNode = "nodes:\n  - name: gpu-a\n    capacity: {cpu: \"8\", memory: 16Gi}\n    devices:\n      - {type: nvidia.com/gpu, id: \"0\", model: L4}\n"

func specFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSubmitWaitForms: --wait DUR, --wait=DUR and a bare --wait all submit
// through /schedule; a word after --wait that is not a duration is an
// argument, which submit refuses.
func TestSubmitWaitForms(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	for i, args := range [][]string{
		{"--wait", "5s"},
		{"--wait=5s"},
		{"--wait"},
	} {
		id := []string{"spaced", "equals", "bare"}[i]
		file := specFile(t, id+".yaml", "id: "+id+"\nresources: {cpu: \"1\"}\n")
		full := append([]string{"submit", "-f", file, "--server", base}, args...)
		out, err := run(t, full...)
		if err != nil || !strings.Contains(out, id) || !strings.Contains(out, "scheduled") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	// The bare form before another flag.
	file := specFile(t, "first.yaml", "id: first\nresources: {cpu: \"1\"}\n")
	if out, err := run(t, "submit", "--wait", "-f", file, "--server", base); err != nil || !strings.Contains(out, "scheduled") {
		t.Errorf("--wait -f FILE: %v\n%s", err, out)
	}
	if _, err := run(t, "submit", "-f", file, "--wait", "soon", "--server", base); err == nil || !strings.Contains(err.Error(), `unknown command "soon"`) {
		t.Errorf("--wait soon: %v", err)
	}
	if _, err := run(t, "submit", "-f", file, "--wait=soon", "--server", base); err == nil {
		t.Error("--wait=soon accepted")
	}
}
