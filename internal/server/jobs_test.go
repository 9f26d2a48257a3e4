package server

import (
	"strings"
	"testing"
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
