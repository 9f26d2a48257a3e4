package up

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/cli"
	"github.com/hetsched/hetsched/internal/server"
)

// setUpQueues returns the queue tree up runs with, and where it came from.
// The server has put the --queues file's already; without one, a store
// with no queues gets defaults (a store with queues keeps them: they may
// have been changed with apply since).
func setUpQueues(ctx context.Context, c *cli.Client, file string, defaults []api.Queue) ([]cli.QueueSpec, string, error) {
	qs, err := cli.ListQueueSpecs(ctx, c)
	if err != nil {
		return nil, "", err
	}
	switch {
	case file != "":
		source := "from " + file
		if fromFile, err := server.LoadQueuesFile(file); err == nil {
			named := map[string]bool{}
			for _, q := range fromFile {
				named[q.Name] = true
			}
			more := 0
			for _, q := range qs {
				if !named[q.Name] {
					more++
				}
			}
			if more > 0 {
				source += fmt.Sprintf(", and %d more from the store", more)
			}
		}
		return qs, source, nil
	case len(qs) > 0:
		return qs, "from the store", nil
	}
	for _, q := range defaults { // parents first in the file
		b, _ := json.Marshal(q)
		if _, err := c.Do(ctx, "PUT", "/api/v1/queues/"+url.PathEscape(q.Name), b, nil); err != nil {
			return nil, "", fmt.Errorf("the default queue %s: %w", q.Name, err)
		}
	}
	if qs, err = cli.ListQueueSpecs(ctx, c); err != nil {
		return nil, "", err
	}
	return qs, "the default tree; --queues FILE starts with another", nil
}

// printQueueTree draws the tree under the root.
func printQueueTree(w io.Writer, qs []cli.QueueSpec) {
	kids := map[string][]cli.QueueSpec{}
	for _, q := range qs {
		p := q.Parent
		if p == "" {
			p = api.RootQueue
		}
		kids[p] = append(kids[p], q)
	}
	for _, l := range kids {
		sort.Slice(l, func(i, j int) bool { return l[i].Name < l[j].Name })
	}
	fmt.Fprintf(w, "  %-24s %s\n", api.RootQueue, "(tasks that name no queue run in its own share)")
	var walk func(parent, indent string, depth int)
	walk = func(parent, indent string, depth int) {
		if depth > api.MaxQueueDepth {
			return
		}
		l := kids[parent]
		for i, q := range l {
			branch, next := "├─ ", "│  "
			if i == len(l)-1 {
				branch, next = "└─ ", "   "
			}
			name := indent + branch + q.Name
			fmt.Fprintf(w, "  %s%s %s\n", name, strings.Repeat(" ", max(1, 24-len([]rune(name)))), describeQueue(q))
			walk(q.Name, indent+next, depth+1)
		}
	}
	walk(api.RootQueue, "", 0)
}

func describeQueue(q cli.QueueSpec) string {
	w := q.Weight
	if w == 0 {
		w = 1
	}
	parts := []string{fmt.Sprintf("weight %g", w)}
	if len(q.Guaranteed) > 0 {
		parts = append(parts, "guaranteed "+q.Guaranteed.String())
	}
	if len(q.Max) > 0 {
		parts = append(parts, "max "+q.Max.String())
	}
	return strings.Join(parts, ", ")
}

// runningTask is a command task that has a process on this machine.
type runningTask struct {
	ID   string `json:"id"`
	Node string `json:"node"`
}

// runningTasks lists the command tasks placed or running (what stopping
// the agents waits for); errors leave it short, it only feeds a message.
func runningTasks(c *cli.Client) []runningTask {
	var out []runningTask
	for _, state := range []string{"scheduled", "running"} {
		var body struct {
			Tasks []struct {
				runningTask
				Command []string `json:"command"`
			} `json:"tasks"`
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Do(ctx, "GET", "/api/v1/tasks?limit=1000&state="+state, nil, &body)
		cancel()
		if err != nil {
			continue
		}
		for _, t := range body.Tasks {
			if len(t.Command) > 0 {
				out = append(out, t.runningTask)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// describeTasks names the tasks: "task t1 on node cpu-1", or "t1 on
// cpu-1, t2 on gpu-h100 and 3 more".
func describeTasks(ts []runningTask) string {
	if len(ts) == 1 {
		return fmt.Sprintf("task %s on node %s", ts[0].ID, ts[0].Node)
	}
	const shown = 5
	var parts []string
	for i, t := range ts {
		if i == shown {
			break
		}
		parts = append(parts, t.ID+" on "+t.Node)
	}
	s := strings.Join(parts, ", ")
	if len(ts) > shown {
		s += fmt.Sprintf(" and %d more", len(ts)-shown)
	}
	return s
}
