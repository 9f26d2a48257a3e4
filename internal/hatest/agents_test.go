package hatest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
)

// TestAgentsKeepTheirTasksThroughAFailover: three agent processes, given
// every server, run real commands; the leader is killed -9 mid-run. The
// agents follow the new leader, their tasks keep running and are adopted
// (each succeeds on its first attempt), and no task ever runs twice: each
// command appends "start|tick|end TASK ATTEMPT NODE PID UNIXNANO" lines
// to one shared file, and the test reads one run per task.
func TestAgentsKeepTheirTasksThroughAFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs three servers and three agents")
	}
	// Agents fence themselves after heartbeat-interval × missed-heartbeats
	// without an acknowledged heartbeat: 20 s here, so that a slow etcd
	// election on a loaded machine cannot make them kill what the new
	// leader is to adopt (the default, 6 s, is longer than every failover
	// measured but one, 9.26 s: BENCHMARKS.md).
	c := startCluster(t, 3, "--missed-heartbeats", "10")
	c.leader(time.Minute)
	servers := strings.Join(c.urls, ",")
	for _, name := range []string{"a1", "a2", "a3"} {
		a, err := childproc.Start(c.bin, time.Minute, "agent", "--server", servers, "--name", name,
			"--work-dir", t.TempDir(), "--grace", "500ms")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Kill)
	}
	cl := c.client()
	waitUntil(t, 30*time.Second, "three agent nodes ready", func() bool { return agentNodesReady(t, cl) == 3 })
	runLog := filepath.Join(t.TempDir(), "runs.log")
	var ids []string
	var tasks []string
	for i := range 3 {
		id := fmt.Sprintf("job%d", i)
		ids = append(ids, id)
		tasks = append(tasks, fmt.Sprintf(`{"id":%q,"priority":1,"resources":{"cpu":"500m"},"command":%s}`, id, command(runLog, 12*time.Second)))
	}
	if _, err := cl.Do(ctxTimeout(t, 10*time.Second), http.MethodPost, "/api/v1/tasks", []byte(`{"tasks":[`+strings.Join(tasks, ",")+`]}`), nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "every task to have started writing", func() bool {
		return len(runsSoFar(t, runLog)) == len(ids)
	})
	l := c.leader(10 * time.Second)
	killed := time.Now()
	c.kill(l)
	n := c.leader(30 * time.Second)
	t.Logf("leader %s killed; %s leads after %s", c.names[l], c.names[n], time.Since(killed).Round(time.Millisecond))
	if err := c.start(l); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		waitUntil(t, 60*time.Second, id+" to finish", func() bool {
			st, _ := taskState(t, c, id)
			return st == "succeeded" || st == "failed" || st == "lost"
		})
		st, attempt := taskState(t, c, id)
		if st != "succeeded" || attempt != 0 {
			t.Errorf("task %s: %s on attempt %d; want succeeded on its first attempt (adopted by the new leader)\n%s", id, st, attempt, c.logs())
		}
	}
	runs := runsSoFar(t, runLog)
	for _, id := range ids {
		if rs := runs[id]; len(rs) != 1 || !rs[0].ended {
			t.Errorf("task %s ran %d time(s) (ended: %v); want once, to its end", id, len(rs), len(rs) == 1 && rs[0].ended)
		}
	}
}

func taskState(t *testing.T, c *cluster, id string) (string, int) {
	var v struct {
		State   string `json:"state"`
		Attempt int    `json:"attempt"`
	}
	if _, err := c.client().Do(ctxTimeout(t, 5*time.Second), http.MethodGet, "/api/v1/tasks/"+id, nil, &v); err != nil {
		return "", -1
	}
	return v.State, v.Attempt
}

func waitUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// command appends a start line, a tick every 200ms for d and an end line
// to log.
func command(log string, d time.Duration) string {
	line := func(kind string) string {
		return fmt.Sprintf("echo %s $HETSCHED_TASK_ID $HETSCHED_ATTEMPT $HETSCHED_NODE $$ $(date +%%s%%N) >> %s", kind, log)
	}
	n := int(d / (200 * time.Millisecond))
	b, _ := json.Marshal([]string{"sh", "-c", fmt.Sprintf("%s; i=0; while [ $i -lt %d ]; do sleep 0.2; %s; i=$((i+1)); done; %s", line("start"), n, line("tick"), line("end"))})
	return string(b)
}

// run is one run of a task in the run log.
type run struct {
	attempt string
	pid     string
	ended   bool
}

// runsSoFar reads the run log's complete lines: the runs of each task.
func runsSoFar(t *testing.T, path string) map[string][]*run {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*run{}
	seen := map[string]*run{}
	s := string(b)
	s = s[:strings.LastIndexByte(s, '\n')+1]
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) != 6 {
			continue
		}
		key := f[1] + "/" + f[2] + "/" + f[4]
		r := seen[key]
		if r == nil {
			r = &run{attempt: f[2], pid: f[4]}
			seen[key] = r
			out[f[1]] = append(out[f[1]], r)
		}
		r.ended = r.ended || f[0] == "end"
	}
	return out
}
