package hatest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestStaleReadsOnAStandby: with ?stale=true a standby answers GET of a
// task or a job from its own copy of the store (X-Hetsched-Stale names
// the copy's revision) with what the leader has; without it the request
// is passed on to the leader; an id the copy lacks is 404.
func TestStaleReadsOnAStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts three servers")
	}
	c := startCluster(t, 3)
	l := c.leader(time.Minute)
	cl := c.clientOf(l)
	if _, err := cl.Do(ctxTimeout(t, 10*time.Second), http.MethodPost, "/api/v1/tasks", []byte(`{"id":"solo","resources":{"cpu":"1"}}`), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Do(ctxTimeout(t, 10*time.Second), http.MethodPost, "/api/v1/jobs",
		[]byte(`{"id":"j","tasks":[{"id":"a","resources":{"cpu":"1"}},{"id":"b","resources":{"cpu":"1"},"depends":["a"]}]}`), nil); err != nil {
		t.Fatal(err)
	}
	s := (l + 1) % 3
	c.waitStandbyOf(t, s, l)
	get := func(path string) (int, string, string) {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(c.urls[s] + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Hetsched-Stale"), string(b)
	}
	waitUntil(t, 10*time.Second, "the standby's copy to hold the job", func() bool {
		code, _, _ := get("/api/v1/jobs/j?stale=true")
		return code == http.StatusOK
	})
	code, stale, body := get("/api/v1/tasks/solo?stale=true")
	if code != http.StatusOK || !strings.HasPrefix(stale, "revision=") || !strings.Contains(body, `"id":"solo"`) {
		t.Errorf("stale task: %d %q %s", code, stale, body)
	}
	code, stale, body = get("/api/v1/jobs/j?stale=true")
	var job struct {
		ID     string         `json:"id"`
		Counts map[string]int `json:"counts"`
		Tasks  []struct {
			ID string `json:"id"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal([]byte(body), &job); err != nil || code != http.StatusOK || stale == "" || job.ID != "j" || len(job.Tasks) != 2 {
		t.Errorf("stale job: %d %q %s (%v)", code, stale, body, err)
	}
	// The leader's answer, through the standby, says no staleness.
	code, stale, body = get("/api/v1/jobs/j")
	if code != http.StatusOK || stale != "" || !strings.Contains(body, `"id":"j"`) {
		t.Errorf("passed-on job: %d %q %s", code, stale, body)
	}
	if code, _, body := get("/api/v1/tasks/nope?stale=true"); code != http.StatusNotFound || !strings.Contains(body, "standby's copy") {
		t.Errorf("stale read of an unknown task: %d %s", code, body)
	}
	// A request asking to upgrade to h2c is passed on without the
	// upgrade (it got 503 "retry" for ever).
	req, err := http.NewRequest(http.MethodGet, c.urls[s]+"/api/v1/jobs/j", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Connection", "Upgrade, HTTP2-Settings")
	req.Header.Set("Upgrade", "h2c")
	req.Header.Set("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"id":"j"`) {
		t.Errorf("Upgrade: h2c through the standby: %d %s", resp.StatusCode, b)
	}
}
