package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/agent/discover"
	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

const shimEnv = "HETSCHED_EXECUTOR_SHIM"

func TestMain(m *testing.M) {
	if os.Getenv(shimEnv) == "1" {
		_ = os.Unsetenv(shimEnv)
		os.Exit(executor.RunShim(os.Args[1:]))
	}
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// startAgent runs an in-process agent for a node with declared devices
// from devicesFile; it stops when the test ends.
func startAgent(t *testing.T, base, name, devicesFile string) *Agent {
	t.Helper()
	a, _ := startAgentIn(t, base, name, devicesFile, t.TempDir())
	return a
}

// startAgentIn is startAgent on a given work dir; stop ends it early.
// The agent kills its tasks when it stops (KillOnExit) and stop returns
// once their shims have exited: shims outlive an agent by design (the
// next one adopts them), and one left running would write in the work
// dir while t.TempDir's cleanup removes it.
func startAgentIn(t *testing.T, base, name, devicesFile, workDir string) (a *Agent, stop func()) {
	t.Helper()
	return startAgentWith(t, declaredOptions(t, base, name, devicesFile, workDir))
}

// declaredOptions are startAgentIn's options: a node with 8 CPUs, 8 GiB
// and the devices of devicesFile, which also monitors them.
func declaredOptions(t *testing.T, base, name, devicesFile, workDir string) Options {
	t.Helper()
	src := discover.Declared{Path: devicesFile}
	devs, _, err := src.Devices()
	if err != nil {
		t.Fatal(err)
	}
	node := api.Node{Name: name, Capacity: resource.List{resource.CPU: 8000, resource.Memory: 8 << 30}, Devices: devs}
	return Options{Server: base, Node: node, Monitors: []discover.Monitor{src}, WorkDir: workDir}
}

// startAgentWith runs an in-process agent with opt (its shim this test
// binary, a 500ms grace, KillOnExit, a test logger) until the test ends
// or stop; it returns once the agent registered.
func startAgentWith(t *testing.T, opt Options) (a *Agent, stop func()) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	opt.Grace, opt.KillOnExit = 500*time.Millisecond, true
	opt.Shim, opt.ShimEnv = []string{exe}, []string{shimEnv + "=1", "GORACE=atexit_sleep_ms=0"}
	opt.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err = New(opt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	waitFor(t, 20*time.Second, func() bool { return a.Connected() > 0 }, "agent "+opt.Node.Name+" registered")
	return a, stop
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func waitFor(t *testing.T, d time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func devicesFile(t *testing.T, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "devices.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const twoGPUs = "devices:\n  - {type: nvidia.com/gpu, id: \"0\", model: L4}\n  - {type: nvidia.com/gpu, id: \"1\", model: L4}\n"

var hc = &http.Client{Timeout: 30 * time.Second}

func post(t *testing.T, url, body string) []byte {
	t.Helper()
	resp, err := hc.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := hc.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type taskView struct {
	State    string `json:"state"`
	Node     string `json:"node"`
	Attempt  int    `json:"attempt"`
	ExitCode *int   `json:"exitCode"`
	Reason   string `json:"reason"`
	Devices  []struct {
		ID string `json:"id"`
	} `json:"devices"`
}

func task(t *testing.T, base, id string) taskView {
	t.Helper()
	code, b := get(t, base+"/api/v1/tasks/"+id)
	if code != 200 {
		t.Fatalf("GET task %s: %d %s", id, code, b)
	}
	var v taskView
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func waitState(t *testing.T, base, id string, d time.Duration, states ...string) taskView {
	t.Helper()
	var v taskView
	waitFor(t, d, func() bool {
		v = task(t, base, id)
		for _, s := range states {
			if v.State == s {
				return true
			}
		}
		return false
	}, fmt.Sprintf("task %s in %v (last %+v)", id, states, v))
	return v
}

// TestAgentRunsCommandsWithDevicesAndLogs: a command task runs on the
// node it was placed on, sees its devices in the environment, and its
// output is served through the API, followed while it runs.
func TestAgentRunsCommandsWithDevicesAndLogs(t *testing.T) {
	base := servertest.Start(t, "nodes: []\n")
	startAgent(t, base, "n1", devicesFile(t, twoGPUs))

	post(t, base+"/api/v1/tasks", `{"id":"env","priority":1,"resources":{"cpu":"1","nvidia.com/gpu":1},
		"env":{"GREETING":"hello"},
		"command":["sh","-c","echo task=$HETSCHED_TASK_ID cuda=$CUDA_VISIBLE_DEVICES nv=$NVIDIA_VISIBLE_DEVICES devs=$HETSCHED_DEVICES $GREETING; echo oops >&2; pwd"]}`)
	v := waitState(t, base, "env", 30*time.Second, "succeeded", "failed")
	if v.State != "succeeded" || v.ExitCode == nil || *v.ExitCode != 0 || v.Node != "n1" || len(v.Devices) != 1 {
		t.Fatalf("env task: %+v", v)
	}
	code, out := get(t, base+"/api/v1/tasks/env/logs")
	dev := v.Devices[0].ID
	want := fmt.Sprintf("task=env cuda=%s nv=%s devs=nvidia.com/gpu:%s hello", dev, dev, dev)
	if code != 200 || !strings.Contains(string(out), want) || !strings.Contains(string(out), "oops") {
		t.Fatalf("logs %d %q, want %q and oops", code, out, want)
	}
	_, errOnly := get(t, base+"/api/v1/tasks/env/logs?stream=stderr")
	if strings.TrimSpace(string(errOnly)) != "oops" {
		t.Fatalf("stderr %q", errOnly)
	}
	// A CPU task on a GPU node sees no GPU.
	post(t, base+"/api/v1/tasks", `{"id":"cpu","priority":1,"resources":{"cpu":"1"},"command":["sh","-c","echo cuda=[$CUDA_VISIBLE_DEVICES] nv=$NVIDIA_VISIBLE_DEVICES"]}`)
	waitState(t, base, "cpu", 30*time.Second, "succeeded")
	if _, out := get(t, base+"/api/v1/tasks/cpu/logs"); !strings.Contains(string(out), "cuda=[] nv=void") {
		t.Fatalf("cpu task logs %q", out)
	}

	// Follow a running task's logs to the end.
	post(t, base+"/api/v1/tasks", `{"id":"slow","priority":1,"resources":{"cpu":"1"},"command":["sh","-c","for i in 1 2 3; do echo line$i; sleep 0.3; done"]}`)
	waitState(t, base, "slow", 30*time.Second, "running", "succeeded")
	code, out = get(t, base+"/api/v1/tasks/slow/logs?follow=true")
	if code != 200 || string(out) != "line1\nline2\nline3\n" {
		t.Fatalf("followed logs %d %q", code, out)
	}

	// A failing command reports its exit code.
	post(t, base+"/api/v1/tasks", `{"id":"fail","priority":1,"resources":{"cpu":"1"},"command":["sh","-c","exit 7"]}`)
	v = waitState(t, base, "fail", 30*time.Second, "failed", "succeeded")
	if v.ExitCode == nil || *v.ExitCode != 7 {
		t.Fatalf("fail: %+v", v)
	}
	// A task that runs past its timeout is killed, with its children.
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	post(t, base+"/api/v1/tasks", fmt.Sprintf(`{"id":"long","priority":1,"timeout":"1s","resources":{"cpu":"1"},"command":["sh","-c","sleep 300 & echo $! > %s; wait"]}`, pidFile))
	v = waitState(t, base, "long", 30*time.Second, "timeout", "failed", "succeeded")
	if v.State != "timeout" {
		t.Fatalf("long: %+v", v)
	}
	waitFor(t, 10*time.Second, func() bool { return !pidAlive(t, pidFile) }, "the timed-out task's child to be gone")
	// Cancelling a running task kills it.
	post(t, base+"/api/v1/tasks", `{"id":"cancelme","priority":1,"resources":{"cpu":"1"},"command":["sleep","300"]}`)
	waitState(t, base, "cancelme", 30*time.Second, "running")
	req, _ := http.NewRequest(http.MethodDelete, base+"/api/v1/tasks/cancelme", nil)
	if resp, err := hc.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("cancel: %v %v", resp, err)
	}
	code, out = get(t, base+"/api/v1/tasks/cancelme/logs?follow=true") // ends when the process is gone
	if code != 200 {
		t.Fatalf("logs of the cancelled task: %d %s", code, out)
	}
}

func pidAlive(t *testing.T, pidFile string) bool {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return true // not written yet
	}
	var pid int
	fmt.Sscan(strings.TrimSpace(string(b)), &pid)
	if pid <= 0 {
		return true
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// A zombie (state Z) has exited.
	f := strings.Fields(string(st))
	return len(f) > 2 && f[2] != "Z"
}

// TestDeviceHealthFlipMovesTheTask: a device turning unhealthy on the
// agent's node re-queues the task on it, which then runs on another node.
func TestDeviceHealthFlipMovesTheTask(t *testing.T) {
	base := servertest.Start(t, "nodes: []\n")
	f1 := devicesFile(t, twoGPUs)
	startAgent(t, base, "n1", f1)
	post(t, base+"/api/v1/tasks", `{"id":"gpu","priority":1,"resources":{"cpu":"1","nvidia.com/gpu":2},"command":["sleep","300"]}`)
	v := waitState(t, base, "gpu", 30*time.Second, "running")
	if v.Node != "n1" {
		t.Fatalf("gpu task on %s", v.Node)
	}
	startAgent(t, base, "n2", devicesFile(t, twoGPUs))
	if err := os.WriteFile(f1, []byte("devices:\n  - {type: nvidia.com/gpu, id: \"0\", model: L4, unhealthy: true}\n  - {type: nvidia.com/gpu, id: \"1\", model: L4}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() bool {
		v = task(t, base, "gpu")
		return v.Node == "n2" && v.State == "running"
	}, "the task to move to n2")
	if v.Attempt != 1 {
		t.Fatalf("moved task attempt %d, want 1", v.Attempt)
	}
	_, b := get(t, base+"/api/v1/nodes/n1")
	var n struct {
		Devices []api.Device `json:"devices"`
	}
	if err := json.Unmarshal(b, &n); err != nil || len(n.Devices) != 2 || !n.Devices[0].Unhealthy || !n.Devices[0].Simulated {
		t.Fatalf("n1 %s", b)
	}
}

// TestFakeFleet: tasks placed on a fake fleet "run" for their duration and
// succeed.
func TestFakeFleet(t *testing.T) {
	base := servertest.Start(t, "nodes: []\n")
	f, err := NewFleet(FleetOptions{Server: base, Name: "fk", Nodes: 50})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = f.Run(ctx) }()
	defer func() { cancel(); wg.Wait() }()
	waitFor(t, 20*time.Second, func() bool { return f.Connected() > 0 }, "fleet registered")
	var tasks []string
	for i := 0; i < 200; i++ {
		tasks = append(tasks, fmt.Sprintf(`{"id":"f%d","priority":1,"duration":"200ms","resources":{"cpu":"1","nvidia.com/gpu":1},"command":["train"]}`, i))
	}
	post(t, base+"/api/v1/tasks", `{"tasks":[`+strings.Join(tasks, ",")+`]}`)
	for i := 0; i < 200; i++ {
		waitState(t, base, fmt.Sprintf("f%d", i), 30*time.Second, "succeeded")
	}
	if _, done := f.Stats(); done != 200 {
		t.Fatalf("fleet finished %d tasks", done)
	}
	_, b := get(t, base+"/api/v1/nodes")
	var nodes struct {
		Nodes []struct {
			Name      string `json:"name"`
			Simulated bool   `json:"simulated"`
			Agent     string `json:"agent"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(b, &nodes); err != nil || len(nodes.Nodes) != 50 || !nodes.Nodes[0].Simulated || nodes.Nodes[0].Agent != "fk" {
		t.Fatalf("nodes %v %.300s", err, b)
	}
}

// TestNewClusterDoesNotMeetOldAttempts: an agent keeps its work dir while
// the server is replaced by one with a fresh store, whose generated task
// ids start again at t1; the new t1 runs (it is not taken for the old
// cluster's finished t1).
func TestNewClusterDoesNotMeetOldAttempts(t *testing.T) {
	work := t.TempDir()
	devs := devicesFile(t, twoGPUs)
	for i, want := range []string{"first", "second"} {
		base := servertest.Start(t, "nodes: []\n")
		_, stop := startAgentIn(t, base, "n1", devs, work)
		b := post(t, base+"/api/v1/tasks", `{"priority":1,"resources":{"cpu":"1"},"command":["echo","`+want+`"]}`)
		var sub struct{ ID string }
		if err := json.Unmarshal(b, &sub); err != nil || sub.ID != "t1" {
			t.Fatalf("submit: %v %s (the test needs the same generated id in both clusters)", err, b)
		}
		waitState(t, base, sub.ID, 30*time.Second, "succeeded")
		if _, out := get(t, base+"/api/v1/tasks/"+sub.ID+"/logs"); strings.TrimSpace(string(out)) != want {
			t.Fatalf("cluster %d: logs %q, want %q", i, out, want)
		}
		stop()
	}
}
