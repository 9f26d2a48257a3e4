package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/metrics/metricstest"
)

func scrape(t *testing.T, base string) []byte {
	t.Helper()
	return scrapeAs(t, base, "")
}

// scrapeAs reads /metrics with a bearer token (none when "").
func scrapeAs(t *testing.T, base, token string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	return b
}

// TestMetricsLiveScrape drives some work and checks the live scrape: the
// metrics the issue lists are there with sensible labels and values, the
// in-process linter finds nothing, and Debian's promtool agrees.
func TestMetricsLiveScrape(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	if code, m := call(t, "PUT", s.base+"/api/v1/queues/qa", `{"name":"qa","max":{"nvidia.com/gpu":1},"guaranteed":{"cpu":"2"}}`); code != 200 {
		t.Fatalf("queue: %d %v", code, m)
	}
	if code, _ := call(t, "POST", s.base+"/api/v1/schedule", `{"id":"m1","queue":"qa","priority":0,"resources":{"cpu":"1","nvidia.com/gpu":1}}`); code != 200 {
		t.Fatalf("schedule: %d", code)
	}
	call(t, "GET", s.base+"/api/v1/tasks/nosuch", "")
	call(t, "POST", s.base+"/api/v1/tasks", `{"id":"m2","priority":3,"resources":{"cpu":"1000"}}`)
	call(t, "POST", s.base+"/api/v1/tasks", `{"id":"m3","priority":3,"resources":{"cpu":"1000"}}`)
	// The engine refreshes the gauges right after it answers, at most
	// once a second; one it skipped comes when that second is over. Wait
	// for the refresh that counts m3 (the deadline only bounds a failure).
	var body []byte
	for deadline := time.Now().Add(30 * time.Second); ; {
		body = scrape(t, s.base)
		if strings.Contains(string(body), `hetsched_pending_tasks_by_queue{queue="default",tier="low"} 2`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	text := string(body)
	for _, want := range []string{
		`hetsched_placements_total{tier="urgent"} 1`,
		`hetsched_scheduling_delay_seconds_bucket{tier="urgent",le=`,
		`hetsched_scheduling_delay_seconds_bucket{tier="urgent",le="600"}`,
		`hetsched_scheduling_attempt_duration_seconds_count{result="scheduled",tier="urgent"} 1`,
		`hetsched_scheduling_attempt_duration_seconds_bucket{result="unschedulable",tier="high",le="1e-05"} 0`,
		`hetsched_submissions_shed_total{tier="low"} 0`,
		`hetsched_build_info{`,
		`hetsched_node_resource_allocated{node="gpu-a",resource="nvidia.com/gpu"} 1`,
		`hetsched_node_resource_capacity{node="cpu-a",resource="cpu"} 8`,
		`hetsched_node_device_healthy{device="1",model="L4",node="gpu-a",type="nvidia.com/gpu"} 1`,
		`hetsched_node_device_memory_bytes{device="0",node="gpu-a",type="nvidia.com/gpu"} 2.5769803776e+10`,
		`hetsched_node_series_capped 0`,
		`hetsched_pending_tasks{tier="low"}`,
		`hetsched_pending_tasks_by_queue{queue="default",tier="low"} 2`,
		`hetsched_node_capacity{resource="nvidia.com/gpu"} 2`,
		`hetsched_node_allocated{resource="nvidia.com/gpu"} 1`,
		`hetsched_nodes{state="ready"} 2`,
		`hetsched_api_request_duration_seconds_count{code="200",route="POST /api/v1/schedule"} 1`,
		`hetsched_api_request_duration_seconds_count{code="404",route="GET /api/v1/tasks/{id}"} 1`,
		`hetsched_store_commit_duration_seconds_count`,
		`hetsched_store_commit_records_bucket`,
		`hetsched_preemptions_total{reason="priority"} 0`,
		`hetsched_scheduler_events_total{event="gang_reserved"} 0`,
		`hetsched_device_capacity{model="L4",resource="nvidia.com/gpu"} 2`,
		`hetsched_device_allocated{model="L4",resource="nvidia.com/gpu"} 1`,
		`hetsched_queue_usage{queue="qa",resource="nvidia.com/gpu"} 1`,
		`hetsched_queue_max{queue="qa",resource="nvidia.com/gpu"} 1`,
		`hetsched_queue_guaranteed{queue="qa",resource="cpu"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	metricstest.Lint(t, text)
}

// TestNodeMetricsLimit: --node-metrics-limit below the fleet's size
// exports no per-node series and says so; -1 turns them off altogether.
func TestNodeMetricsLimit(t *testing.T) {
	for _, tc := range []struct {
		limit      int
		capped     string // the line expected, "" for none
		perNodeOut bool
	}{
		{limit: 1, capped: "hetsched_node_series_capped 1"},
		{limit: -1},
		{limit: 2, capped: "hetsched_node_series_capped 0", perNodeOut: true},
	} {
		s := startWith(t, Options{DataDir: t.TempDir(), NodeMetricsLimit: tc.limit})
		text := string(scrape(t, s.base))
		s.stop(t)
		if tc.capped != "" && !strings.Contains(text, tc.capped) || tc.capped == "" && strings.Contains(text, "hetsched_node_series_capped") {
			t.Errorf("limit %d: want %q in the scrape", tc.limit, tc.capped)
		}
		if got := strings.Contains(text, "hetsched_node_resource_capacity{"); got != tc.perNodeOut {
			t.Errorf("limit %d: per-node series exported %v, want %v", tc.limit, got, tc.perNodeOut)
		}
	}
}
