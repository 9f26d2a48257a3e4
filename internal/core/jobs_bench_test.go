package core

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// layeredJob submits a job of layers×width tasks to c: task (l, i) depends
// on tasks (l-1, i) and (l-1, i+1 mod width), so every task has out-degree
// 2 and in-degree 2 (the first layer none).
func layeredJob(tb testing.TB, c *Core, now time.Time, id string, layers, width int) {
	tb.Helper()
	if err := c.AddJob(now, JobSpec{ID: id, FailFast: true}); err != nil {
		tb.Fatal(err)
	}
	name := func(l, i int) string { return id + "." + strconv.Itoa(l) + "-" + strconv.Itoa(i) }
	prio := 1
	for l := 0; l < layers; l++ {
		for i := 0; i < width; i++ {
			spec := api.Task{ID: name(l, i), Priority: &prio, Resources: resource.List{resource.CPU: 1000}}
			if l > 0 {
				spec.Depends = []string{name(l-1, i), name(l-1, (i+1)%width)}
			}
			if err := c.SubmitJobTask(now, id, &spec); err != nil {
				tb.Fatal(err)
			}
		}
	}
}

// runJob finishes every placed task as it is placed until none is left,
// and returns how many tasks finished.
func runJob(tb testing.TB, c *Core, now time.Time) int {
	tb.Helper()
	done := 0
	var placed []string
	for {
		out := c.TakeOutput()
		for _, p := range out.Placements {
			placed = append(placed, p.Task)
		}
		if len(placed) == 0 {
			return done
		}
		now = now.Add(time.Millisecond)
		batch := placed
		placed = nil
		for _, id := range batch {
			if err := c.TaskFinished(now, id, Result{}); err != nil {
				tb.Fatal(err)
			}
			done++
		}
	}
}

// BenchmarkJobDAG runs layered jobs of 10,000 and 100,000 tasks (width 100,
// 100 and 1,000 layers) on 100 nodes of 8 CPUs, finishing each task as it
// is placed. ns/task is the core's whole cost per task (submit, release of
// dependents, placement, finish): it should not grow with the job's size,
// since a completion touches only its out-degree.
func BenchmarkJobDAG(b *testing.B) {
	for _, layers := range []int{100, 1000} {
		b.Run(fmt.Sprintf("tasks=%d", layers*100), func(b *testing.B) {
			var total int
			var elapsed time.Duration
			for n := 0; n < b.N; n++ {
				cfg := DefaultConfig()
				c, err := New(cfg)
				if err != nil {
					b.Fatal(err)
				}
				now := time.Unix(1_800_000_000, 0)
				for i := 0; i < 100; i++ {
					if err := c.UpsertNode(now, &api.Node{Name: fmt.Sprintf("n%03d", i), Capacity: resource.List{resource.CPU: 8000, resource.Memory: 32 << 30}}); err != nil {
						b.Fatal(err)
					}
				}
				start := time.Now()
				layeredJob(b, c, now, "j", layers, 100)
				total += runJob(b, c, now)
				elapsed += time.Since(start)
				if total != (n+1)*layers*100 {
					b.Fatalf("%d tasks finished, want %d", total, (n+1)*layers*100)
				}
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(total), "ns/task")
			b.ReportMetric(float64(total)/elapsed.Seconds(), "tasks/s")
		})
	}
}

// TestLayeredJobRunsInOrder: a 20×10 layered job runs to the end, every
// task after both its dependencies.
func TestLayeredJobRunsInOrder(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	if err := c.UpsertNode(now, &api.Node{Name: "n", Capacity: resource.List{resource.CPU: 4000, resource.Memory: 1 << 30}}); err != nil {
		t.Fatal(err)
	}
	layeredJob(t, c, now, "j", 20, 10)
	finished := map[string]int{}
	seq := 0
	var placed []string
	for {
		out := c.TakeOutput()
		for _, p := range out.Placements {
			placed = append(placed, p.Task)
		}
		if len(placed) == 0 {
			break
		}
		now = now.Add(time.Millisecond)
		for _, id := range placed {
			seq++
			finished[id] = seq
			if err := c.TaskFinished(now, id, Result{}); err != nil {
				t.Fatal(err)
			}
		}
		placed = nil
	}
	if len(finished) != 200 {
		t.Fatalf("%d tasks finished, want 200", len(finished))
	}
	for l := 1; l < 20; l++ {
		for i := 0; i < 10; i++ {
			me := finished[fmt.Sprintf("j.%d-%d", l, i)]
			for _, d := range []string{fmt.Sprintf("j.%d-%d", l-1, i), fmt.Sprintf("j.%d-%d", l-1, (i+1)%10)} {
				if finished[d] >= me {
					t.Fatalf("j.%d-%d finished before its dependency %s", l, i, d)
				}
			}
		}
	}
}
