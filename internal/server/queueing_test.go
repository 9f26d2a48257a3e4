package server

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestTaskViewQueueing: a pending task's view says where it stands (its
// position, the work ahead, an estimated start from the running tasks'
// declared durations); a placed task's view has none.
func TestTaskViewQueueing(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	for _, body := range []string{
		`{"id":"g1","priority":0,"duration":"10m","resources":{"cpu":"1","nvidia.com/gpu":1}}`,
		`{"id":"g2","priority":0,"duration":"20m","resources":{"cpu":"1","nvidia.com/gpu":1}}`,
		`{"id":"g3","priority":0,"duration":"1m","resources":{"cpu":"1","nvidia.com/gpu":1}}`,
		`{"id":"g4","priority":0,"duration":"1m","resources":{"cpu":"1","nvidia.com/gpu":1}}`,
	} {
		if code, m := call(t, "POST", s.base+"/api/v1/tasks", body); code != 201 && code != 200 && code != 202 {
			t.Fatalf("submit %s: %d %v", body, code, m)
		}
	}
	placed := map[string]time.Time{}
	for _, id := range []string{"g1", "g2"} {
		_, v := call(t, "GET", s.base+"/api/v1/tasks/"+id, "")
		if v["state"] != "scheduled" || v["queueing"] != nil {
			t.Fatalf("%s: %v", id, v)
		}
		at, err := time.Parse(time.RFC3339Nano, v["scheduled"].(string))
		if err != nil {
			t.Fatal(err)
		}
		placed[id] = at
	}
	for id, want := range map[string]struct {
		position float64
		start    time.Time // the end of g1's or g2's declared duration
	}{"g3": {1, placed["g1"].Add(10 * time.Minute)}, "g4": {2, placed["g2"].Add(20 * time.Minute)}} {
		_, v := call(t, "GET", s.base+"/api/v1/tasks/"+id, "")
		q, ok := v["queueing"].(map[string]any)
		if v["state"] != "pending" || !ok {
			t.Fatalf("%s: %v", id, v)
		}
		if q["position"] != want.position || q["ahead"] != 0.0 {
			t.Errorf("%s: queueing %v, want position %v, none ahead", id, q, want.position)
		}
		at, err := time.Parse(time.RFC3339Nano, q["estimatedStart"].(string))
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if !at.Equal(want.start) {
			t.Errorf("%s: estimated start %v, want %v", id, at, want.start)
		}
	}
	// The aggregate: the default queue's next start is g3's, g1's end.
	m := regexp.MustCompile(`(?m)^hetsched_queue_next_start_seconds\{queue="default"\} (\S+)$`).FindStringSubmatch(string(scrape(t, s.base)))
	if m == nil {
		t.Fatal("no hetsched_queue_next_start_seconds for the default queue")
	}
	wait, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(placed["g1"].Add(10 * time.Minute)).Seconds(); wait > 600 || wait < left-1 {
		t.Errorf("next start in %vs, want about %vs (g1's end)", wait, left)
	}
}
