package server

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestTenantQueuesReclaimOverHTTP: a tenant's task that names no queue
// goes to the tenant's own queue; team-b borrows team-a's idle GPU; team-a
// takes it back (reclaim) and the evicted task waits, not lost; GET
// /queues shows usage, fair share and waiting tasks by reason; the metrics
// count the reclaim and the waiting reasons.
func TestTenantQueuesReclaimOverHTTP(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	for name, body := range map[string]string{
		"team-a": `{"guaranteed":{"nvidia.com/gpu":1},"weight":1}`,
		"team-b": `{"guaranteed":{"nvidia.com/gpu":1},"max":{"nvidia.com/gpu":2},"weight":1}`,
	} {
		if code, m := callAs(t, adminTok, "PUT", api+"/queues/"+name, body); code != 200 {
			t.Fatalf("PUT %s: %d %v", name, code, m)
		}
	}
	// team-b borrows both GPUs, and a third task waits at its max.
	for _, id := range []string{"b1", "b2", "b3"} {
		if code, m := callAs(t, bTok, "POST", api+"/tasks", `{"id":"`+id+`","priority":3,"resources":{"cpu":"1","nvidia.com/gpu":1}}`); code != 201 {
			t.Fatalf("submit %s: %d %v", id, code, m)
		}
	}
	waitState := func(tok, id string, want ...string) map[string]any {
		t.Helper()
		var m map[string]any
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			_, m = callAs(t, tok, "GET", api+"/tasks/"+id, "")
			for _, w := range want {
				if m["state"] == w {
					return m
				}
			}
		}
		t.Fatalf("task %s: %v, want state %v", id, m, want)
		return nil
	}
	for _, id := range []string{"b1", "b2"} {
		if m := waitState(bTok, id, "scheduled"); m["queue"] != "team-b" {
			t.Errorf("%s went to queue %v, want the tenant's own (team-b): %v", id, m["queue"], m)
		}
	}
	var reason string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && !strings.Contains(reason, "queue team-b max reached"); time.Sleep(20 * time.Millisecond) {
		m := waitState(bTok, "b3", "pending")
		reason, _ = m["reason"].(string)
	}
	if !strings.Contains(reason, "queue team-b max reached") {
		t.Errorf("b3 waits for %q", reason)
	}
	// team-a, under its guarantee, reclaims one GPU.
	if code, m := callAs(t, aTok, "POST", api+"/tasks", `{"id":"a1","priority":3,"resources":{"cpu":"1","nvidia.com/gpu":1}}`); code != 201 {
		t.Fatalf("submit a1: %d %v", code, m)
	}
	waitState(aTok, "a1", "scheduled")
	evicted := ""
	for _, id := range []string{"b1", "b2"} {
		_, m := callAs(t, bTok, "GET", api+"/tasks/"+id, "")
		if m["state"] == "pending" {
			evicted = id
			if r, _ := m["reason"].(string); !strings.HasPrefix(r, "preempted by another tenant's task") || m["attempt"] != float64(1) {
				t.Errorf("evicted %s: %v", id, m)
			}
		}
	}
	if evicted == "" {
		t.Fatal("no team-b task was evicted for a1")
	}
	type queueView struct {
		Usage, FairShare map[string]any
		Pending          map[string]float64
	}
	var views map[string]queueView
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, m := callAs(t, adminTok, "GET", api+"/queues", "")
		views = map[string]queueView{}
		for _, x := range m["queues"].([]any) {
			q := x.(map[string]any)
			v := queueView{Usage: q["usage"].(map[string]any), FairShare: q["fairShare"].(map[string]any), Pending: map[string]float64{}}
			for k, n := range q["pending"].(map[string]any) {
				v.Pending[k] = n.(float64)
			}
			views[q["name"].(string)] = v
		}
		if views["team-b"].Pending["resources"]+views["team-b"].Pending["queue_max"] == 2 || time.Now().After(deadline) {
			break
		}
	}
	one := func(v any) bool { return fmt.Sprint(v) == "1" }
	if a, b := views["team-a"], views["team-b"]; !one(a.Usage["nvidia.com/gpu"]) || !one(b.Usage["nvidia.com/gpu"]) ||
		!one(a.FairShare["nvidia.com/gpu"]) || !one(b.FairShare["nvidia.com/gpu"]) {
		t.Errorf("queues: team-a %+v, team-b %+v; want each holding and entitled to 1 GPU", a, b)
	}
	if p := views["team-b"].Pending; p["resources"]+p["queue_max"] != 2 {
		t.Errorf("team-b waiting by reason: %v, want 2 (the evicted and the one at its max)", p)
	}
	wants := []string{
		`hetsched_preemptions_total{reason="reclaim"} 1`,
		`hetsched_preemptions_total{reason="priority"} 0`,
		`hetsched_queue_fair_share{queue="team-a",resource="nvidia.com/gpu"} 1`,
		`hetsched_queue_usage{queue="team-b",resource="nvidia.com/gpu"} 1`,
		`hetsched_pending_tasks_by_reason{queue="team-b",reason=`,
	}
	// The queue gauges are refreshed apart from each other: wait for all
	// of them (waiting for one flaked: the usage came a refresh later).
	var lacking []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		text := string(scrapeAs(t, s.base, adminTok))
		lacking = lacking[:0]
		for _, want := range wants {
			if !strings.Contains(text, want) {
				lacking = append(lacking, want)
			}
		}
		if len(lacking) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range lacking {
		t.Errorf("scrape lacks %s", want)
	}
}

// TestExampleQueuesFile: the example queue tree loads through --queues and
// GET /queues shows it, parents and weights as written.
func TestExampleQueuesFile(t *testing.T) {
	s := startWith(t, Options{DataDir: t.TempDir(), QueuesFile: "../../examples/queues.yaml"})
	defer s.stop(t)
	_, m := call(t, "GET", s.base+"/api/v1/queues", "")
	got := map[string]string{}
	for _, x := range m["queues"].([]any) {
		q := x.(map[string]any)
		got[q["name"].(string)] = fmt.Sprintf("%v/%v", q["parent"], q["weight"])
	}
	want := map[string]string{"research": "<nil>/1", "vision": "research/1", "nlp": "research/2", "prod": "<nil>/3"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("queues %v, want %v", got, want)
	}
}
