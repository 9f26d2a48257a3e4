package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/up"
)

// asCLI makes this test binary act as the hetsched binary (the agents'
// shim and the examples' script run it).
const asCLI = "HETSCHED_TEST_AS_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(asCLI) == "1" {
		_ = os.Unsetenv(asCLI)
		root := newRoot()
		root.SetArgs(os.Args[1:])
		if err := root.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "hetsched:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestUpRunsTheExamples starts `up` (server plus in-process agents for the
// default fleet and this machine) and runs every example on it to
// completion: the CPU data-prep task, the GPU training job, the sweep and
// the TPU inference leases (through examples/tpu-inference.sh).
func TestUpRunsTheExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs the examples' commands")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var out childproc.SyncBuffer
	dataDir := t.TempDir()
	go func() {
		done <- up.Run(ctx, &out, up.Options{DataDir: dataDir, Listen: "127.0.0.1:0", Grace: time.Second,
			Shim: []string{exe, "agent-shim"}, ShimEnv: []string{asCLI + "=1"}, Ready: func(u string) { ready <- u }})
	}()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
		}
	})
	var base string
	select {
	case base = <-ready:
	case err := <-done:
		t.Fatalf("up: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("up not ready in 60s:\n%s", out.String())
	}
	for _, want := range []string{"hetsched is up: " + base, "web UI: " + base + "/ui/", "gpu-h100", "gpu-a100", "tpu-v5e", "cpu-1", "cpu-2", "(this machine)", "Ctrl-C",
		"queues (the default tree", "├─ team-a ", "└─ team-b ", "max nvidia.com/gpu=12"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	browserRefused(t, hc, base)
	// The examples share files through $HETSCHED_SHARED_DIR, never a
	// directory every user and run of this machine shares: a $TMPDIR the
	// tasks inherit stays empty.
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	if o, err := run(t, "get", "queues", "--server", base); err != nil || !strings.Contains(o, "team-a") || !strings.Contains(o, "team-b") {
		t.Fatalf("get queues: %v\n%s", err, o)
	}
	ids := map[string]bool{}
	jobIDs := map[string]string{}
	for _, f := range []string{"data-prep.yaml", "train-gang.yaml", "sweep.yaml", "pipeline.yaml", "mapreduce.yaml"} {
		o, err := run(t, "submit", "-f", filepath.Join("..", "..", "examples", f), "--server", base, "-o", "json")
		if err != nil {
			t.Fatalf("submit %s: %v\n%s", f, err, o)
		}
		var sub struct{ ID string }
		_ = json.Unmarshal([]byte(o), &sub)
		jobIDs[f] = sub.ID
		if f == "data-prep.yaml" { // the training reads its output
			var v struct{ ID string }
			if err := json.Unmarshal([]byte(o), &v); err != nil {
				t.Fatalf("%v %s", err, o)
			}
			waitSucceeded(t, base, v.ID)
		}
	}
	// The leases, through the script, with this binary as hetsched.
	script := exec.Command("sh", filepath.Join("..", "..", "examples", "tpu-inference.sh"))
	script.Env = append(os.Environ(), "HETSCHED="+exe, asCLI+"=1", "HETSCHED_SERVER="+base)
	if o, err := script.CombinedOutput(); err != nil || strings.Count(string(o), "succeeded") != 4 || !strings.Contains(string(o), " tpu:0 ") {
		t.Fatalf("tpu-inference.sh: %v\n%s", err, o)
	}
	var tasks []struct {
		Spec  map[string]any `json:"-"`
		ID    string         `json:"id"`
		Name  string         `json:"name"`
		State string         `json:"state"`
		Node  string         `json:"node"`
	}
	deadline := time.Now().Add(120 * time.Second)
	for {
		resp, err := hc.Get(base + "/api/v1/tasks?limit=1000")
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Tasks json.RawMessage `json:"tasks"`
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("%v %s", err, b)
		}
		if err := json.Unmarshal(body.Tasks, &tasks); err != nil {
			t.Fatal(err)
		}
		finished := 0
		for _, x := range tasks {
			ids[x.ID] = true
			if x.State == "succeeded" {
				finished++
			} else if x.State == "failed" || x.State == "timeout" || x.State == "expired" {
				t.Fatalf("task %s (%s) %s on %s", x.ID, x.Name, x.State, x.Node)
			}
		}
		if len(tasks) == 1+2+8+4+4+5 && finished == len(tasks) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not all examples finished in 120s: %+v", tasks)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Their logs are there.
	for _, x := range tasks {
		if x.Name == "data-prep" {
			if o, err := run(t, "logs", x.ID, "--server", base); err != nil || !strings.Contains(o, "rows: 200000") {
				t.Errorf("data-prep logs: %v %q", err, o)
			}
		}
	}
	worker := ""
	for _, x := range tasks {
		if strings.HasSuffix(x.ID, ".worker-1") {
			worker = x.ID
		}
	}
	if o, err := run(t, "logs", worker, "--server", base); err != nil || !strings.Contains(o, "rank 1 epoch 4 loss") || !strings.Contains(o, "200000 rows") {
		t.Errorf("worker-1 logs: %v %q", err, o)
	}
	// The pipeline: the training gang was placed in one step on GPUs of one
	// model (the embedded fleet has one node of each), the evaluation after
	// it on the TPU; the map shards near their data.
	type jobTask struct {
		ID, Node, State string
		Chosen          int
		Scheduled       time.Time
		Started         time.Time
		Finished        time.Time
	}
	job := func(id string) map[string]jobTask {
		resp, err := hc.Get(base + "/api/v1/jobs/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			State string
			Tasks []jobTask
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || v.State != "succeeded" {
			t.Fatalf("job %s: %v %+v", id, err, v)
		}
		out := map[string]jobTask{}
		for _, x := range v.Tasks {
			out[strings.TrimPrefix(x.ID, id+".")] = x
		}
		return out
	}
	pl := job(jobIDs["pipeline.yaml"])
	t0, t1, ev, prep := pl["train-0"], pl["train-1"], pl["eval"], pl["prep"]
	if !t0.Scheduled.Equal(t1.Scheduled) || t0.Node != t1.Node || !strings.HasPrefix(t0.Node, "gpu-") {
		t.Errorf("the training gang was not placed together on one GPU model's node: %+v %+v", t0, t1)
	}
	if t0.Scheduled.Before(prep.Finished) || ev.Scheduled.Before(t0.Finished) || ev.Scheduled.Before(t1.Finished) {
		t.Errorf("pipeline order broken: prep %+v, train %+v %+v, eval %+v", prep, t0, t1, ev)
	}
	if ev.Node != "tpu-v5e" || ev.Chosen != -1 {
		t.Errorf("eval ran on %s (alternative %d), want the TPU", ev.Node, ev.Chosen)
	}
	if o, err := run(t, "logs", jobIDs["pipeline.yaml"]+".eval", "--server", base); err != nil || !strings.Contains(o, "2 models") || !strings.Contains(o, "google.com/tpu:") {
		t.Errorf("eval logs: %v %q", err, o)
	}
	mr := job(jobIDs["mapreduce.yaml"])
	if mr["map-0"].Node != "cpu-1" || mr["map-1"].Node != "cpu-2" || mr["map-2"].Node != "cpu-1" {
		t.Errorf("map shards not on their data: %s %s %s", mr["map-0"].Node, mr["map-1"].Node, mr["map-2"].Node)
	}
	if o, err := run(t, "logs", jobIDs["mapreduce.yaml"]+".reduce", "--server", base); err != nil || !strings.Contains(o, "8 the") {
		t.Errorf("reduce logs: %v %q", err, o)
	}
	// Their files are in up's shared dir, and nowhere else.
	shared := filepath.Join(dataDir, "shared")
	for _, f := range []string{"data.csv", filepath.Join(jobIDs["pipeline.yaml"], "model-1"), filepath.Join(jobIDs["mapreduce.yaml"], "map-3")} {
		if _, err := os.Stat(filepath.Join(shared, f)); err != nil {
			t.Errorf("the examples' %s is not in %s: %v", f, shared, err)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) > 0 {
		t.Errorf("the examples wrote in $TMPDIR: %v", left)
	}
	// The pages' command task was neither stored nor run.
	if resp, err := hc.Get(base + "/api/v1/tasks/csrf"); err != nil || resp.StatusCode != 404 {
		t.Errorf("the csrf task: %v %v", err, resp)
	}
	filepath.WalkDir(dataDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "pwned.txt" {
			t.Errorf("the page's command ran: %s", p)
		}
		return nil
	})
	cancel()
	stopped = true
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("up did not stop within 30s")
	}
	if !strings.Contains(out.String(), "stopped.") {
		t.Errorf("no clean stop:\n%s", out.String())
	}
}

func waitSucceeded(t *testing.T, base, id string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		o, err := run(t, "describe", "task", id, "--server", base, "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ State string }
		_ = json.Unmarshal([]byte(o), &v)
		if v.State == "succeeded" {
			return
		}
		if v.State == "failed" || time.Now().After(deadline) {
			t.Fatalf("task %s: %s", id, o)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// browserRefused sends issue 15's reproductions as written: a page's
// cross-origin text/plain POST of a command task, the same without Origin,
// and a rebound Host; each is refused.
func browserRefused(t *testing.T, hc *http.Client, base string) {
	t.Helper()
	body := `{"id":"csrf","command":["sh","-c","id > pwned.txt"],"resources":{"cpu":"10m"}}`
	_, port, _ := strings.Cut(strings.TrimPrefix(base, "http://"), ":")
	for _, c := range []struct {
		method, host, origin, ct string
		want                     int
	}{
		{"POST", "", "http://evil.example", "text/plain;charset=UTF-8", 403},
		{"POST", "", "", "text/plain;charset=UTF-8", 415},
		{"GET", "evil.example:" + port, "", "", 421},
	} {
		var rd io.Reader
		if c.method == "POST" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(c.method, base+"/api/v1/tasks", rd)
		if c.host != "" {
			req.Host = c.host
		}
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		if c.ct != "" {
			req.Header.Set("Content-Type", c.ct)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s host %q origin %q type %q: %d, want %d", c.method, c.host, c.origin, c.ct, resp.StatusCode, c.want)
		}
	}
}

// upChild is `hetsched up` run by the built binary, its output read line
// by line.
type upChild struct {
	cmd    *exec.Cmd
	base   string
	out    childproc.SyncBuffer // everything it printed, for failures
	exited chan error           // after its output closed

	mu      sync.Mutex
	lines   []string // stdout so far
	next    int      // the first line waitLine has not looked at
	closed  bool     // stdout ended
	changed chan struct{}
}

// startUp runs bin's up on a fresh data dir and waits for its banner.
func startUp(t *testing.T, bin string, args ...string) *upChild {
	t.Helper()
	u := &upChild{exited: make(chan error, 1), changed: make(chan struct{}, 1)}
	u.cmd = exec.Command(bin, append([]string{"up", "--data-dir", t.TempDir(), "--listen", "127.0.0.1:0"}, args...)...)
	u.cmd.Stderr = &u.out
	u.cmd.WaitDelay = 5 * time.Second
	stdout, err := u.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	notify := func() {
		select {
		case u.changed <- struct{}{}:
		default:
		}
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			u.out.Write([]byte(sc.Text() + "\n"))
			u.mu.Lock()
			u.lines = append(u.lines, sc.Text())
			u.mu.Unlock()
			notify()
		}
		u.mu.Lock()
		u.closed = true
		u.mu.Unlock()
		notify()
		u.exited <- u.cmd.Wait()
	}()
	t.Cleanup(func() {
		select {
		case err := <-u.exited:
			u.exited <- err
			return
		default:
		}
		// Two interrupts (up takes them in order): stop and kill the
		// tasks now; then the process.
		_ = u.cmd.Process.Signal(os.Interrupt)
		_ = u.cmd.Process.Signal(os.Interrupt)
		select {
		case <-u.exited:
		case <-time.After(20 * time.Second):
			_ = u.cmd.Process.Kill()
			<-u.exited
		}
	})
	line := u.waitLine(t, "hetsched is up: ", 60*time.Second)
	u.base = line[strings.Index(line, "hetsched is up: ")+len("hetsched is up: "):]
	u.waitLine(t, "Ctrl-C stops", 10*time.Second)
	return u
}

// waitLine returns the next line holding s, within d.
func (u *upChild) waitLine(t *testing.T, s string, d time.Duration) string {
	t.Helper()
	deadline := time.After(d)
	for {
		u.mu.Lock()
		for u.next < len(u.lines) {
			l := u.lines[u.next]
			u.next++
			if strings.Contains(l, s) {
				u.mu.Unlock()
				return l
			}
		}
		closed := u.closed
		u.mu.Unlock()
		if closed {
			t.Fatalf("up exited before printing %q:\n%s", s, u.out.String())
		}
		select {
		case <-u.changed:
		case <-deadline:
			t.Fatalf("up did not print %q within %s:\n%s", s, d, u.out.String())
		}
	}
}

// waitExit waits for up to exit, within d, and returns how long it took.
func (u *upChild) waitExit(t *testing.T, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case err := <-u.exited:
		u.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("up: %v\n%s", err, u.out.String())
		}
		return time.Since(start)
	case <-time.After(d):
		t.Fatalf("up did not exit within %s:\n%s", d, u.out.String())
	}
	return 0
}

// stubbornTask submits a task on cpu-1 that ignores SIGTERM and waits
// until it runs (its log says so), returning its id and its pid.
func stubbornTask(t *testing.T, base string) (string, int) {
	t.Helper()
	spec := specFile(t, "stubborn.json", `{"name":"stubborn","resources":{"cpu":"100m"},"nodeSelector":{"hetsched.io/node":"cpu-1"},
		"command":["sh","-c","trap '' TERM; echo ready $$; exec sleep 120"]}`)
	o, err := run(t, "submit", "-f", spec, "--server", base, "-o", "json")
	var sub struct{ ID string }
	if err != nil || json.Unmarshal([]byte(o), &sub) != nil || sub.ID == "" {
		t.Fatalf("submit: %v\n%s", err, o)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		o, err := run(t, "logs", sub.ID, "--server", base)
		if _, rest, ok := strings.Cut(o, "ready "); err == nil && ok {
			pid, err := strconv.Atoi(strings.TrimSpace(rest))
			if err != nil {
				t.Fatalf("logs: %q", o)
			}
			return sub.ID, pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task did not start within 60s: %v %q", err, o)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitGone waits (up to d) until pid has exited: no process, or a zombie
// no one reaped yet.
func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if i := strings.LastIndexByte(string(b), ')'); i > 0 && strings.HasPrefix(string(b[i+1:]), " Z") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task's process %d still runs %s after up stopped: %s", pid, d, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUpInterrupts: up's Ctrl-C says which tasks it waits for and for how
// long; a second Ctrl-C kills them at once. The real binary, real signals,
// a task that ignores SIGTERM.
func TestUpInterrupts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds hetsched and runs up")
	}
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Run("second Ctrl-C kills now", func(t *testing.T) {
		u := startUp(t, bin, "--grace", "30s")
		id, pid := stubbornTask(t, u.base)
		if err := u.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		u.waitLine(t, "stopping: waiting up to 30s for 1 task to exit (task "+id+" on node cpu-1); press Ctrl-C again to kill it now", 10*time.Second)
		if err := u.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		u.waitLine(t, "killing the running tasks now", 5*time.Second)
		if took := u.waitExit(t, 15*time.Second); took > 10*time.Second {
			t.Errorf("up took %s to exit after the second Ctrl-C (grace 30s)", took)
		}
		if !strings.Contains(u.out.String(), "stopped (tasks killed).") {
			t.Errorf("no stop line:\n%s", u.out.String())
		}
		waitGone(t, pid, 5*time.Second)
	})
	t.Run("one Ctrl-C waits for the grace", func(t *testing.T) {
		u := startUp(t, bin, "--grace", "2s")
		id, pid := stubbornTask(t, u.base)
		start := time.Now()
		if err := u.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		u.waitLine(t, "stopping: waiting up to 2s for 1 task to exit (task "+id+" on node cpu-1)", 10*time.Second)
		u.waitLine(t, "hetsched up: stopped.", 30*time.Second)
		if took := time.Since(start); took < 2*time.Second {
			t.Errorf("up stopped in %s, before the task's 2s grace: was it killed early?", took)
		}
		u.waitExit(t, 10*time.Second)
		waitGone(t, pid, 5*time.Second)
	})
}

// runUp runs up in this process until the returned stop is called; it
// returns what up printed by then.
func runUp(t *testing.T, opt up.Options) (out *childproc.SyncBuffer, stop func() error) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out = &childproc.SyncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	opt.Listen, opt.Grace = "127.0.0.1:0", time.Second
	opt.Shim, opt.ShimEnv = []string{exe, "agent-shim"}, []string{asCLI + "=1"}
	opt.Ready = func(u string) { ready <- u }
	go func() { done <- up.Run(ctx, out, opt) }()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return fmt.Errorf("up did not stop within 30s")
		}
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case <-ready:
	case err := <-done:
		stopped = true
		cancel()
		if err == nil {
			err = fmt.Errorf("up returned before it was ready")
		}
		return out, func() error { return err }
	case <-time.After(60 * time.Second):
		t.Fatalf("up not ready in 60s:\n%s", out.String())
	}
	return out, stop
}

// TestUpQueues: --queues FILE puts the file's tree at start and up prints
// it; a restart without --queues keeps the store's tree (no defaults are
// added to it); a bad file is refused naming it.
func TestUpQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs up")
	}
	dataDir := t.TempDir()
	file := filepath.Join("..", "..", "examples", "queues.yaml")
	out, stop := runUp(t, up.Options{DataDir: dataDir, Queues: file})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"queues (from " + file + "; hetsched apply -f FILE changes them):",
		"├─ prod ", "└─ research ", "   ├─ nlp ", "   └─ vision ", "weight 3, guaranteed cpu=16,google.com/tpu=4,nvidia.com/gpu=8"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "─ team-a") {
		t.Errorf("the default tree was added to the file's:\n%s", out.String())
	}
	out, stop = runUp(t, up.Options{DataDir: dataDir})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "queues (from the store;") || !strings.Contains(s, "└─ research ") || strings.Contains(s, "─ team-a") {
		t.Errorf("restart without --queues:\n%s", s)
	}
	bad := specFile(t, "bad-queues.yaml", "queues:\n  - {name: a, wieght: 2}\n")
	_, stop = runUp(t, up.Options{DataDir: t.TempDir(), Queues: bad})
	if err := stop(); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "wieght") {
		t.Errorf("a bad --queues file: %v", err)
	}
}
