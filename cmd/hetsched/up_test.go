package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	for _, want := range []string{"hetsched is up: " + base, "gpu-h100", "gpu-a100", "tpu-v5e", "cpu-1", "cpu-2", "(this machine)", "Ctrl-C"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("banner lacks %q:\n%s", want, out.String())
		}
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	browserRefused(t, hc, base)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the examples' shared data dir (inherited by the tasks via the agents)
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
	// The pipeline: the training gang was placed in one step on two nodes,
	// the evaluation after it on the TPU; the map shards near their data.
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
	if !t0.Scheduled.Equal(t1.Scheduled) || t0.Node == t1.Node {
		t.Errorf("the training gang was not placed together on two nodes: %+v %+v", t0, t1)
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
