package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

// runIn is run with stdin as the command's standard input.
func runIn(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestApplyQueuesAndNodes: apply -f takes examples/queues.yaml and the
// --nodes format (the embedded fleet's file), one line per object, and
// -f - a file with both; get queues and get nodes show the result.
func TestApplyQueuesAndNodes(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	out, err := run(t, "apply", "-f", filepath.Join("..", "..", "examples", "queues.yaml"), "--server", base)
	if err != nil || out != "queue/research created\nqueue/prod created\nqueue/vision created\nqueue/nlp created\n" {
		t.Fatalf("apply examples/queues.yaml: %v\n%s", err, out)
	}
	out, err = run(t, "get", "queues", "--server", base)
	for _, q := range []string{"research", "vision", "nlp", "prod"} {
		if err != nil || !strings.Contains(out, q+" ") {
			t.Errorf("get queues lacks %s: %v\n%s", q, err, out)
		}
	}
	out, err = run(t, "apply", "-f", filepath.Join("..", "..", "internal", "demo", "fleet.yaml"), "--server", base)
	if err != nil || strings.Count(out, " created\n") != 5 || !strings.Contains(out, "node/gpu-h100 created\n") {
		t.Fatalf("apply the fleet: %v\n%s", err, out)
	}
	if out, err = run(t, "get", "nodes", "--server", base); err != nil || !strings.Contains(out, "tpu-v5e") || !strings.Contains(out, "gpu-a") {
		t.Errorf("get nodes: %v\n%s", err, out)
	}
	both := `queues:
  - {name: prod, parent: root, guaranteed: {nvidia.com/gpu: 8, google.com/tpu: 4, cpu: "16"}, weight: 4}
nodes:
  - name: gpu-a
    capacity: {cpu: "8", memory: 16Gi}
    devices:
      - {type: nvidia.com/gpu, id: "0", model: L4}
  - name: cpu-9
    capacity: {cpu: "4", memory: 8Gi}
`
	out, err = runIn(t, both, "apply", "-f", "-", "--server", base)
	if err != nil || out != "queue/prod configured\nnode/gpu-a unchanged\nnode/cpu-9 created\n" {
		t.Fatalf("apply -f -: %v\n%s", err, out)
	}
}

// TestApplyBadFile: a wrong key is named with the closest right one, a
// task file is sent to submit, and nothing is applied.
func TestApplyBadFile(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	for _, c := range []struct{ file, want string }{
		{"queue:\n  - {name: a}\n", `-f: queue: unknown field; did you mean "queues"?`},
		{"queues: []\nnodez: []\n", `-f: nodez: unknown field; did you mean "nodes"?`},
		{"name: x\ncommand: [\"true\"]\n", "use hetsched submit -f FILE"},
		{"queues:\n  - {name: a, wieght: 2}\n", `-f: queues[0].wieght: unknown field; did you mean "weight"?`},
	} {
		_, err := run(t, "apply", "-f", specFile(t, "bad.yaml", c.file), "--server", base)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
	}
	if _, err := run(t, "apply", "--server", base); err == nil || !strings.Contains(err.Error(), "-f: a file is required") {
		t.Errorf("no -f: %v", err)
	}
	if out, err := run(t, "get", "queues", "--server", base, "-o", "json"); err != nil || strings.Contains(out, `"name"`) {
		t.Errorf("queues after refused files: %v\n%s", err, out)
	}
}

// TestSubmitAQueueTreeSaysApply: submit -f of a queue tree (the example
// a new user tries first) says which command takes it.
func TestSubmitAQueueTreeSaysApply(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	out, err := run(t, "submit", "-f", filepath.Join("..", "..", "examples", "queues.yaml"), "--server", base)
	if err == nil || !strings.Contains(err.Error(), "queue tree") || !strings.Contains(err.Error(), "hetsched apply -f") {
		t.Fatalf("submit -f examples/queues.yaml: %v\n%s", err, out)
	}
}
