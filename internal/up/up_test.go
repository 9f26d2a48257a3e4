package up

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/resource"
)

// TestKillShims: only this process's children whose last argument lies
// under the agents' dir are killed.
func TestKillShims(t *testing.T) {
	agents := filepath.Join(t.TempDir(), "agents")
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command("sh", append([]string{"-c", "sleep 30", "sh"}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	shim := start(filepath.Join(agents, "cpu-1", "clusters", "c", "tasks", "t1_0"))
	other := start(filepath.Join(agents+"-not", "t1_0"))
	bare := start()
	if n := killShims(agents); n != 1 {
		t.Fatalf("killShims killed %d processes, want 1", n)
	}
	done := make(chan error, 1)
	go func() { done <- shim.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "killed") {
			t.Errorf("the shim: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the shim was not killed")
	}
	for _, c := range []*exec.Cmd{other, bare} {
		// Not reaped by anyone but us: killed, it would be a zombie.
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Process.Pid))
		if i := bytes.LastIndexByte(b, ')'); err != nil || i < 0 || bytes.HasPrefix(b[i+1:], []byte(" Z")) {
			t.Errorf("%v was killed: %v %s", c.Args, err, b)
		}
	}
	if n := killShims(agents); n != 0 {
		t.Errorf("a second round killed %d", n)
	}
}

func TestQueueTreeAndTasks(t *testing.T) {
	var b bytes.Buffer
	printQueueTree(&b, []queueView{
		{Name: "b", Weight: 3, Max: resource.List{"nvidia.com/gpu": 4000}},
		{Name: "a", Guaranteed: resource.List{resource.CPU: 2000}},
		{Name: "a-dev", Parent: "a"},
	})
	want := `  root                     (tasks that name no queue run in its own share)
  ├─ a                     weight 1, guaranteed cpu=2
  │  └─ a-dev              weight 1
  └─ b                     weight 3, max nvidia.com/gpu=4
`
	if b.String() != want {
		t.Errorf("tree:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := describeTasks([]runningTask{{"t1", "cpu-1"}}); got != "task t1 on node cpu-1" {
		t.Errorf("one task: %q", got)
	}
	var many []runningTask
	for _, id := range []string{"t1", "t2", "t3", "t4", "t5", "t6", "t7"} {
		many = append(many, runningTask{id, "n"})
	}
	if got := describeTasks(many); got != "t1 on n, t2 on n, t3 on n, t4 on n, t5 on n and 2 more" {
		t.Errorf("many tasks: %q", got)
	}
}
