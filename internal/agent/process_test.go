package agent

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
)

// These tests run real `hetsched server` and `hetsched agent` processes
// over loopback and kill them with SIGKILL.

// builtBinary builds hetsched once for the package's tests (removed by
// TestMain).
var builtBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "hetsched-agent-test-")
	if err != nil {
		return "", err
	}
	binDir = dir
	return childproc.Build(dir)
})

var binDir string

type cluster struct {
	t      *testing.T
	bin    string
	data   string
	listen string
	url    string
	server *childproc.Child
	agents map[string]*childproc.Child
	work   map[string]string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: runs and kills real server and agent processes")
	}
	bin, err := builtBinary()
	if err != nil {
		t.Fatal(err)
	}
	// A fixed port, so that agents find a restarted server where it was.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	c := &cluster{t: t, bin: bin, data: t.TempDir(), listen: listen, agents: map[string]*childproc.Child{}, work: map[string]string{}}
	c.startServer()
	t.Cleanup(func() {
		for _, a := range c.agents {
			a.Kill()
		}
		if c.server != nil {
			c.server.Kill()
		}
	})
	return c
}

func (c *cluster) startServer() {
	c.t.Helper()
	s, err := childproc.Start(c.bin, time.Minute, "server", "--listen", c.listen, "--data-dir", c.data)
	if err != nil {
		c.t.Fatal(err)
	}
	c.server, c.url = s, s.URL
}

// startAgent starts an agent process; extra flags follow the others (by
// default it serves no metrics: --metrics-listen off).
func (c *cluster) startAgent(name string, extra ...string) {
	c.t.Helper()
	if c.work[name] == "" {
		c.work[name] = c.t.TempDir()
	}
	if len(extra) == 0 {
		extra = []string{"--metrics-listen", "off"}
	}
	a, err := childproc.Start(c.bin, time.Minute, append([]string{"agent", "--server", "http://" + c.listen, "--name", name,
		"--devices", devicesFile(c.t, twoGPUs), "--work-dir", c.work[name], "--grace", "500ms"}, extra...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.agents[name] = a
}

// agentNodes counts the nodes that agents registered.
func agentNodes(t *testing.T, base string) int {
	t.Helper()
	_, b := get(t, base+"/api/v1/nodes")
	var nodes struct {
		Nodes []struct {
			Agent string `json:"agent"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(b, &nodes); err != nil {
		t.Fatalf("nodes: %v %s", err, b)
	}
	n := 0
	for _, x := range nodes.Nodes {
		if x.Agent != "" {
			n++
		}
	}
	return n
}

// run is one run of a task, from a run log of lines
// "start|tick|end TASK ATTEMPT NODE UNIXNANO".
type run struct {
	task, node string
	attempt    int
	start      int64
	last       int64 // the run's last line
	ended      bool
}

func readRuns(t *testing.T, path string) map[string][]*run {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return parseRuns(t, b)
}

// runsSoFar is readRuns of a run log that tasks may be writing: no file
// yet is no runs, and a line not finished yet is left out.
func runsSoFar(t *testing.T, path string) map[string][]*run {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndexByte(string(b), '\n')
	if i < 0 {
		return nil
	}
	return parseRuns(t, b[:i+1])
}

// findRun is the run of task's attempt in runs, or nil.
func findRun(runs map[string][]*run, task string, attempt int) *run {
	for _, r := range runs[task] {
		if r.attempt == attempt {
			return r
		}
	}
	return nil
}

func parseRuns(t *testing.T, b []byte) map[string][]*run {
	t.Helper()
	byKey := map[string]*run{}
	out := map[string][]*run{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var kind, task, node string
		var attempt int
		var at int64
		if _, err := fmt.Sscan(line, &kind, &task, &attempt, &node, &at); err != nil {
			t.Fatalf("run log line %q: %v", line, err)
		}
		k := fmt.Sprintf("%s/%d", task, attempt)
		r := byKey[k]
		if r == nil {
			r = &run{task: task, node: node, attempt: attempt, start: at}
			byKey[k] = r
			out[task] = append(out[task], r)
		}
		r.last = max(r.last, at)
		r.ended = r.ended || kind == "end"
	}
	return out
}

// noOverlap fails if a run of a task wrote anything after the next run of
// the same task started.
func noOverlap(t *testing.T, runs map[string][]*run) {
	t.Helper()
	for task, rs := range runs {
		sort.Slice(rs, func(i, j int) bool { return rs[i].start < rs[j].start })
		for i := 1; i < len(rs); i++ {
			if rs[i-1].last >= rs[i].start {
				t.Errorf("task %s ran twice at once: attempt %d on %s was still running %v after attempt %d started on %s",
					task, rs[i-1].attempt, rs[i-1].node, time.Duration(rs[i-1].last-rs[i].start), rs[i].attempt, rs[i].node)
			}
		}
	}
}

// command logs a start line, a tick every 200ms for d, and an end line
// into log.
func command(log string, d time.Duration) string {
	line := func(kind string) string {
		return fmt.Sprintf("echo %s $HETSCHED_TASK_ID $HETSCHED_ATTEMPT $HETSCHED_NODE $(date +%%s%%N) >> %s", kind, log)
	}
	n := int(d / (200 * time.Millisecond))
	return fmt.Sprintf(`["sh","-c","%s; i=0; while [ $i -lt %d ]; do sleep 0.2; %s; i=$((i+1)); done; %s"]`,
		line("start"), n, line("tick"), line("end"))
}

// TestProcessesEndToEnd: a server and three agent processes run a real
// command with its logs; killing an agent mid-task re-queues the task,
// which succeeds on another node within 10 s, and the killed agent's copy
// is fenced, never running at the same time as the new one.
func TestProcessesEndToEnd(t *testing.T) {
	c := newCluster(t)
	for _, n := range []string{"a1", "a2", "a3"} {
		c.startAgent(n)
	}
	waitFor(t, 30*time.Second, func() bool { return agentNodes(t, c.url) == 3 }, "three agents registered")

	post(t, c.url+"/api/v1/tasks", `{"id":"hello","priority":1,"resources":{"cpu":"1","nvidia.com/gpu":1},"command":["sh","-c","echo hello from $HETSCHED_NODE gpu $CUDA_VISIBLE_DEVICES"]}`)
	v := waitState(t, c.url, "hello", 30*time.Second, "succeeded", "failed")
	if v.State != "succeeded" {
		t.Fatalf("hello: %+v", v)
	}
	if _, out := get(t, c.url+"/api/v1/tasks/hello/logs"); string(out) != fmt.Sprintf("hello from %s gpu %s\n", v.Node, v.Devices[0].ID) {
		t.Fatalf("hello logs %q", out)
	}

	// Two tasks that each fill a node; both their agents die. The short
	// one must succeed elsewhere within 10 s; the long one's first run
	// must be fenced (stopped) before its second run starts.
	runLog := filepath.Join(t.TempDir(), "runs.log")
	post(t, c.url+"/api/v1/tasks", `{"tasks":[
		{"id":"victim","priority":0,"resources":{"cpu":"1","nvidia.com/gpu":2},"command":`+command(runLog, 600*time.Millisecond)+`},
		{"id":"long","priority":1,"resources":{"cpu":"1","nvidia.com/gpu":2},"command":`+command(runLog, 60*time.Second)+`}]}`)
	v = waitState(t, c.url, "victim", 30*time.Second, "running")
	l := waitState(t, c.url, "long", 30*time.Second, "running")
	if v.Node == l.Node {
		t.Fatalf("both tasks on %s", v.Node)
	}
	waitFor(t, 30*time.Second, func() bool {
		runs := runsSoFar(t, runLog)
		return findRun(runs, "victim", v.Attempt) != nil && findRun(runs, "long", l.Attempt) != nil
	}, "both tasks to have started writing")
	killed := time.Now()
	for _, n := range []string{v.Node, l.Node} {
		c.agents[n].Kill()
		delete(c.agents, n)
	}
	v2 := waitState(t, c.url, "victim", 20*time.Second, "succeeded", "failed")
	took := time.Since(killed)
	if v2.State != "succeeded" || v2.Node == v.Node || v2.Attempt != 1 {
		t.Fatalf("victim after its agent died: %+v (was on %s)", v2, v.Node)
	}
	if took > 10*time.Second {
		t.Errorf("the re-queued task succeeded %v after its agent's kill -9, want ≤ 10s", took)
	}
	t.Logf("kill -9 of agent %s: the task succeeded on %s %v later", v.Node, v2.Node, took.Round(time.Millisecond))
	l2 := waitState(t, c.url, "long", 30*time.Second, "running")
	if l2.Node == l.Node || l2.Attempt < 1 { // 2 when the urgent victim preempted it
		t.Fatalf("long after its agent died: %+v (was on %s)", l2, l.Node)
	}
	// A wrongly surviving first run would tick meanwhile.
	waitFor(t, 30*time.Second, func() bool {
		r := findRun(runsSoFar(t, runLog), "long", l2.Attempt)
		return r != nil && r.last-r.start >= int64(time.Second)
	}, fmt.Sprintf("attempt %d of long to have run for a second", l2.Attempt))
	runs := readRuns(t, runLog)
	// The victim ran twice. The long task ran on its dead node and now
	// runs elsewhere; in between, when both were re-queued onto the one
	// node left, the urgent victim may have preempted a run of it that had
	// already started (attempt 2): between 2 and attempt+1 runs, never two
	// at once (noOverlap). The victim succeeded before l2 was read, so no
	// preemption of it is still to come.
	if len(runs["victim"]) != 2 || len(runs["long"]) < 2 || len(runs["long"]) > l2.Attempt+1 {
		t.Fatalf("runs: victim %d, long %d (on attempt %d)", len(runs["victim"]), len(runs["long"]), l2.Attempt)
	}
	noOverlap(t, runs)
}

// TestServerKill9WhileTasksRun: the server dies with SIGKILL while tasks
// run; it restarts on its data dir, the agents reconnect, and every task
// succeeds, each having run exactly once.
func TestServerKill9WhileTasksRun(t *testing.T) {
	c := newCluster(t)
	for _, n := range []string{"a1", "a2", "a3"} {
		c.startAgent(n)
	}
	waitFor(t, 30*time.Second, func() bool { return agentNodes(t, c.url) == 3 }, "three agents registered")
	runLog := filepath.Join(t.TempDir(), "runs.log")
	var tasks []string
	for i := 0; i < 6; i++ {
		tasks = append(tasks, fmt.Sprintf(`{"id":"t%d","priority":1,"resources":{"cpu":"1","nvidia.com/gpu":1},"command":%s}`, i, command(runLog, 3*time.Second)))
	}
	post(t, c.url+"/api/v1/tasks", `{"tasks":[`+strings.Join(tasks, ",")+`]}`)
	for i := 0; i < 6; i++ {
		waitState(t, c.url, fmt.Sprintf("t%d", i), 30*time.Second, "running")
	}
	ended := func(a string) int { return strings.Count(c.agents[a].Stderr(), "assignment stream ended") }
	before := map[string]int{}
	for n := range c.agents {
		before[n] = ended(n)
	}
	c.server.Kill()
	for n := range c.agents {
		waitFor(t, 30*time.Second, func() bool { return ended(n) > before[n] }, "agent "+n+" to see the server gone")
	}
	c.startServer()
	for i := 0; i < 6; i++ {
		v := waitState(t, c.url, fmt.Sprintf("t%d", i), 30*time.Second, "succeeded", "failed")
		if v.State != "succeeded" || v.Attempt != 0 {
			t.Errorf("t%d after the server restart: %+v", i, v)
		}
	}
	runs := readRuns(t, runLog)
	for i := 0; i < 6; i++ {
		if rs := runs[fmt.Sprintf("t%d", i)]; len(rs) != 1 || !rs[0].ended {
			t.Errorf("t%d ran %d times, want once to its end", i, len(rs))
		}
	}
}

// TestAgentRestartAdoptsRunningTasks: an agent killed with SIGKILL and
// started again on the same work dir before its deadline adopts the task
// still running there; the task runs once, to its end, on its first
// attempt.
func TestAgentRestartAdoptsRunningTasks(t *testing.T) {
	c := newCluster(t)
	c.startAgent("a1")
	waitFor(t, 30*time.Second, func() bool { return agentNodes(t, c.url) == 1 }, "the agent registered")
	runLog := filepath.Join(t.TempDir(), "runs.log")
	post(t, c.url+"/api/v1/tasks", `{"id":"steady","priority":1,"resources":{"cpu":"1"},"command":`+command(runLog, 4*time.Second)+`}`)
	waitState(t, c.url, "steady", 30*time.Second, "running")
	c.agents["a1"].Kill()
	killed := time.Now().UnixNano()
	waitFor(t, 30*time.Second, func() bool {
		r := findRun(runsSoFar(t, runLog), "steady", 0)
		return r != nil && r.last > killed
	}, "the task to go on running without its agent")
	c.startAgent("a1")
	v := waitState(t, c.url, "steady", 30*time.Second, "succeeded", "failed")
	if v.State != "succeeded" || v.Attempt != 0 {
		t.Fatalf("steady after the agent restart: %+v", v)
	}
	runs := readRuns(t, runLog)
	if rs := runs["steady"]; len(rs) != 1 || !rs[0].ended {
		t.Fatalf("steady ran %d times", len(rs))
	}
	if _, out := get(t, c.url+"/api/v1/tasks/steady/logs"); out == nil {
		t.Fatal("no logs after the restart")
	}
}

// TestAgentProcessServesMetrics: `hetsched agent --metrics-listen` serves
// the agent's metrics there; an explicit address it cannot listen on
// stops it with an error naming the flag.
func TestAgentProcessServesMetrics(t *testing.T) {
	c := newCluster(t)
	c.startAgent("m1", "--metrics-listen", "127.0.0.1:0")
	served := regexp.MustCompile(`msg="serving metrics".* url=http://(\S+)/metrics`)
	var addr string
	waitFor(t, 30*time.Second, func() bool {
		m := served.FindStringSubmatch(c.agents["m1"].Stderr())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}, "the agent's \"serving metrics\" log line")
	var text string
	waitFor(t, 30*time.Second, func() bool {
		text = scrape(t, addr)
		v, _ := sample(text, "hetsched_agent_connected")
		return v == 1
	}, "hetsched_agent_connected 1")
	wantSamples(t, text, map[string]float64{
		`hetsched_agent_device_healthy{device="0",model="L4",type="nvidia.com/gpu"}`: 1,
		`hetsched_agent_device_healthy{device="1",model="L4",type="nvidia.com/gpu"}`: 1,
		"hetsched_agent_running_tasks": 0,
	})
	if !strings.Contains(text, "\nhetsched_build_info{") {
		t.Error("the scrape lacks hetsched_build_info")
	}

	c.startAgent("m2", "--metrics-listen", addr) // taken by m1
	a := c.agents["m2"]
	delete(c.agents, "m2")
	if err := a.Wait(); err == nil || !strings.Contains(a.Stderr(), "metrics-listen") {
		t.Errorf("an agent on a taken --metrics-listen: %v, stderr %s", err, a.Stderr())
	}
}
