// Package python holds the Python client of the HTTP API (hetsched/,
// standard library only) and this test, which runs its unittest suite
// against a live server (issue 45 §3).
package python

import (
	"os"
	"os/exec"
	"testing"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

const nodes = "nodes:\n  - name: gpu-a\n    capacity: {cpu: \"8\", memory: 16Gi}\n    devices:\n      - {type: nvidia.com/gpu, id: \"0\", model: L4}\n"

// TestPythonClient runs `python3 -m unittest` in this directory against
// a server of the test's own.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is missing: apt-get install -y python3")
		}
		t.Skip("python3 is missing: apt-get install -y python3")
	}
	base := servertest.Start(t, nodes)
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "tests", "-t", ".", "-v")
	cmd.Env = append(os.Environ(), "HETSCHED_TEST_SERVER="+base, "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
