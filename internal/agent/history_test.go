package agent

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

// logsOf is GET .../logs?query: the status, the Hetsched-Attempt header
// and the body.
func logsOf(t *testing.T, base, id, query string) (int, string, string) {
	t.Helper()
	resp, err := hc.Get(base + "/api/v1/tasks/" + id + "/logs" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Hetsched-Attempt"), string(b)
}

// TestAttemptHistoryAndEarlierLogs (issue 16 §2): a task moved off a
// drained node keeps its first attempt in its history (node, devices,
// times, reason); while it waits to run again its logs are the last
// attempt's; once it runs again, logs are the new attempt's, and
// attempt=0 and previous=true read the first one from its own node.
func TestAttemptHistoryAndEarlierLogs(t *testing.T) {
	base := servertest.Start(t, "nodes: []\n")
	startAgent(t, base, "n1", devicesFile(t, twoGPUs))
	post(t, base+"/api/v1/tasks", `{"id":"mover","priority":1,"resources":{"cpu":"1","nvidia.com/gpu":1},
		"command":["sh","-c","echo attempt=$HETSCHED_ATTEMPT node=$HETSCHED_NODE; exec sleep 300"]}`)
	waitState(t, base, "mover", 30*time.Second, "running")
	waitFor(t, 30*time.Second, func() bool {
		_, _, body := logsOf(t, base, "mover", "")
		return strings.Contains(body, "attempt=0 node=n1")
	}, "the first attempt's output")

	post(t, base+"/api/v1/nodes/n1/drain", "")
	v := waitState(t, base, "mover", 30*time.Second, "pending")
	type attempt struct {
		Attempt   int        `json:"attempt"`
		Node      string     `json:"node"`
		Devices   []any      `json:"devices"`
		Scheduled *time.Time `json:"scheduled"`
		Started   *time.Time `json:"started"`
		Finished  time.Time  `json:"finished"`
		Reason    string     `json:"reason"`
	}
	var view struct {
		Attempt  int       `json:"attempt"`
		Node     string    `json:"node"`
		Attempts []attempt `json:"attempts"`
	}
	_, b := get(t, base+"/api/v1/tasks/mover")
	if err := json.Unmarshal(b, &view); err != nil {
		t.Fatal(err)
	}
	if v.Attempt != 1 || view.Node != "" || len(view.Attempts) != 1 {
		t.Fatalf("after the drain: %s", b)
	}
	a := view.Attempts[0]
	if a.Attempt != 0 || a.Node != "n1" || len(a.Devices) != 1 || a.Scheduled == nil || a.Started == nil ||
		a.Finished.Before(*a.Started) || !strings.Contains(a.Reason, "n1") {
		t.Fatalf("the first attempt's record: %+v", a)
	}

	// Re-queued: logs are the last attempt's, and say which.
	code, which, body := logsOf(t, base, "mover", "")
	if code != http.StatusOK || which != "0" || !strings.Contains(body, "attempt=0 node=n1") {
		t.Fatalf("logs while re-queued: %d attempt %q %q", code, which, body)
	}

	startAgent(t, base, "n2", devicesFile(t, twoGPUs))
	waitFor(t, 30*time.Second, func() bool {
		_, which, body := logsOf(t, base, "mover", "")
		return which == "1" && strings.Contains(body, "attempt=1 node=n2")
	}, "the second attempt's output on n2")
	// The first attempt's outcome (killed by the drain: SIGTERM) arrives
	// after it ended; it goes into its history entry.
	waitFor(t, 30*time.Second, func() bool {
		var v struct {
			Attempts []struct {
				ExitCode *int `json:"exitCode"`
			} `json:"attempts"`
		}
		_, b := get(t, base+"/api/v1/tasks/mover")
		return json.Unmarshal(b, &v) == nil && len(v.Attempts) == 1 && v.Attempts[0].ExitCode != nil && *v.Attempts[0].ExitCode == 143
	}, "the first attempt's exit code (143) in its history")
	for _, q := range []string{"?previous=true", "?attempt=0"} {
		code, which, body := logsOf(t, base, "mover", q)
		if code != http.StatusOK || which != "0" || body != "attempt=0 node=n1\n" {
			t.Errorf("logs%s: %d attempt %q %q", q, code, which, body)
		}
	}
	for q, want := range map[string]string{
		"?attempt=7":               `"field":"attempt"`,
		"?attempt=-1":              `"field":"attempt"`,
		"?attempt=0&previous=true": `"field":"previous"`,
		"?previous=yes":            `"field":"previous"`,
	} {
		if code, _, body := logsOf(t, base, "mover", q); code/100 != 4 || !strings.Contains(body, want) {
			t.Errorf("logs%s: %d %s, want a 4xx naming %s", q, code, body, want)
		}
	}
}
