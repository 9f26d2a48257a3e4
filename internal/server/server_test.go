package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

const nodesYAML = `nodes:
  - name: gpu-a
    labels: {gpu.model: L4}
    capacity: {cpu: "16", memory: 64Gi}
    devices:
      - {type: nvidia.com/gpu, id: "0", model: L4, memory: 24Gi, topology: {nvlink: nv0}}
      - {type: nvidia.com/gpu, id: "1", model: L4, memory: 24Gi, topology: {nvlink: nv0}}
  - name: cpu-a
    capacity: {cpu: "8", memory: 32Gi}
`

type running struct {
	base   string
	cancel context.CancelFunc
	done   chan error
}

// start runs a real server on 127.0.0.1:0 with dir as its data dir.
func start(t *testing.T, dir string) *running {
	t.Helper()
	return startWith(t, Options{DataDir: dir})
}

// startWith runs a real server with opt (listen address, node inventory,
// logger and readiness hook filled in).
func startWith(t *testing.T, opt Options) *running {
	t.Helper()
	return startWithOut(t, opt, io.Discard)
}

// startWithOut is startWith with the server's printed lines sent to out.
func startWithOut(t *testing.T, opt Options, out io.Writer) *running {
	t.Helper()
	nodes := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(nodes, []byte(nodesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	r := &running{cancel: cancel, done: make(chan error, 1)}
	opt.Listen, opt.NodesFile = "127.0.0.1:0", nodes
	if opt.Logger == nil {
		opt.Logger = quiet
	}
	opt.Ready = func(a string) { ready <- a }
	go func() { r.done <- Run(ctx, out, opt) }()
	select {
	case a := <-ready:
		r.base = "http://" + a
	case err := <-r.done:
		t.Fatalf("server did not start: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("server start timed out")
	}
	return r
}

func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("server: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server stop timed out")
	}
}

var client = &http.Client{Timeout: 10 * time.Second}

var quiet = slog.New(slog.DiscardHandler)

func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s %s: non-JSON body %q", method, url, b)
	}
	return resp.StatusCode, m
}

func TestTasksOverHTTPAndRestart(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	code, m := call(t, "POST", s.base+"/api/v1/schedule?wait=2s",
		`{"id":"infer-1","priority":0,"resources":{"cpu":"1","nvidia.com/gpu":"500m"},"lease":"30s"}`)
	if code != 200 || m["state"] != "scheduled" || m["node"] != "gpu-a" {
		t.Fatalf("schedule: %d %v", code, m)
	}
	devs, _ := m["devices"].([]any)
	if len(devs) != 1 || devs[0].(map[string]any)["share"] != float64(500) {
		t.Fatalf("devices: %v", m["devices"])
	}
	code, m = call(t, "POST", s.base+"/api/v1/tasks",
		`{"tasks":[{"id":"b1","resources":{"cpu":"1"}},{"resources":{"cpu":"1"},"priority":3}]}`)
	if ids, _ := m["ids"].([]any); code != 201 || len(ids) != 2 || ids[0] != "b1" || ids[1] == "" {
		t.Fatalf("batch: %d %v", code, m)
	}
	// Idempotent resubmit, then a conflicting one.
	if code, _ := call(t, "POST", s.base+"/api/v1/tasks", `{"id":"b1","resources":{"cpu":"1"}}`); code != 201 {
		t.Errorf("idempotent resubmit: %d", code)
	}
	if code, m := call(t, "POST", s.base+"/api/v1/tasks", `{"id":"b1","resources":{"cpu":"2"}}`); code != 409 || errField(m) != "id" {
		t.Errorf("conflicting resubmit: %d %v", code, m)
	}
	// A 3-GPU task cannot be placed: 202 with the reason.
	code, m = call(t, "POST", s.base+"/api/v1/schedule?wait=100ms", `{"id":"big","priority":0,"resources":{"nvidia.com/gpu":3}}`)
	if code != 202 || m["state"] != "pending" || !strings.Contains(m["reason"].(string), "nvidia.com/gpu") {
		t.Fatalf("unplaceable: %d %v", code, m)
	}
	if code, m := call(t, "GET", s.base+"/readyz", ""); code != 200 || m["status"] != "ready" {
		t.Errorf("readyz: %d %v", code, m)
	}
	if code, m := call(t, "POST", s.base+"/api/v1/tasks/infer-1/renew", ""); code != 200 || m["state"] != "scheduled" {
		t.Errorf("renew: %d %v", code, m)
	}
	s.stop(t)

	// Everything acknowledged is there after a restart.
	s = start(t, dir)
	defer s.stop(t)
	code, m = call(t, "GET", s.base+"/api/v1/tasks/infer-1", "")
	if code != 200 || m["state"] != "scheduled" || m["node"] != "gpu-a" {
		t.Fatalf("after restart: %d %v", code, m)
	}
	if code, _ := call(t, "GET", s.base+"/api/v1/tasks/b1", ""); code != 200 {
		t.Errorf("b1 after restart: %d", code)
	}
	code, m = call(t, "POST", s.base+"/api/v1/tasks/infer-1/complete", `{"exitCode":0}`)
	if code != 200 || m["state"] != "succeeded" {
		t.Errorf("complete: %d %v", code, m)
	}
	if code, m := call(t, "POST", s.base+"/api/v1/nodes/cpu-a/cordon", ""); code != 200 || m["state"] != "cordoned" {
		t.Errorf("cordon: %d %v", code, m)
	}
	if code, m := call(t, "GET", s.base+"/api/v1/nodes", ""); code != 200 || len(m["nodes"].([]any)) != 2 {
		t.Errorf("nodes: %d %v", code, m)
	}
	code, m = call(t, "GET", s.base+"/api/v1/cluster", "")
	gpu, _ := m["resources"].(map[string]any)["nvidia.com/gpu"].(map[string]any)
	if code != 200 || m["policy"] != "least-allocated" || gpu["capacity"] != float64(2000) || gpu["allocated"] != float64(0) {
		t.Errorf("cluster: %d %v", code, m)
	}
	if nodes, _ := m["nodes"].(map[string]any); nodes["cordoned"] != float64(1) || nodes["ready"] != float64(1) {
		t.Errorf("cluster nodes: %v", m["nodes"])
	}
}

func errField(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	f, _ := e["field"].(string)
	return f
}

func errCode(m map[string]any) string {
	e, _ := m["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

// TestBadInput walks the endpoints with bad input: the status, error code
// and field must name the problem; nothing yields a 500.
func TestBadInput(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	if code, _ := call(t, "POST", s.base+"/api/v1/tasks", `{"id":"exists","resources":{"cpu":"1000"}}`); code != 201 { // never placed: stays pending
		t.Fatal("setup")
	}
	cases := []struct {
		method, path, body string
		status             int
		code               errs.Code
		field              string
	}{
		{"POST", "/api/v1/tasks", `{"id":`, 400, errs.InvalidArgument, "id"},
		{"POST", "/api/v1/tasks", ``, 400, errs.InvalidArgument, ""},
		{"POST", "/api/v1/tasks", `[1,2]`, 400, errs.InvalidArgument, ""},
		{"POST", "/api/v1/tasks", `{"bogus":1}`, 400, errs.InvalidArgument, "bogus"},
		{"POST", "/api/v1/tasks", `{"resources":{"cpu":"lots"}}`, 400, errs.InvalidArgument, "resources.cpu"},
		{"POST", "/api/v1/tasks", `{"resources":{"cpu":"-1"}}`, 400, errs.InvalidArgument, "resources.cpu"},
		{"POST", "/api/v1/tasks", `{"resources":{"gpu":1}}`, 400, errs.InvalidArgument, "resources.gpu"},
		{"POST", "/api/v1/tasks", `{"resources":{"cpu":"1"},"alternatives":[{"resources":{"memory":"1Zi"}}]}`, 400, errs.InvalidArgument, "alternatives[0].resources.memory"},
		{"POST", "/api/v1/tasks", `{"priority":7}`, 400, errs.InvalidArgument, "priority"},
		{"POST", "/api/v1/tasks", `{"priority":"high"}`, 400, errs.InvalidArgument, "priority"},
		{"POST", "/api/v1/tasks", `{"duration":"soon"}`, 400, errs.InvalidArgument, "duration"},
		{"POST", "/api/v1/tasks", `{"id":"has space"}`, 400, errs.InvalidArgument, "id"},
		{"POST", "/api/v1/tasks", `{"id":"a","id":"b"}`, 400, errs.InvalidArgument, "id"},
		{"POST", "/api/v1/tasks", `{"ID":"a"}`, 400, errs.InvalidArgument, "ID"},
		{"POST", "/api/v1/tasks", "{\"name\":\"\xff\"}", 400, errs.InvalidArgument, "name"},
		{"POST", "/api/v1/tasks", `{"id":"a"} {}`, 400, errs.InvalidArgument, ""},
		{"POST", "/api/v1/tasks", `{"id":"a","tasks":[{}]}`, 400, errs.InvalidArgument, ""},
		{"POST", "/api/v1/tasks", `{"tasks":[{}],"id":"a"}`, 400, errs.InvalidArgument, ""},
		{"POST", "/api/v1/tasks", `{"resources":{"cpu":null}}`, 400, errs.InvalidArgument, "resources.cpu"},
		{"POST", "/api/v1/tasks", `{"resources":{"cpu":1},"alternatives":[{"speed":"fast"}]}`, 400, errs.InvalidArgument, "alternatives[0].speed"},
		{"POST", "/api/v1/tasks", `{"env":{"A":1}}`, 400, errs.InvalidArgument, "env.A"},
		{"POST", "/api/v1/tasks", `{"command":["a",2]}`, 400, errs.InvalidArgument, "command[1]"},
		{"POST", "/api/v1/tasks", `{"tasks":[{"resources":{"cpu":"1"}},{"priority":9}]}`, 400, errs.InvalidArgument, "tasks[1].priority"},
		{"POST", "/api/v1/tasks", `{"tasks":[]}`, 400, errs.InvalidArgument, "tasks"},
		{"POST", "/api/v1/tasks", `{"tasks":{}}`, 400, errs.InvalidArgument, "tasks"},
		{"POST", "/api/v1/tasks", `{"depends":["nosuch"]}`, 400, errs.InvalidArgument, "depends[0]"},
		{"POST", "/api/v1/tasks", `{"id":"exists","resources":{"cpu":"2"}}`, 409, errs.Conflict, "id"},
		{"POST", "/api/v1/schedule?wait=forever", `{"resources":{"cpu":"1"}}`, 400, errs.InvalidArgument, "wait"},
		{"GET", "/api/v1/tasks/nosuch", ``, 404, errs.NotFound, "id"},
		{"GET", "/api/v1/nodes/nosuch", ``, 404, errs.NotFound, "name"},
		{"POST", "/api/v1/agents/register", `{"agent":"a b","nodes":[{"name":"n1"}]}`, 400, errs.InvalidArgument, "agent"},
		// issue 17 §5: a member given twice is refused in every strict body.
		{"POST", "/api/v1/jobs", `{"id":"j","id":"k","tasks":[{"id":"a","resources":{"cpu":"1"}}]}`, 400, errs.InvalidArgument, "id"},
		{"POST", "/api/v1/jobs", `{"id":"j","gang":{"minMember":1},"gang":{"minMember":2},"tasks":[{"id":"a","resources":{"cpu":"1"}}]}`, 400, errs.InvalidArgument, "gang"},
		{"PUT", "/api/v1/queues/q", `{"name":"q","weight":2,"weight":3}`, 400, errs.InvalidArgument, "weight"},
		{"POST", "/api/v1/agents/register", `{"agent":"a","agent":"b","nodes":[{"name":"n1"}]}`, 400, errs.InvalidArgument, "agent"},
		// issue 16 §1: accepted before, each now a 400 naming the field.
		{"POST", "/api/v1/tasks", `{"name":"ok\u001b[2Jgone","resources":{"cpu":"1"}}`, 400, errs.InvalidArgument, "name"},
		{"POST", "/api/v1/tasks", `{"command":["sh","-c\u0000"],"resources":{"cpu":"1"}}`, 400, errs.InvalidArgument, "command[1]"},
		{"POST", "/api/v1/tasks", `{"command":["true"],"env":{"A":"\u0000"},"resources":{"cpu":"1"}}`, 400, errs.InvalidArgument, "env.A"},
		{"POST", "/api/v1/tasks", `{"metadata":{"k\u0000":"v"},"resources":{"cpu":"1"}}`, 400, errs.InvalidArgument, "metadata"},
		{"POST", "/api/v1/tasks", `{"queueTimeout":5,"resources":{"cpu":"1"}}`, 400, errs.InvalidArgument, "queueTimeout"},
		{"POST", "/api/v1/tasks", `{"lease":"0s","resources":{"cpu":"1"}}`, 400, errs.InvalidArgument, "lease"},
		{"POST", "/api/v1/jobs", `{"tasks":[{"id":"a","shards":0,"resources":{"cpu":"1"}}]}`, 400, errs.InvalidArgument, "tasks[0].shards"},
		{"POST", "/api/v1/jobs", `{"name":"j\u0007","tasks":[{"id":"a","resources":{"cpu":"1"}}]}`, 400, errs.InvalidArgument, "name"},
		{"PUT", "/api/v1/queues/q0", `{"weight":0}`, 400, errs.InvalidArgument, "weight"},
		{"POST", "/api/v1/agents/n1/heartbeat", `{"nodes":[{"node":"n1","cpu":0.1,"memoryUsed":-1}]}`, 400, errs.InvalidArgument, "nodes[0].memoryUsed"},
		{"POST", "/api/v1/agents/n1/heartbeat", `{"nodes":[{"node":"n1","cpu":0.1,"devices":{"0":{"utilization":0.5,"memoryUsed":-5}}}]}`, 400, errs.InvalidArgument, "nodes[0].devices.0.memoryUsed"},
		{"POST", "/api/v1/agents/register", `{"agent":"a1","nodes":[]}`, 400, errs.InvalidArgument, "nodes"},
		{"POST", "/api/v1/agents/register", `{"agent":"a1","nodes":[{"name":"n1","capacity":{"cpu":"x"}}]}`, 400, errs.InvalidArgument, "nodes[0].capacity.cpu"},
		{"POST", "/api/v1/agents/register", `{"agent":"a1","nodes":[{"name":"n1"},{"name":"n1"}]}`, 400, errs.InvalidArgument, "nodes[1].name"},
		{"POST", "/api/v1/agents/register", `{"agent":"a1","nodes":[{"name":"n1"}],"logs":"ftp://x"}`, 400, errs.InvalidArgument, "logs"},
		{"POST", "/api/v1/agents/register", `{"agent":"a1","colour":1}`, 400, errs.InvalidArgument, "colour"},
		{"POST", "/api/v1/agents/nosuch/heartbeat", `{"nodes":[{"node":"n1"}]}`, 404, errs.NotFound, "agent"},
		{"POST", "/api/v1/agents/nosuch/heartbeat", `{"nodes":[{"node":"n1","cpu":2}]}`, 400, errs.InvalidArgument, "nodes[0].cpu"},
		{"POST", "/api/v1/agents/nosuch/heartbeat", `{"nodes":[{"node":"n1","devices":{"0":{"utilization":-1}}}]}`, 400, errs.InvalidArgument, "nodes[0].devices.0.utilization"},
		{"POST", "/api/v1/agents/nosuch/status", `{"updates":[{"task":"x","state":"done"}]}`, 400, errs.InvalidArgument, "updates[0].state"},
		{"POST", "/api/v1/agents/nosuch/status", `{"updates":[{"task":"x","state":"running"}]}`, 404, errs.NotFound, "agent"},
		{"GET", "/api/v1/agents/nosuch/assignments", ``, 404, errs.NotFound, "agent"},
		{"GET", "/api/v1/agents/nosuch/assignments?generation=x", ``, 400, errs.InvalidArgument, "generation"},
		{"GET", "/api/v1/tasks/nosuch/logs", ``, 404, errs.NotFound, "id"},
		{"GET", "/api/v1/tasks/exists/logs", ``, 400, errs.InvalidArgument, "id"},
		{"GET", "/api/v1/tasks/exists/logs?follow=maybe", ``, 400, errs.InvalidArgument, "follow"},
		{"GET", "/api/v1/tasks/exists/logs?stream=both", ``, 400, errs.InvalidArgument, "stream"},
		{"DELETE", "/api/v1/tasks/nosuch", ``, 404, errs.NotFound, "id"},
		{"POST", "/api/v1/tasks/nosuch/complete", `{"exitCode":0}`, 404, errs.NotFound, "id"},
		{"POST", "/api/v1/tasks/exists/complete", `{"exitCode":"zero"}`, 400, errs.InvalidArgument, "exitCode"},
		{"POST", "/api/v1/tasks/exists/renew", ``, 409, errs.Conflict, "id"},
		{"POST", "/api/v1/nodes/nosuch/cordon", ``, 404, errs.NotFound, "name"},
		{"GET", "/api/v1/nowhere", ``, 404, errs.NotFound, ""},
	}
	for _, c := range cases {
		code, m := call(t, c.method, s.base+c.path, c.body)
		if code != c.status || errCode(m) != string(c.code) || errField(m) != c.field {
			t.Errorf("%s %s %s: got %d %s field %q, want %d %s field %q (%v)", c.method, c.path, c.body, code, errCode(m), errField(m), c.status, c.code, c.field, m)
		}
	}
	// A body over the limit is refused with 413 (sent as a stream of
	// spaces: the server must stop reading at the limit).
	big := bytes.Repeat([]byte(" "), MaxBodyBytes+1)
	// 64 MiB over loopback can take a while on a loaded 2-core machine.
	slow := &http.Client{Timeout: 2 * time.Minute}
	resp, err := slow.Post(s.base+"/api/v1/tasks", "application/json", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Errorf("oversized body: %d", resp.StatusCode)
	}
}

func TestRunRefusesNonLoopbackAndBadFlags(t *testing.T) {
	err := Run(context.Background(), io.Discard, Options{Listen: "0.0.0.0:0", DataDir: t.TempDir(), Logger: quiet})
	if errs.FieldOf(err) != "listen" {
		t.Errorf("non-loopback: %v", err)
	}
	if err := Run(context.Background(), io.Discard, Options{Listen: "127.0.0.1:0", Logger: quiet}); errs.FieldOf(err) != "data-dir" {
		t.Errorf("no data dir: %v", err)
	}
	if err := Run(context.Background(), io.Discard, Options{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Policy: "nope", Logger: quiet}); errs.FieldOf(err) != "policy" {
		t.Errorf("bad policy: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "n.yaml")
	os.WriteFile(bad, []byte("nodes:\n  - name: x\n    colour: red\n"), 0o600)
	if err := Run(context.Background(), io.Discard, Options{Listen: "127.0.0.1:0", DataDir: t.TempDir(), NodesFile: bad, Logger: quiet}); errs.FieldOf(err) != "nodes" {
		t.Errorf("bad nodes file: %v", err)
	}
}

// issue 16 §1: a wrong method on a known path is 405 with Allow, a path
// the mux would redirect is a JSON 404 (not an HTML 307), and complete is
// refused for a command task (its agent reports how it ended).
func TestMethodsPathsAndComplete(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	code, _, hdr := send(t, "PUT", s.base+"/api/v1/tasks", "", map[string]string{"Content-Type": "application/json"}, `{}`)
	if code != 405 || !strings.Contains(hdr.Get("Allow"), "GET") || !strings.Contains(hdr.Get("Allow"), "POST") {
		t.Errorf("PUT /tasks: %d Allow %q", code, hdr.Get("Allow"))
	}
	if code, m := call(t, "PATCH", s.base+"/api/v1/tasks/x", "{}"); code != 405 || errCode(m) != "method_not_allowed" {
		t.Errorf("PATCH /tasks/x: %d %v", code, m)
	}
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/api/v1/tasks/..", "/api/v1//tasks", "/api/v1/./tasks"} {
		req, _ := http.NewRequest("GET", s.base+p, nil)
		req.URL.Opaque = p // sent as written
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var m map[string]any
		if resp.StatusCode != 404 || json.Unmarshal(b, &m) != nil {
			t.Errorf("GET %s: %d %q", p, resp.StatusCode, b)
		}
	}
	if code, _ := call(t, "GET", s.base+"/api/v1/nowhere", ""); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
	if code, m := call(t, "POST", s.base+"/api/v1/tasks", `{"id":"cmd","command":["true"],"resources":{"cpu":"1"}}`); code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	if code, m := call(t, "POST", s.base+"/api/v1/tasks/cmd/complete", `{"exitCode":0}`); code != 409 || !strings.Contains(errMsg(m), "agent") {
		t.Errorf("complete of a command task: %d %v", code, m)
	}
}

// issue 16 §2: an unknown field within two edits of a known one says which.
func TestUnknownFieldDidYouMean(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/api/v1/tasks", `{"resorces":{"cpu":"1"}}`, `did you mean "resources"?`},
		{"PUT", "/api/v1/queues/q1", `{"wieght":2}`, `did you mean "weight"?`},
		{"POST", "/api/v1/jobs", `{"taks":[]}`, `did you mean "tasks"?`},
	} {
		code, m := call(t, c.method, s.base+c.path, c.body)
		if code != 400 || !strings.Contains(errMsg(m), c.want) {
			t.Errorf("%s %s %s: %d %v", c.method, c.path, c.body, code, m)
		}
	}
}
