package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

type sse struct {
	id, event string
	data      map[string]any
}

// readEvents reads events from an SSE stream until n arrived or timeout.
func readEvents(t *testing.T, url string, n int) []sse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var out []sse
	var cur sse
	sc := bufio.NewScanner(resp.Body)
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			json.Unmarshal([]byte(line[6:]), &cur.data)
		case line == "" && cur.id != "":
			out = append(out, cur)
			cur = sse{}
		}
	}
	return out
}

func TestEventsStreamAndResume(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	got := make(chan []sse, 1)
	go func() { got <- readEvents(t, s.base+"/api/v1/events?since=1", 2) }()
	// The node events of the inventory are 1 and 2; since=1 starts after
	// the first. Then a task is submitted and placed in one durable step,
	// so one event shows it scheduled.
	if code, _ := call(t, "POST", s.base+"/api/v1/schedule", `{"id":"e1","priority":0,"resources":{"cpu":"1"}}`); code != 200 {
		t.Fatal("schedule")
	}
	var evs []sse
	select {
	case evs = <-got:
	case <-time.After(15 * time.Second):
		t.Fatal("no events")
	}
	if len(evs) != 2 || evs[0].id != "2" || evs[0].event != "node" {
		t.Fatalf("events: %+v", evs)
	}
	if evs[1].event != "task" || evs[1].data["id"] != "e1" || evs[1].data["state"] != "scheduled" {
		t.Errorf("task event: %+v", evs[1])
	}
	// Resume after the first: only the task event comes back.
	again := readEvents(t, s.base+"/api/v1/events?since="+evs[0].id, 1)
	if len(again) != 1 || again[0].id != evs[1].id {
		t.Errorf("resume: %+v", again)
	}
	if code, m := call(t, "GET", s.base+"/api/v1/events?since=soon", ""); code != 400 || errField(m) != "since" {
		t.Errorf("bad since: %d %v", code, m)
	}
}

// issue 16 §1: since=0 replays from the oldest retained event (event 1
// can be read), the headers and a retry: field come at once on an idle
// server, and numbers go on after a restart (an older since is a 400
// saying to list again).
func TestEventsReplayRetryAndRestart(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	evs := readEvents(t, s.base+"/api/v1/events?since=0", 2)
	if len(evs) != 2 || evs[0].id != "1" || evs[1].id != "2" {
		t.Fatalf("since=0: %+v", evs)
	}
	// On an idle server, without since: headers and retry: at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.base+"/api/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("no headers within 5 s on an idle server: %v", err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	if err != nil || line != "retry: 2000\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	s.stop(t)
	s = start(t, dir)
	defer s.stop(t)
	if code, _ := call(t, "POST", s.base+"/api/v1/tasks", `{"id":"after","resources":{"cpu":"1"}}`); code != 201 {
		t.Fatal("submit")
	}
	// The restarted server upserts its two inventory nodes again (3, 4),
	// then the task: its numbers went on from the first run's.
	evs = readEvents(t, s.base+"/api/v1/events?since=0", 3)
	if len(evs) != 3 || evs[0].id != "3" || evs[2].data["id"] != "after" {
		t.Fatalf("after a restart, since=0: %+v (the numbers must go on)", evs)
	}
	if code, m := call(t, "GET", s.base+"/api/v1/events?since=1", ""); code != 400 || !strings.Contains(errMsg(m), "list") {
		t.Errorf("since older than the restart: %d %v", code, m)
	}
}

// issue 16 §1: a job's state changes are events of kind job (API.md:
// task, job and node changes), and a tenant gets only its own.
func TestJobEvents(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	job := `{"id":"pipe","tasks":[{"id":"a","resources":{"cpu":"1"},"lease":"1h"},{"id":"b","depends":["a"],"resources":{"cpu":"1"},"lease":"1h"}]}`
	if code, m := callAs(t, bTok, "POST", api+"/jobs", job); code != 201 {
		t.Fatalf("b's job: %d %v", code, m)
	}
	if code, m := callAs(t, aTok, "POST", api+"/jobs", job); code != 201 {
		t.Fatalf("a's job: %d %v", code, m)
	}
	if code, _ := callAs(t, aTok, "DELETE", api+"/jobs/pipe", ""); code != 200 {
		t.Fatal("cancel")
	}
	req, _ := http.NewRequest("GET", api+"/events?since=0", nil)
	req.Header.Set("Authorization", "Bearer "+aTok)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var jobStates []string
	sc := bufio.NewScanner(resp.Body)
	event := ""
	for sc.Scan() && (len(jobStates) == 0 || jobStates[len(jobStates)-1] != "cancelled") {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			event = v
		}
		if v, ok := strings.CutPrefix(line, "data: "); ok && event == "job" {
			var d map[string]any
			json.Unmarshal([]byte(v), &d)
			if d["id"] != "pipe" {
				t.Fatalf("a job event a tenant should not see, or a qualified id: %v", d)
			}
			jobStates = append(jobStates, d["state"].(string))
		}
	}
	// pending at the submit, maybe running once its first task is placed
	// (a later step), then cancelled: one event per change.
	switch strings.Join(jobStates, ",") {
	case "pending,cancelled", "running,cancelled", "pending,running,cancelled":
	default:
		t.Errorf("team-a's job events: %v", jobStates)
	}
}
