package server

import (
	"strings"
	"testing"
	"time"
)

const pipeline = `{"id":"p","priority":1,"tasks":[
 {"id":"prep","resources":{"cpu":"1"}},
 {"id":"train","resources":{"cpu":"1","nvidia.com/gpu":1},"depends":["prep"]},
 {"id":"eval","resources":{"cpu":"1"},"depends":["train"]}]}`

func taskStates(m map[string]any) map[string]string {
	out := map[string]string{}
	tasks, _ := m["tasks"].([]any)
	for _, x := range tasks {
		t := x.(map[string]any)
		out[t["id"].(string)] = t["state"].(string)
	}
	return out
}

func TestJobsOverHTTP(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	code, m := call(t, "POST", s.base+"/api/v1/jobs", pipeline)
	if code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	st := taskStates(m)
	if st["p.prep"] != "scheduled" || st["p.train"] != "blocked" || st["p.eval"] != "blocked" || m["state"] != "running" {
		t.Fatalf("after submit: %v %v", m["state"], st)
	}
	if code, _ := call(t, "POST", s.base+"/api/v1/tasks/p.prep/complete", `{"exitCode":0}`); code != 200 {
		t.Fatal("complete prep")
	}
	_, m = call(t, "GET", s.base+"/api/v1/jobs/p", "")
	if st := taskStates(m); st["p.train"] != "scheduled" {
		t.Fatalf("train after prep: %v", st)
	}
	s.stop(t)
	s = start(t, dir) // the job survives a restart
	defer s.stop(t)
	if code, _ := call(t, "POST", s.base+"/api/v1/tasks/p.train/complete", `{"exitCode":3}`); code != 200 {
		t.Fatal("fail train")
	}
	_, m = call(t, "GET", s.base+"/api/v1/jobs/p", "")
	if st := taskStates(m); st["p.train"] != "failed" || st["p.eval"] != "skipped" || m["state"] != "failed" {
		t.Fatalf("after train failed: %v %v", m["state"], st)
	}
	// Idempotent resubmit; conflicting resubmit.
	if code, _ := call(t, "POST", s.base+"/api/v1/jobs", pipeline); code != 201 {
		t.Errorf("idempotent job resubmit: %d", code)
	}
	if code, m := call(t, "POST", s.base+"/api/v1/jobs", `{"id":"p","tasks":[{"id":"x"}]}`); code != 409 || errField(m) != "id" {
		t.Errorf("conflicting job: %d %v", code, m)
	}
	// A second job, cancelled while waiting.
	code, m = call(t, "POST", s.base+"/api/v1/jobs", `{"id":"q","tasks":[{"id":"big","resources":{"cpu":"1000"}},{"id":"after","depends":["big"]}]}`)
	if code != 201 || m["state"] != "pending" {
		t.Fatalf("q: %d %v", code, m)
	}
	code, m = call(t, "DELETE", s.base+"/api/v1/jobs/q", "")
	if st := taskStates(m); code != 200 || st["q.big"] != "cancelled" || st["q.after"] != "skipped" {
		t.Errorf("cancel job: %d %v", code, st)
	}
	for _, c := range []struct {
		body, field, msg string
	}{
		{`{"tasks":[{"id":"a","depends":["b"]},{"id":"b","depends":["a"]}]}`, "tasks", "a → b → a"},
		{`{"tasks":[{"id":"a","depends":["zz"]}]}`, "tasks[0].depends[0]", ""},
		{`{"tasks":[{"id":"a"},{"id":"a"}]}`, "tasks[1].id", ""},
		{`{"tasks":[{"id":"a","resources":{"cpu":"x"}}]}`, "tasks[0].resources.cpu", ""},
		{`{"tasks":[]}`, "tasks", ""},
		{`{"tasks":[{"id":"a"}],"failurePolicy":"maybe"}`, "failurePolicy", ""},
		{`{"tasks":[{"id":"a"}],"surprise":1}`, "surprise", ""},
	} {
		code, m := call(t, "POST", s.base+"/api/v1/jobs", c.body)
		msg, _ := m["error"].(map[string]any)["message"].(string)
		if code != 400 || errField(m) != c.field || !strings.Contains(msg, c.msg) {
			t.Errorf("%s: %d %v", c.body, code, m)
		}
	}
	if code, m := call(t, "GET", s.base+"/api/v1/jobs/nosuch", ""); code != 404 || errField(m) != "id" {
		t.Errorf("unknown job: %d %v", code, m)
	}
}

// issue 16 §1: GET /jobs lists jobs (state and queue filters, paging),
// GET /tasks?job= lists a job's tasks, and a cancelled job is cancelled
// (not failed, though its blocked tasks were skipped), after a restart too.
func TestJobListAndFilter(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	for _, id := range []string{"j1", "j2", "j3"} {
		body := strings.Replace(pipeline, `"id":"p"`, `"id":"`+id+`"`, 1)
		if code, m := call(t, "POST", s.base+"/api/v1/jobs", body); code != 201 {
			t.Fatalf("submit %s: %d %v", id, code, m)
		}
	}
	if code, m := call(t, "DELETE", s.base+"/api/v1/jobs/j2", ""); code != 200 || m["state"] != "cancelled" {
		t.Fatalf("cancel j2: %d %v", code, m)
	}
	ids := func(m map[string]any, key string) string {
		var out []string
		for _, x := range m[key].([]any) {
			out = append(out, x.(map[string]any)["id"].(string))
		}
		return strings.Join(out, ",")
	}
	check := func() {
		t.Helper()
		if code, m := call(t, "GET", s.base+"/api/v1/jobs", ""); code != 200 || ids(m, "jobs") != "j1,j2,j3" {
			t.Errorf("jobs: %d %v", code, m)
		}
		if _, m := call(t, "GET", s.base+"/api/v1/jobs?state=cancelled", ""); ids(m, "jobs") != "j2" {
			t.Errorf("cancelled jobs: %v", m)
		}
		_, m := call(t, "GET", s.base+"/api/v1/jobs?limit=2", "")
		if ids(m, "jobs") != "j1,j2" || m["cursor"] == nil {
			t.Fatalf("first page: %v", m)
		}
		if _, m = call(t, "GET", s.base+"/api/v1/jobs?limit=2&cursor="+m["cursor"].(string), ""); ids(m, "jobs") != "j3" || m["cursor"] != nil {
			t.Errorf("second page: %v", m)
		}
		if code, m := call(t, "GET", s.base+"/api/v1/tasks?job=j3", ""); code != 200 || ids(m, "tasks") != "j3.prep,j3.train,j3.eval" {
			t.Errorf("tasks of j3: %d %v", code, m)
		}
		if _, m := call(t, "GET", s.base+"/api/v1/tasks?job=j3&state=blocked", ""); ids(m, "tasks") != "j3.train,j3.eval" {
			t.Errorf("blocked tasks of j3: %v", m)
		}
		if code, m := call(t, "GET", s.base+"/api/v1/tasks?job=nosuch", ""); code != 404 || errField(m) != "job" {
			t.Errorf("tasks of an unknown job: %d %v", code, m)
		}
		if code, m := call(t, "GET", s.base+"/api/v1/jobs?state=done", ""); code != 400 || errField(m) != "state" {
			t.Errorf("bad state filter: %d %v", code, m)
		}
	}
	check()
	s.stop(t)
	s = start(t, dir)
	defer s.stop(t)
	check()
}

// issue 16 §1: a task with neither a command nor a lease gets the
// server's --default-lease (shown in its view) and expires by it; "never"
// asks for no expiry.
func TestDefaultLease(t *testing.T) {
	s := startWith(t, Options{DataDir: t.TempDir(), DefaultLease: 300 * time.Millisecond})
	defer s.stop(t)
	api := s.base + "/api/v1"
	code, m := call(t, "POST", api+"/schedule", `{"id":"forgot","resources":{"cpu":"1"}}`)
	if code != 200 || m["lease"] != "300ms" {
		t.Fatalf("a lease without one: %d %v", code, m)
	}
	if code, m = call(t, "POST", api+"/schedule", `{"id":"forever","resources":{"cpu":"1"},"lease":"never"}`); code != 200 || m["lease"] != "never" {
		t.Fatalf("lease never: %d %v", code, m)
	}
	if code, m = call(t, "POST", api+"/tasks", `{"id":"zero","resources":{"cpu":"1"},"lease":"0s"}`); code != 400 || errField(m) != "lease" {
		t.Errorf("lease 0s: %d %v", code, m)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, m = call(t, "GET", api+"/tasks/forgot", ""); m["state"] == "expired" || time.Now().After(deadline) {
			break
		}
	}
	if m["state"] != "expired" {
		t.Fatalf("the defaulted lease did not expire: %v", m)
	}
	if _, m = call(t, "GET", api+"/tasks/forever", ""); m["state"] != "scheduled" {
		t.Errorf("the lease that never expires: %v", m)
	}
}

// TestFinishedJobIsFinal (issue 45 §1.3): cancelling a job that already
// succeeded is 409 and leaves its state as it was; a job still running
// is cancelled, and cancelling it again is 409 too.
func TestFinishedJobIsFinal(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	api := s.base + "/api/v1"
	if code, m := call(t, "POST", api+"/jobs", `{"id":"done","tasks":[{"id":"a","lease":"1h","resources":{"cpu":"1"}}]}`); code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, m := call(t, "GET", api+"/tasks/done.a", ""); m["state"] == "scheduled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("done.a not placed in 10s")
		}
	}
	if code, m := call(t, "POST", api+"/tasks/done.a/complete", `{"exitCode":0}`); code != 200 {
		t.Fatalf("complete: %d %v", code, m)
	}
	code, m := call(t, "DELETE", api+"/jobs/done", "")
	if code != 409 || !strings.Contains(errMsg(m), "already succeeded") {
		t.Errorf("cancel a succeeded job: %d %v, want 409", code, m)
	}
	if _, m := call(t, "GET", api+"/jobs/done", ""); m["state"] != "succeeded" {
		t.Errorf("after the refused cancel: %v, want succeeded", m["state"])
	}
	if code, m := call(t, "POST", api+"/jobs", `{"id":"live","tasks":[{"id":"a","lease":"1h","resources":{"cpu":"1"}}]}`); code != 201 {
		t.Fatalf("submit: %d %v", code, m)
	}
	if code, m := call(t, "DELETE", api+"/jobs/live", ""); code != 200 || m["state"] != "cancelled" {
		t.Errorf("cancel a live job: %d %v", code, m)
	}
	if code, _ := call(t, "DELETE", api+"/jobs/live", ""); code != 409 {
		t.Errorf("cancel it again: %d, want 409", code)
	}
}
