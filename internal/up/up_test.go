package up

import (
	"bytes"
	"testing"

	"github.com/hetsched/hetsched/internal/cli"
	"github.com/hetsched/hetsched/internal/resource"
)

func TestQueueTreeAndTasks(t *testing.T) {
	var b bytes.Buffer
	printQueueTree(&b, []cli.QueueSpec{
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
