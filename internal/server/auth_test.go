package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

const (
	adminTok = "admin-token-0123456789"
	aTok     = "team-a-token-0123456789"
	annTok   = "team-a-ann-token-0123456789"
	bTok     = "team-b-token-0123456789"
	agentTok = "agent-token-0123456789"
	// boundTok is an agent token bound to nodes agn-*.
	boundTok = "bound-agent-token-0123456789"
)

func startAuth(t *testing.T, set ...func(*Options)) *running {
	t.Helper()
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(tokens, []byte(`tokens:
  - {token: `+adminTok+`, role: admin}
  - {token: `+aTok+`, role: tenant, tenant: team-a}
  - {token: `+annTok+`, role: tenant, tenant: team-a, user: ann}
  - {token: `+bTok+`, role: tenant, tenant: team-b}
  - {token: `+agentTok+`, role: agent}
  - {token: `+boundTok+`, role: agent, nodes: ["agn-*"]}
`), 0o600)
	opt := Options{DataDir: filepath.Join(dir, "data"), TokensFile: tokens}
	for _, f := range set {
		f(&opt)
	}
	return startWith(t, opt)
}

func callAs(t *testing.T, token, method, url, body string) (int, map[string]any) {
	t.Helper()
	resp, m := do(t, client, token, method, url, body)
	return resp.StatusCode, m
}

// TestTenantIsolation: each tenant sees and changes only its own tasks,
// both ways; admins see everything; unauthenticated and wrong-role calls
// are refused.
func TestTenantIsolation(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	if code, _ := callAs(t, aTok, "POST", api+"/tasks", `{"id":"a1","resources":{"cpu":"1000"}}`); code != 201 {
		t.Fatalf("a submit: %d", code)
	}
	if code, _ := callAs(t, bTok, "POST", api+"/tasks", `{"id":"b1","resources":{"cpu":"1000"}}`); code != 201 {
		t.Fatalf("b submit: %d", code)
	}
	for _, c := range []struct{ tok, own, other string }{{aTok, "a1", "b1"}, {bTok, "b1", "a1"}} {
		if code, _ := callAs(t, c.tok, "GET", api+"/tasks/"+c.own, ""); code != 200 {
			t.Errorf("own task %s: %d", c.own, code)
		}
		for _, m := range []struct{ method, path string }{
			{"GET", "/tasks/" + c.other}, {"DELETE", "/tasks/" + c.other},
			{"POST", "/tasks/" + c.other + "/renew"}, {"POST", "/tasks/" + c.other + "/complete"},
		} {
			code, body := callAs(t, c.tok, m.method, api+m.path, "")
			if code != 404 || errCode(body) != string(errs.NotFound) {
				t.Errorf("%s %s by the other tenant: %d %v", m.method, m.path, code, body)
			}
		}
		code, body := callAs(t, c.tok, "GET", api+"/tasks", "")
		list, _ := body["tasks"].([]any)
		if code != 200 || len(list) != 1 || list[0].(map[string]any)["id"] != c.own {
			t.Errorf("list by %s: %d %v", c.own, code, body)
		}
	}
	// Ids are per tenant: each may use the other's id for a task of its
	// own, exactly as an unused id (issue 15 §4), and the other's task is
	// untouched.
	for _, c := range []struct{ tok, other, cpu string }{{aTok, "b1", "2"}, {bTok, "a1", "3"}} {
		code, m := callAs(t, c.tok, "POST", api+"/tasks", `{"id":"`+c.other+`","resources":{"cpu":"`+c.cpu+`"}}`)
		if code != 201 || m["id"] != c.other {
			t.Errorf("reuse of %s: %d %v", c.other, code, m)
		}
	}
	if _, m := callAs(t, aTok, "GET", api+"/tasks/a1", ""); fmt.Sprint(m["resources"].(map[string]any)["cpu"]) != "1000" {
		t.Errorf("a1 changed by b's task of that id: %v", m)
	}
	_, body := callAs(t, adminTok, "GET", api+"/tasks", "")
	var adminIDs []string
	for _, x := range body["tasks"].([]any) {
		adminIDs = append(adminIDs, x.(map[string]any)["id"].(string))
	}
	if strings.Join(adminIDs, ",") != "team-a:a1,team-b:b1,team-a:b1,team-b:a1" {
		t.Errorf("admin list (qualified ids): %v", adminIDs)
	}
	if code, m := callAs(t, adminTok, "GET", api+"/tasks/team-b:a1", ""); code != 200 || m["id"] != "team-b:a1" {
		t.Errorf("admin reading team-b:a1: %d %v", code, m)
	}
	if code, _ := callAs(t, bTok, "GET", api+"/tasks/b1", ""); code != 200 {
		t.Error("b1 gone after a's attempts")
	}
	for _, c := range []struct {
		tok, method, path string
		status            int
	}{
		{"", "GET", "/tasks", 401},
		{"not-a-real-token-at-all", "GET", "/tasks", 401},
		{aTok, "POST", "/nodes/cpu-a/cordon", 403},
		{agentTok, "POST", "/tasks", 403},
		{agentTok, "GET", "/nodes", 200},
		{aTok, "POST", "/agents/register", 403},
		{aTok, "POST", "/agents/n1/heartbeat", 403},
		{aTok, "GET", "/agents/n1/assignments", 403},
		{aTok, "POST", "/agents/n1/status", 403},
		{"", "POST", "/agents/register", 401},
		{agentTok, "POST", "/agents/n1/heartbeat", 400}, // allowed; the empty body is the problem
		{adminTok, "POST", "/nodes/cpu-a/cordon", 200},
	} {
		if code, body := callAs(t, c.tok, c.method, api+c.path, ""); code != c.status {
			t.Errorf("%s %s with %q: %d %v, want %d", c.method, c.path, c.tok, code, body, c.status)
		}
	}
}

func TestLoadTokensRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ body, field string }{
		{"tokens: []", "tokens"},
		{"tokens:\n  - {token: short, role: admin}", "tokens[0].token"},
		{"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: king}", "tokens[0].role"},
		{"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: tenant}", "tokens[0].tenant"},
		{"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: admin, tenant: x}", "tokens[0].tenant"},
		{"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: admin}\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: agent}", "tokens[1].token"},
		{"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: admin, colour: red}", "tokens"},
	} {
		p := filepath.Join(dir, "t.yaml")
		os.WriteFile(p, []byte(c.body), 0o600)
		if _, err := LoadTokens(p); errs.FieldOf(err) != c.field {
			t.Errorf("%q: %v, want field %s", c.body, err, c.field)
		}
	}
}

func TestQueuesAndOwnership(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	for _, c := range []struct {
		tok, name, body string
		status          int
		field           string
	}{
		{adminTok, "team-a", `{"guaranteed":{"cpu":"8"},"max":{"cpu":"16"},"weight":1}`, 200, ""},
		{adminTok, "team-b", `{"parent":"root","weight":3}`, 200, ""},
		{aTok, "a-prod", `{"parent":"team-a","guaranteed":{"cpu":"6"}}`, 200, ""},
		{aTok, "a-dev", `{"parent":"team-a","guaranteed":{"cpu":"4"}}`, 400, "guaranteed.cpu"},
		{aTok, "a-x", `{"parent":"team-b"}`, 403, "name"},
		{bTok, "a-prod", `{"parent":"team-b"}`, 403, "name"},
		{aTok, "a-y", `{"parent":"nosuch"}`, 400, "parent"},
		{adminTok, "m", `{"max":{"cpu":"1"},"guaranteed":{"cpu":"2"}}`, 400, "max.cpu"},
		{adminTok, "n", `{"name":"other"}`, 400, "name"},
		{adminTok, "o", `{"weight":"heavy"}`, 400, "weight"},
	} {
		code, m := callAs(t, c.tok, "PUT", api+"/queues/"+c.name, c.body)
		if code != c.status || errField(m) != c.field {
			t.Errorf("PUT %s %s: %d %v, want %d field %q", c.name, c.body, code, m, c.status, c.field)
		}
	}
	_, m := callAs(t, aTok, "GET", api+"/queues", "")
	if qs := m["queues"].([]any); len(qs) != 2 {
		t.Errorf("team-a sees %v", qs)
	}
	_, m = callAs(t, adminTok, "GET", api+"/queues", "")
	if qs := m["queues"].([]any); len(qs) != 3 {
		t.Errorf("admin sees %v", qs)
	}
	// Tasks name existing queues of their own tenant.
	if code, m := callAs(t, aTok, "POST", api+"/tasks", `{"queue":"a-prod","resources":{"cpu":"1"}}`); code != 201 {
		t.Errorf("own queue: %d %v", code, m)
	}
	if code, m := callAs(t, aTok, "POST", api+"/tasks", `{"queue":"nosuch","resources":{"cpu":"1"}}`); code != 400 || errField(m) != "queue" {
		t.Errorf("unknown queue: %d %v", code, m)
	}
	if code, m := callAs(t, bTok, "POST", api+"/tasks", `{"queue":"a-prod","resources":{"cpu":"1"}}`); code != 403 || errField(m) != "queue" {
		t.Errorf("other tenant's queue: %d %v", code, m)
	}
}

func TestJobIsolation(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	if code, m := callAs(t, aTok, "POST", api+"/jobs", `{"id":"ja","tasks":[{"id":"x","resources":{"cpu":"1000"}}]}`); code != 201 {
		t.Fatalf("a job: %d %v", code, m)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if code, _ := callAs(t, bTok, m, api+"/jobs/ja", ""); code != 404 {
			t.Errorf("%s of a's job by b: %d", m, code)
		}
	}
	if code, _ := callAs(t, aTok, "GET", api+"/jobs/ja", ""); code != 200 {
		t.Errorf("a's own job: %d", code)
	}
	if code, _ := callAs(t, bTok, "GET", api+"/tasks/ja.x", ""); code != 404 {
		t.Errorf("a's job task by b: %d", code)
	}
}

// TestTenantRateLimit: a tenant past its token bucket gets 429 with
// Retry-After and the rate_limited code; other tenants, admins and agents
// are not held back by it; the bucket refills as its clock moves. The
// server is built in the test around its Auth, so that the buckets run
// on a clock of the test's: no call depends on how fast the machine is.
func TestTenantRateLimit(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	os.WriteFile(tokens, []byte(`tokens:
  - {token: `+adminTok+`, role: admin}
  - {token: `+aTok+`, role: tenant, tenant: team-a, rate: 2, burst: 3}
  - {token: `+bTok+`, role: tenant, tenant: team-b}
  - {token: `+agentTok+`, role: agent}
`), 0o600)
	auth, err := LoadTokens(tokens)
	if err != nil {
		t.Fatal(err)
	}
	if err := auth.SetDefaultLimit(1000, 1000); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	auth.limits.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	eng := openEngine(t)
	srv := New(eng, "", quiet, nil, nil, auth)
	defer srv.Close()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	api := hs.URL + "/api/v1/tasks"

	// aCalls makes n calls as team-a and returns how many were limited
	// and the last Retry-After.
	aCalls := func(n int) (limited int, retryAfter string) {
		t.Helper()
		for i := 0; i < n; i++ {
			req, _ := http.NewRequest("GET", api, nil)
			req.Header.Set("Authorization", "Bearer "+aTok)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			json.NewDecoder(resp.Body).Decode(&m)
			resp.Body.Close()
			switch resp.StatusCode {
			case 200:
			case 429:
				limited++
				retryAfter = resp.Header.Get("Retry-After")
				if errCode(m) != string(errs.RateLimited) {
					t.Errorf("429 with code %q", errCode(m))
				}
			default:
				t.Fatalf("team-a: %d %v", resp.StatusCode, m)
			}
		}
		return limited, retryAfter
	}
	// A burst of 3 at 2/s, with no time passing: 3 of 6 calls refused,
	// the next token due in 500ms (Retry-After rounds up to 1s).
	if limited, retryAfter := aCalls(6); limited != 3 || retryAfter != "1" {
		t.Fatalf("team-a: %d of 6 calls limited, Retry-After %q; want 3 and 1", limited, retryAfter)
	}
	for _, tok := range []string{bTok, adminTok} {
		for i := 0; i < 6; i++ {
			if code, m := callAs(t, tok, "GET", api, ""); code != 200 {
				t.Fatalf("%s limited by team-a's bucket: %d %v", tok, code, m)
			}
		}
	}
	if code, m := callAs(t, agentTok, "GET", hs.URL+"/api/v1/nodes", ""); code == 429 {
		t.Fatalf("the agent limited by team-a's bucket: %d %v", code, m)
	}
	if limited, _ := aCalls(1); limited != 1 {
		t.Fatal("team-a's bucket refilled with no time passing")
	}
	advance(time.Second) // two tokens back
	if limited, _ := aCalls(3); limited != 1 {
		t.Fatalf("team-a a second later: %d of 3 calls limited, want the third", limited)
	}
}

// TestTenantRateLimitOptions: Run applies the tokens file's per-tenant
// rates and --tenant-rate/--tenant-burst to the others. The rates are so
// low that no refill can come during the test, however slow.
func TestTenantRateLimitOptions(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(tokens, []byte(`tokens:
  - {token: `+adminTok+`, role: admin}
  - {token: `+aTok+`, role: tenant, tenant: team-a, rate: 0.001, burst: 2}
  - {token: `+bTok+`, role: tenant, tenant: team-b}
`), 0o600)
	s := startWith(t, Options{DataDir: filepath.Join(dir, "data"), TokensFile: tokens, TenantRate: 0.001, TenantBurst: 1})
	defer s.stop(t)
	api := s.base + "/api/v1/tasks"
	for _, c := range []struct {
		tok  string
		want []int
	}{
		{aTok, []int{200, 200, 429}},
		{bTok, []int{200, 429}},
		{adminTok, []int{200, 200, 200, 200}},
	} {
		for i, want := range c.want {
			if code, m := callAs(t, c.tok, "GET", api, ""); code != want {
				t.Fatalf("%s call %d: %d %v, want %d", c.tok, i+1, code, m, want)
			}
		}
	}
}

func TestTokensRateValidation(t *testing.T) {
	for _, c := range []struct{ file, field string }{
		{"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: admin, rate: 5}", "tokens[0].rate"},
		{"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: tenant, tenant: a, rate: -1}", "tokens[0].rate"},
		{"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: tenant, tenant: a, burst: 5}", "tokens[0].rate"},
		{"tokens:\n  - {token: aaaaaaaaaaaaaaaaaaaa, role: tenant, tenant: a, rate: 1}\n  - {token: bbbbbbbbbbbbbbbbbbbb, role: tenant, tenant: a, rate: 2}", "tokens[1].rate"},
	} {
		p := filepath.Join(t.TempDir(), "tokens.yaml")
		os.WriteFile(p, []byte(c.file), 0o600)
		if _, err := LoadTokens(p); errs.FieldOf(err) != c.field {
			t.Errorf("%s: %v, want field %s", c.file, err, c.field)
		}
	}
}

// issue 45 §2: every task records its user: the token's (its user, else
// its tenant, else its role), never another one a tenant names (an
// admin may act for a user); a job's tasks are the job's user's; tasks
// list by user.
func TestUserFromToken(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	for _, c := range []struct {
		tok, body, want string
		code            int
	}{
		{aTok, `{"id":"u1","resources":{"cpu":"1"}}`, "team-a", 201},
		{annTok, `{"id":"u2","resources":{"cpu":"1"}}`, "ann", 201},
		{annTok, `{"id":"u3","user":"ann","resources":{"cpu":"1"}}`, "ann", 201},
		{annTok, `{"id":"u4","user":"bob","resources":{"cpu":"1"}}`, "", 403},
		{aTok, `{"id":"u5","user":"ann","resources":{"cpu":"1"}}`, "", 403},
		{adminTok, `{"id":"u6","user":"carol","resources":{"cpu":"1"}}`, "carol", 201},
		{adminTok, `{"id":"u7","resources":{"cpu":"1"}}`, "admin", 201},
		{annTok, `{"id":"u8","user":"a b","resources":{"cpu":"1"}}`, "", 400},
	} {
		code, m := callAs(t, c.tok, "POST", api+"/tasks", c.body)
		if code != c.code || (c.want != "" && m["user"] != c.want) {
			t.Errorf("%s: %d %v, want %d with user %q", c.body, code, m, c.code, c.want)
		}
		if code >= 400 && errField(m) != "user" {
			t.Errorf("%s: the refusal names %q, not user", c.body, errField(m))
		}
	}
	code, m := callAs(t, annTok, "POST", api+"/jobs", `{"id":"j","tasks":[{"id":"a","resources":{"cpu":"1"}}]}`)
	if code != 201 || m["tasks"].([]any)[0].(map[string]any)["user"] != "ann" {
		t.Errorf("ann's job: %d %v", code, m)
	}
	if code, m := callAs(t, annTok, "POST", api+"/jobs", `{"id":"j2","tasks":[{"id":"a","user":"bob","resources":{"cpu":"1"}}]}`); code != 400 || errField(m) != "tasks[0].user" {
		t.Errorf("a job task naming another user: %d %v", code, m)
	}
	_, m = callAs(t, aTok, "GET", api+"/tasks?user=ann", "")
	var ids []string
	for _, x := range m["tasks"].([]any) {
		ids = append(ids, x.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, ",") != "u2,u3,j.a" {
		t.Errorf("team-a's tasks of user ann: %v", ids)
	}
}

// issue 45 §2: accounting and usage are per tenant: a tenant reads its
// own records (its ids local), never another's, and may not ask for
// another tenant; an admin reads every tenant's.
func TestAccountingPerTenant(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	for _, c := range []struct{ tok, id string }{{aTok, "a1"}, {bTok, "b1"}} {
		if code, m := callAs(t, c.tok, "POST", api+"/tasks", `{"id":"`+c.id+`","resources":{"cpu":"100000"}}`); code != 201 {
			t.Fatalf("%s: %d %v", c.id, code, m)
		}
		if code, m := callAs(t, c.tok, "DELETE", api+"/tasks/"+c.id, ""); code != 200 {
			t.Fatalf("cancel %s: %d %v", c.id, code, m)
		}
	}
	ids := func(tok, query string) (int, []string) {
		code, m := callAs(t, tok, "GET", api+"/accounting"+query, "")
		var out []string
		recs, _ := m["records"].([]any)
		for _, r := range recs {
			out = append(out, r.(map[string]any)["id"].(string)+"@"+r.(map[string]any)["tenant"].(string))
		}
		return code, out
	}
	if code, got := ids(aTok, ""); code != 200 || strings.Join(got, ",") != "a1@team-a" {
		t.Errorf("team-a's history: %d %v", code, got)
	}
	if code, got := ids(adminTok, "?state=cancelled"); code != 200 || strings.Join(got, ",") != "team-a:a1@team-a,team-b:b1@team-b" {
		t.Errorf("the admin's history: %d %v", code, got)
	}
	if code, _ := ids(aTok, "?tenant=team-b"); code != 403 {
		t.Errorf("team-a asking for team-b's history: %d", code)
	}
	if code, m := callAs(t, bTok, "GET", api+"/usage?by=tenant,user", ""); code != 200 || m["total"] == nil {
		t.Errorf("team-b's usage: %d %v", code, m)
	}
	if code, _ := callAs(t, agentTok, "GET", api+"/accounting", ""); code != 403 {
		t.Errorf("an agent reading accounting: %d", code)
	}
}

// issue 45 §4: the server keeps an hour of samples in memory (GET
// /api/v1/series): allocation per resource, waiting tasks per tier and
// per queue; a tenant's carry only its own queues.
func TestSeriesPerTenant(t *testing.T) {
	s := startAuth(t, func(o *Options) { o.SeriesEvery = 20 * time.Millisecond })
	defer s.stop(t)
	api := s.base + "/api/v1"
	for _, q := range []struct{ tok, body string }{
		{adminTok, `{"name":"team-a-q","weight":1}`},
	} {
		if code, m := callAs(t, q.tok, "PUT", api+"/queues/team-a-q", q.body); code != 200 {
			t.Fatalf("queue: %d %v", code, m)
		}
	}
	if code, m := callAs(t, aTok, "POST", api+"/tasks", `{"id":"big","priority":3,"resources":{"cpu":"100000"}}`); code != 201 {
		t.Fatalf("big: %d %v", code, m)
	}
	deadline := time.Now().Add(10 * time.Second)
	var points []any
	for time.Now().Before(deadline) {
		code, m := callAs(t, adminTok, "GET", api+"/series", "")
		if code != 200 {
			t.Fatalf("series: %d %v", code, m)
		}
		points, _ = m["points"].([]any)
		if n := len(points); n > 0 && points[n-1].(map[string]any)["pendingByTier"].(map[string]any)["low"] == float64(1) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(points) == 0 {
		t.Fatal("no samples in 10 s")
	}
	last := points[len(points)-1].(map[string]any)
	if last["pendingByTier"].(map[string]any)["low"] != float64(1) || last["allocated"].(map[string]any)["cpu"] == nil {
		t.Errorf("the admin's latest sample: %v", last)
	}
	if _, ok := last["pendingByQueue"].(map[string]any)["team-a-q"]; !ok {
		t.Errorf("the admin's sample lacks queue team-a-q: %v", last)
	}
	_, m := callAs(t, bTok, "GET", api+"/series", "")
	for _, p := range m["points"].([]any) {
		if q := p.(map[string]any)["pendingByQueue"]; q != nil && len(q.(map[string]any)) > 0 {
			t.Fatalf("team-b sees another tenant's queues: %v", q)
		}
	}
	if code, _ := callAs(t, aTok, "GET", api+"/series?since=yesterday", ""); code != 400 {
		t.Errorf("a bad since: %d", code)
	}
}
