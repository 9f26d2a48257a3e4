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
