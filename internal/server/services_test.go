package server

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serviceEvents reads the service events token's caller may see from the
// oldest retained event, until want arrived or 5 s passed.
func serviceEvents(t *testing.T, base, token, want string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/events?since=0", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	event := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = line[7:]
		case strings.HasPrefix(line, "data: ") && event == "service":
			out = append(out, line[6:])
			if strings.Contains(line, want) {
				return out
			}
		}
	}
	return out
}

// TestServicesAPI (issue 44 §1): a tenant's services are its own (the
// same name for two tenants, nothing seen across, the admin sees both
// qualified); bad input is refused naming the field; a replica cannot be
// submitted as a task; scale, endpoints and metrics check what they are
// sent; service events reach only their tenant.
func TestServicesAPI(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	web := `{"name":"web","replicas":1,"template":{"resources":{"cpu":"100m"},"command":["sleep","600"],
	  "readiness":{"tcp":{"port":8080}}}}`
	for _, tok := range []string{aTok, bTok} {
		if code, m := callAs(t, tok, "POST", api+"/services", web); code != 201 || m["name"] != "web" {
			t.Fatalf("create web: %d %v", code, m)
		}
	}
	if code, m := callAs(t, aTok, "POST", api+"/services", web); code != 200 {
		t.Errorf("the same spec again: %d %v, want 200", code, m)
	}
	if code, m := callAs(t, aTok, "POST", api+"/services", strings.Replace(web, `"replicas":1`, `"replicas":2`, 1)); code != 409 {
		t.Errorf("another spec under the name: %d %v, want 409", code, m)
	}
	if code, m := callAs(t, aTok, "GET", api+"/services", ""); code != 200 || len(m["services"].([]any)) != 1 {
		t.Errorf("a lists: %d %v, want its one service", code, m)
	}
	if code, m := callAs(t, adminTok, "GET", api+"/services", ""); code != 200 || len(m["services"].([]any)) != 2 ||
		!strings.Contains(m["services"].([]any)[0].(map[string]any)["name"].(string), "team-") {
		t.Errorf("admin lists: %d %v, want both, qualified", code, m)
	}
	if code, _ := callAs(t, bTok, "DELETE", api+"/services/team-a:web", ""); code != 404 {
		t.Errorf("b deleting a's by its engine name: %d, want 404", code)
	}

	for _, c := range []struct{ body, field string }{
		{`{"name":"x","replicas":1}`, "template"},
		{`{"name":"x","replicas":1,"template":{"command":["a"],"timeout":"1m"}}`, "template.timeout"},
		{`{"name":"x","replicas":1,"template":{"command":["a"],"bogus":1}}`, "template.bogus"},
		{`{"name":"x","replicas":1,"template":{"command":["a"],"liveness":{"tcp":{"port":0}}}}`, "template.liveness.tcp.port"},
		{`{"name":"x","replicas":1,"template":{"command":["a"],"service":"y"}}`, "template.service"},
		{`{"name":"x","replicas":5,"template":{"command":["a"]},"autoscale":{"min":1,"max":3,"metrics":[{"resource":"cpu","target":"70%"}]}}`, "replicas"},
		{`{"name":"x","replicas":1,"template":{"command":["a"]},"rollout":{"maxSurge":0,"maxUnavailable":0}}`, "rollout"},
	} {
		code, m := callAs(t, aTok, "POST", api+"/services", c.body)
		if code != 400 || m["error"].(map[string]any)["field"] != c.field {
			t.Errorf("%s: %d %v, want 400 on %s", c.body, code, m, c.field)
		}
	}
	if code, m := callAs(t, aTok, "POST", api+"/tasks", `{"command":["a"],"service":"web"}`); code != 400 || m["error"].(map[string]any)["field"] != "service" {
		t.Errorf("a task naming a service: %d %v, want 400 on service", code, m)
	}
	if code, m := callAs(t, aTok, "POST", api+"/tasks", `{"command":["a"],"liveness":{"tcp":{"port":80}}}`); code != 400 || m["error"].(map[string]any)["field"] != "liveness" {
		t.Errorf("a plain task with a probe: %d %v, want 400 on liveness", code, m)
	}
	if code, m := callAs(t, aTok, "POST", api+"/services/web/scale", `{}`); code != 400 || m["error"].(map[string]any)["field"] != "replicas" {
		t.Errorf("scale without replicas: %d %v", code, m)
	}
	if code, m := callAs(t, aTok, "POST", api+"/services/web/scale", `{"replicas":3}`); code != 200 || m["replicas"] != float64(3) {
		t.Errorf("scale to 3: %d %v", code, m)
	}
	if code, m := callAs(t, aTok, "GET", api+"/services/web/endpoints", ""); code != 200 || m["service"] != "web" {
		t.Errorf("endpoints: %d %v", code, m)
	}
	if code, m := callAs(t, aTok, "POST", api+"/services/web/metrics", `{"replica":"web-1","metrics":{"rps":3}}`); code != 400 || !strings.Contains(errMsg(m), "autoscale") {
		t.Errorf("metrics for a service that does not autoscale: %d %v", code, m)
	}
	if code, m := callAs(t, aTok, "GET", api+"/tasks?service=web", ""); code != 200 {
		t.Errorf("tasks?service=web: %d %v", code, m)
	}
	if code, _ := callAs(t, bTok, "GET", api+"/tasks?service=team-a:web", ""); code != 404 {
		t.Errorf("b listing a's replicas: %d, want 404", code)
	}

	aEvents := serviceEvents(t, s.base, aTok, `"scaled"`)
	if len(aEvents) < 2 || !strings.Contains(strings.Join(aEvents, "\n"), `"created"`) {
		t.Errorf("a's service events: %v, want created and scaled", aEvents)
	}
	for _, ev := range serviceEvents(t, s.base, bTok, `"never"`) {
		if strings.Contains(ev, "scaled") || strings.Contains(ev, "team-a") {
			t.Errorf("b sees a's service event %s", ev)
		}
	}
	if code, m := callAs(t, aTok, "DELETE", api+"/services/web", ""); code != 200 {
		t.Errorf("delete: %d %v", code, m)
	}
	if code, _ := callAs(t, aTok, "GET", api+"/services/web", ""); code != 404 {
		t.Errorf("after delete: %d, want 404", code)
	}
	if code, m := callAs(t, bTok, "GET", api+"/services/web", ""); code != 200 {
		t.Errorf("b's own web after a deleted its: %d %v", code, m)
	}
}

// TestNodePoolsAPI (issue 44 §3): an admin puts, lists and deletes node
// pools; a tenant may not; a bad pool is refused naming the field.
func TestNodePoolsAPI(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	api := s.base + "/api/v1"
	pool := `{"template":{"capacity":{"cpu":"8"}},"max":2,"provider":{"exec":{"command":["true"]}}}`
	if code, m := callAs(t, adminTok, "PUT", api+"/nodepools/burst", pool); code != 201 || m["name"] != "burst" {
		t.Fatalf("create: %d %v", code, m)
	}
	if code, _ := callAs(t, adminTok, "PUT", api+"/nodepools/burst", pool); code != 200 {
		t.Errorf("again: %d, want 200", code)
	}
	if code, _ := callAs(t, aTok, "PUT", api+"/nodepools/mine", pool); code != 403 {
		t.Errorf("a tenant putting a pool: %d, want 403", code)
	}
	if code, _ := callAs(t, aTok, "GET", api+"/nodepools", ""); code != 403 {
		t.Errorf("a tenant listing pools: %d, want 403", code)
	}
	if code, m := callAs(t, adminTok, "PUT", api+"/nodepools/bad", strings.Replace(pool, `"max":2`, `"max":0`, 1)); code != 400 || m["error"].(map[string]any)["field"] != "max" {
		t.Errorf("max 0: %d %v", code, m)
	}
	if code, m := callAs(t, adminTok, "PUT", api+"/nodepools/hook", strings.Replace(pool, `{"exec":{"command":["true"]}}`, `{"webhook":{"url":"http://example.com/x"}}`, 1)); code != 400 || m["error"].(map[string]any)["field"] != "provider.webhook.url" {
		t.Errorf("a plaintext webhook off loopback: %d %v", code, m)
	}
	if code, m := callAs(t, adminTok, "GET", api+"/nodepools", ""); code != 200 || len(m["nodePools"].([]any)) != 1 {
		t.Errorf("list: %d %v", code, m)
	}
	if code, _ := callAs(t, adminTok, "DELETE", api+"/nodepools/burst", ""); code != 200 {
		t.Errorf("delete: %d", code)
	}
	if code, _ := callAs(t, adminTok, "DELETE", api+"/nodepools/burst", ""); code != 404 {
		t.Errorf("delete again: %d, want 404", code)
	}
}
