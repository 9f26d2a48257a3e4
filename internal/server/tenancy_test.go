package server

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/childproc"
)

// issue 15 §4: a dependency on another tenant's task looks exactly like
// one on a made-up id; job ids are per tenant too.
func TestTenantsLearnNothingFromIDs(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	if code, m := callAs(t, aTok, "POST", api+"/tasks", `{"id":"a-secret","resources":{"cpu":"1"}}`); code != 201 {
		t.Fatalf("a-secret: %d %v", code, m)
	}
	codeOther, other := callAs(t, bTok, "POST", api+"/tasks", `{"id":"b1","depends":["a-secret"],"resources":{"cpu":"1"}}`)
	codeMade, made := callAs(t, bTok, "POST", api+"/tasks", `{"id":"b1","depends":["made-up"],"resources":{"cpu":"1"}}`)
	if codeOther != 400 || codeMade != 400 {
		t.Fatalf("depends on another tenant's task: %d %v; on a made-up id: %d %v", codeOther, other, codeMade, made)
	}
	same := strings.ReplaceAll(errMsg(other), "a-secret", "made-up")
	if same != errMsg(made) || errMsg(other) == "" || strings.Contains(errMsg(other), "team-") {
		t.Errorf("the answers differ:\n another tenant's: %q\n made-up:          %q", errMsg(other), errMsg(made))
	}
	if code, _ := callAs(t, bTok, "GET", api+"/tasks/b1", ""); code != 404 {
		t.Errorf("b1 was stored: %d", code)
	}

	// Jobs: the same id for both tenants, each its own; a job's task ids
	// and dependencies come back local.
	job := `{"id":"train","tasks":[{"id":"prep","resources":{"cpu":"1"}},{"id":"fit","depends":["prep"],"resources":{"cpu":"1"}}]}`
	for _, tok := range []string{aTok, bTok} {
		code, m := callAs(t, tok, "POST", api+"/jobs", job)
		if code != 201 || m["id"] != "train" {
			t.Fatalf("job train: %d %v", code, m)
		}
		tasks := m["tasks"].([]any)
		fit := tasks[1].(map[string]any)
		if fit["id"] != "train.fit" || fit["depends"].([]any)[0] != "train.prep" || fit["metadata"].(map[string]any)["job"] != "train" {
			t.Errorf("job task as its tenant sees it: %v", fit)
		}
	}
	if code, m := callAs(t, aTok, "DELETE", api+"/jobs/train", ""); code != 200 || m["counts"].(map[string]any)["cancelled"] != float64(1) {
		t.Fatalf("a cancels its job: %d %v", code, m)
	}
	if _, m := callAs(t, bTok, "GET", api+"/jobs/train", ""); m["counts"].(map[string]any)["cancelled"] != nil {
		t.Errorf("a's cancel reached b's job of the same id: %v", m)
	}
	if code, m := callAs(t, adminTok, "GET", api+"/jobs/team-b:train", ""); code != 200 || m["id"] != "team-b:train" {
		t.Errorf("admin reading team-b:train: %d %v", code, m)
	}
}

// issue 15 §4: a tenant may not change its top queue (weight, guarantee,
// max are the admin's), and changes below it stay within its limits.
func TestTenantQueueLimits(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	if code, m := callAs(t, adminTok, "PUT", api+"/queues/team-a", `{"guaranteed":{"cpu":"8"},"max":{"cpu":"16"},"weight":1}`); code != 200 {
		t.Fatalf("admin PUT team-a: %d %v", code, m)
	}
	if code, m := callAs(t, aTok, "PUT", api+"/queues/team-a", `{"guaranteed":{"cpu":"16"},"max":{"cpu":"16"},"weight":100}`); code != 403 || !strings.Contains(errMsg(m), "top queue") {
		t.Errorf("tenant raising its top queue: %d %v", code, m)
	}
	for _, c := range []struct{ body, field string }{
		{`{"parent":"team-a","guaranteed":{"cpu":"9"}}`, "guaranteed.cpu"},
		{`{"parent":"team-a","max":{"cpu":"17"}}`, "max.cpu"},
		{`{"parent":"team-a","guaranteed":{"nvidia.com/gpu":1}}`, "guaranteed.nvidia.com/gpu"},
	} {
		code, m := callAs(t, aTok, "PUT", api+"/queues/a-dev", c.body)
		if (code != 403 && code != 400) || m["error"].(map[string]any)["field"] != c.field {
			t.Errorf("sub-queue %s: %d %v, want 403 or 400 on %s", c.body, code, m, c.field)
		}
	}
	if code, m := callAs(t, aTok, "PUT", api+"/queues/a-dev", `{"parent":"team-a","guaranteed":{"cpu":"4"},"max":{"cpu":"8"},"weight":3}`); code != 200 {
		t.Errorf("sub-queue within limits: %d %v", code, m)
	}
	// Moving a sub-queue to the root would make it a top queue.
	if code, _ := callAs(t, aTok, "PUT", api+"/queues/a-dev", `{"guaranteed":{"cpu":"4"}}`); code != 403 {
		t.Errorf("tenant moving a sub-queue to the root: %d", code)
	}
}

// issue 15 §4: with tokens, /metrics (every queue's name and counts) needs
// an admin or metrics token; a metrics token reads nothing else;
// --metrics-listen serves it without a token on its own address.
func TestMetricsNeedAToken(t *testing.T) {
	dir := t.TempDir()
	tokens := dir + "/tokens.yaml"
	writeFile(t, tokens, "tokens:\n  - {token: "+adminTok+", role: admin}\n  - {token: "+aTok+", role: tenant, tenant: team-a}\n  - {token: metrics-token-0123456789, role: metrics}\n")
	var out childproc.SyncBuffer
	s := startWithOut(t, Options{DataDir: dir + "/data", TokensFile: tokens, MetricsListen: "127.0.0.1:0"}, &out)
	defer s.stop(t)
	get := func(tok, url string) int {
		req, _ := http.NewRequest("GET", url, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		tok, path string
		want      int
	}{
		{"", "/metrics", 401}, {aTok, "/metrics", 403}, {"metrics-token-0123456789", "/metrics", 200},
		{adminTok, "/metrics", 200}, {"metrics-token-0123456789", "/api/v1/tasks", 403}, {"metrics-token-0123456789", "/api/v1/queues", 403},
	} {
		if got := get(c.tok, s.base+c.path); got != c.want {
			t.Errorf("GET %s with %q: %d, want %d", c.path, c.tok, got, c.want)
		}
	}
	var addr string
	for _, line := range strings.Split(out.String(), "\n") {
		if a, ok := strings.CutPrefix(line, "metrics: http://"); ok {
			addr, _, _ = strings.Cut(a, "/")
		}
	}
	if addr == "" {
		t.Fatalf("no metrics line in:\n%s", out.String())
	}
	if got := get("", "http://"+addr+"/metrics"); got != 200 {
		t.Errorf("--metrics-listen without a token: %d", got)
	}
	if got := get("", "http://"+addr+"/api/v1/tasks"); got != 404 {
		t.Errorf("--metrics-listen serves the API: %d", got)
	}
}
