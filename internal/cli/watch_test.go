package cli

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/agent"
	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

// waitOutput waits until out has a line matching each of wants, in that
// order, and returns out's text.
func waitOutput(t *testing.T, out *childproc.SyncBuffer, wants ...string) string {
	t.Helper()
	res := make([]*regexp.Regexp, len(wants))
	for i, w := range wants {
		res[i] = regexp.MustCompile(w)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		text := out.String()
		lines, i := strings.Split(text, "\n"), 0
		for _, l := range lines {
			if i < len(res) && res[i].MatchString(l) {
				i++
			}
		}
		if i == len(res) {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %q (after the earlier ones) within 30s:\n%s", wants[i], text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startWatch runs Watch until the test ends, into a synchronized buffer.
func startWatch(t *testing.T, c *Client, o WatchOptions) *childproc.SyncBuffer {
	t.Helper()
	var out, note childproc.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Watch(ctx, c, &out, &note, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("watch %+v: %v\n%s", o, err, note.String())
			}
		case <-time.After(10 * time.Second):
			t.Errorf("watch %+v did not stop within 10s of its context", o)
		}
	})
	return &out
}

// startFleet connects a one-node fake fleet, whose tasks run for their
// duration and succeed, until the test ends.
func startFleet(t *testing.T, base string) {
	t.Helper()
	f, err := agent.NewFleet(agent.FleetOptions{Server: base, Name: "fk", Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = f.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestWatchTasks: get tasks -w prints the header, then a row for each
// change of a task: pending (no node yet), scheduled, running and
// succeeded once a fleet connects; --selector and --state filter the
// changes; -o name prints task/ID per change.
func TestWatchTasks(t *testing.T) {
	base := servertest.Start(t, "nodes: []\n")
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections) // else the server's shutdown may wait 5s for one dialled, unused
	c := NewClient(base, "", 10*time.Second)
	all := startWatch(t, c, WatchOptions{Kind: "tasks", List: ListOptions{Limit: 100}, Output: Table})
	vision := startWatch(t, c, WatchOptions{Kind: "tasks", List: ListOptions{Limit: 100, Selector: "team=vision"}, Output: Wide})
	running := startWatch(t, c, WatchOptions{Kind: "tasks", List: ListOptions{Limit: 100, State: "running"}, Output: Name})
	for _, out := range []*childproc.SyncBuffer{all, vision} {
		waitOutput(t, out, `^ID +`)
	}
	ctx := context.Background()
	for _, body := range []string{
		`{"id":"w1","name":"train","metadata":{"team":"vision"},"duration":"300ms","resources":{"cpu":"1"},"command":["train"]}`,
		`{"id":"w2","metadata":{"team":"nlp"},"duration":"300ms","resources":{"cpu":"1"},"command":["train"]}`,
	} {
		if _, err := c.Do(ctx, "POST", "/api/v1/tasks", []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
	waitOutput(t, all, `^w1 +\S+ +2 +pending `, `^w2 +\S+ +2 +pending `)
	startFleet(t, base)
	text := waitOutput(t, all, `^w1 +\S+ +2 +pending `, `^w1 +\S+ +2 +scheduled +fk-1 `, `^w1 +\S+ +2 +running +fk-1 `, `^w1 +\S+ +2 +succeeded +fk-1 `)
	if strings.Count(text, "ID ") != 1 {
		t.Errorf("the header is printed more than once:\n%s", text)
	}
	waitOutput(t, all, `^w2 +\S+ +2 +succeeded `)
	wide := waitOutput(t, vision, `^ID +NAME +QUEUE +USER +PRIORITY +STATE +NODE +DEVICES +ATTEMPT +AGE +REASON$`,
		`^w1 +train +default +- +2 +pending `, `^w1 +train +default +- +2 +succeeded +fk-1 `)
	if strings.Contains(wide, "w2") {
		t.Errorf("--selector team=vision shows w2:\n%s", wide)
	}
	names := waitOutput(t, running, `^task/w1$`)
	waitOutput(t, running, `^task/w2$`)
	if strings.Count(names, "\n") > 2 {
		t.Errorf("--state running -o name:\n%s", names)
	}
}

// TestWatchNodesAndQueues: node changes (a cordon) and queue usage
// follow too.
func TestWatchNodesAndQueues(t *testing.T) {
	base := servertest.Start(t, node)
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	c := NewClient(base, "", 10*time.Second)
	ctx := context.Background()
	if _, err := c.Do(ctx, "PUT", "/api/v1/queues/team-a", []byte(`{"name":"team-a","guaranteed":{"cpu":"4"}}`), nil); err != nil {
		t.Fatal(err)
	}
	nodes := startWatch(t, c, WatchOptions{Kind: "nodes", Output: Table})
	queues := startWatch(t, c, WatchOptions{Kind: "queues", Output: Table})
	waitOutput(t, nodes, `^NAME +STATE `, `^cpu-a +ready `)
	waitOutput(t, queues, `^NAME +PARENT `, `^team-a +root +1 +cpu=4 +- +- `)
	if _, err := c.Do(ctx, "POST", "/api/v1/nodes/cpu-a/cordon", nil, nil); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, nodes, `^cpu-a +ready `, `^cpu-a +cordoned `)
	if _, err := c.Do(ctx, "POST", "/api/v1/nodes/cpu-a/uncordon", nil, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Do(ctx, "POST", "/api/v1/tasks", []byte(`{"id":"q1","queue":"team-a","resources":{"cpu":"2"}}`), nil); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, queues, `^team-a +root +1 +cpu=4 +- +- `, `^team-a +root +1 +cpu=4 +- +cpu=2 `)
}

// TestWatchRefusesLabelsOfJobsAndQueues: --selector is for tasks and
// nodes.
func TestWatchRefusesLabelsOfJobsAndQueues(t *testing.T) {
	c := NewClient("http://127.0.0.1:1", "", time.Second)
	for _, k := range []string{"jobs", "queues"} {
		err := Watch(context.Background(), c, nil, nil, WatchOptions{Kind: k, List: ListOptions{Selector: "a=b"}})
		if err == nil || !strings.Contains(err.Error(), "--selector: "+k+" have no labels") {
			t.Errorf("%s: %v", k, err)
		}
	}
}
