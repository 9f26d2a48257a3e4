package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hetsched/hetsched/internal/errs"
)

// TestPutNode: PUT /api/v1/nodes/{name} creates (201) and replaces (200) a
// static node, answering with the node view; the node takes work, keeps
// its cordon when the body names no state, and survives a restart.
func TestPutNode(t *testing.T) {
	dir := t.TempDir()
	s := start(t, dir)
	api := s.base + "/api/v1"
	code, m := call(t, "PUT", api+"/nodes/gpu-new", `{"labels":{"rack":"r9"},"capacity":{"cpu":"8","memory":"16Gi"},
		"devices":[{"type":"nvidia.com/gpu","id":"0","model":"L4","memory":"24Gi"}]}`)
	if code != 201 || m["name"] != "gpu-new" || m["state"] != "ready" || m["tasks"] != float64(0) || m["allocated"] == nil {
		t.Fatalf("create: %d %v", code, m)
	}
	if devs, _ := m["devices"].([]any); len(devs) != 1 {
		t.Fatalf("create: devices %v", m["devices"])
	}
	if code, g := call(t, "GET", api+"/nodes/gpu-new", ""); code != 200 || g["name"] != "gpu-new" {
		t.Fatalf("get after create: %d %v", code, g)
	}
	// It takes work: a task pinned to it is placed there.
	code, m = call(t, "POST", api+"/schedule?wait=2s", `{"id":"on-new","lease":"1m","resources":{"cpu":"1","nvidia.com/gpu":1},"nodeSelector":{"hetsched.io/node":"gpu-new"}}`)
	if code != 200 || m["node"] != "gpu-new" {
		t.Fatalf("a task on the new node: %d %v", code, m)
	}
	// Replaced: more CPUs, the name in the body too; the allocation stays.
	code, m = call(t, "PUT", api+"/nodes/gpu-new", `{"name":"gpu-new","capacity":{"cpu":"16","memory":"16Gi"},
		"devices":[{"type":"nvidia.com/gpu","id":"0","model":"L4","memory":"24Gi"}]}`)
	if code != 200 || cpuOf(m) != "16" || m["tasks"] != float64(1) {
		t.Fatalf("replace: %d %v", code, m)
	}
	if _, ok := m["labels"]; ok {
		t.Errorf("replace kept the old labels: %v", m["labels"])
	}
	// A cordon survives a put that names no state; a named state wins.
	if code, m := call(t, "POST", api+"/nodes/gpu-new/cordon", ""); code != 200 {
		t.Fatalf("cordon: %d %v", code, m)
	}
	if code, m := call(t, "PUT", api+"/nodes/gpu-new", `{"capacity":{"cpu":"16","memory":"16Gi"}}`); code != 200 || m["state"] != "cordoned" {
		t.Errorf("put of a cordoned node without a state: %d %v", code, m)
	}
	if code, m := call(t, "PUT", api+"/nodes/gpu-new", `{"capacity":{"cpu":"16","memory":"16Gi"},"state":"ready"}`); code != 200 || m["state"] != "ready" {
		t.Errorf("put with state ready: %d %v", code, m)
	}
	// A node of the --nodes inventory is replaced the same way.
	if code, m := call(t, "PUT", api+"/nodes/cpu-a", `{"capacity":{"cpu":"12","memory":"32Gi"}}`); code != 200 || cpuOf(m) != "12" {
		t.Errorf("replace cpu-a: %d %v", code, m)
	}
	s.stop(t)

	s = start(t, dir)
	defer s.stop(t)
	if code, m := call(t, "GET", s.base+"/api/v1/nodes/gpu-new", ""); code != 200 || cpuOf(m) != "16" {
		t.Fatalf("after a restart: %d %v", code, m)
	}
}

// TestPutNodeBadInput: every refusal names its field and code; nothing
// is applied.
func TestPutNodeBadInput(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	api := s.base + "/api/v1"
	for _, c := range []struct {
		path, body string
		code       int
		ec         errs.Code
		field, msg string
	}{
		{"/nodes/n1", `{"name":"n2","capacity":{"cpu":"1"}}`, 400, errs.InvalidArgument, "name", `the body names "n2", the path "n1"`},
		{"/nodes/n1", `{"capcity":{"cpu":"1"}}`, 400, errs.InvalidArgument, "capcity", `did you mean "capacity"?`},
		{"/nodes/n1", `{"capacity":{"cpu":"-1"}}`, 400, errs.InvalidArgument, "capacity.cpu", ""},
		{"/nodes/n1", `{"state":"asleep"}`, 400, errs.InvalidArgument, "state", "must be ready"},
		{"/nodes/n1", `{"devices":[{"type":"nvidia.com/gpu"}]}`, 400, errs.InvalidArgument, "devices[0].id", ""},
		{"/nodes/n1", `{"labels":{"hetsched.io/node":"x"}}`, 400, errs.InvalidArgument, "labels.hetsched.io/node", ""},
		{"/nodes/n1", `[]`, 400, errs.InvalidArgument, "", ""},
		{"/nodes/n1", ``, 400, errs.InvalidArgument, "", ""},
		{"/nodes/Bad%20Name", `{}`, 400, errs.InvalidArgument, "name", ""},
	} {
		code, m := call(t, "PUT", api+c.path, c.body)
		if code != c.code || errCode(m) != string(c.ec) || errField(m) != c.field || !strings.Contains(errMsg(m), c.msg) {
			t.Errorf("PUT %s %s: %d %v; want %d %s field %q %q", c.path, c.body, code, m, c.code, c.ec, c.field, c.msg)
		}
	}
	if code, m := call(t, "GET", api+"/nodes/n1", ""); code != 404 {
		t.Errorf("a refused node exists: %d %v", code, m)
	}
}

// TestPutNodeHeldByAgent: a node an agent registered is the agent's; a
// static put of it is 409 naming the agent, and changes nothing.
func TestPutNodeHeldByAgent(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	api := s.base + "/api/v1"
	if code, m := call(t, "POST", api+"/agents/register", regBody("agn-9", "agn-9")); code != 200 {
		t.Fatalf("register: %d %v", code, m)
	}
	code, m := call(t, "PUT", api+"/nodes/agn-9", `{"capacity":{"cpu":"64","memory":"8Gi"}}`)
	if code != 409 || errCode(m) != string(errs.Conflict) || errField(m) != "name" || !strings.Contains(errMsg(m), `agent "agn-9"`) {
		t.Fatalf("put of an agent's node: %d %v", code, m)
	}
	if code, m := call(t, "GET", api+"/nodes/agn-9", ""); code != 200 || cpuOf(m) != "4" || m["agent"] != "agn-9" {
		t.Errorf("the agent's node after the refused put: %d %v", code, m)
	}
}

// TestPutNodeAdminOnly: only an admin puts nodes.
func TestPutNodeAdminOnly(t *testing.T) {
	s := startAuth(t)
	defer s.stop(t)
	url := s.base + "/api/v1/nodes/n-auth"
	body := `{"capacity":{"cpu":"1"}}`
	for _, c := range []struct {
		tok  string
		code int
	}{{"", 401}, {aTok, 403}, {agentTok, 403}, {adminTok, 201}, {adminTok, 200}} {
		if code, m := callAs(t, c.tok, "PUT", url, body); code != c.code {
			t.Errorf("token %q: %d %v, want %d", c.tok, code, m, c.code)
		}
	}
}

// cpuOf is a node view's CPU capacity as written ("16").
func cpuOf(m map[string]any) string {
	c, _ := m["capacity"].(map[string]any)
	return fmt.Sprint(c["cpu"])
}

// TestListNodesPages: GET /api/v1/nodes?limit= pages the nodes in name
// order with a cursor, total counts every match on all pages, state= and
// selector= filter before paging, and a bad limit or state is a 400 that
// names the field. Without limit every node comes at once.
func TestListNodesPages(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	api := s.base + "/api/v1"
	for i := range 5 {
		body := fmt.Sprintf(`{"labels":{"rack":"r%d"},"capacity":{"cpu":"4","memory":"8Gi"}}`, i%2)
		if code, m := call(t, "PUT", fmt.Sprintf("%s/nodes/n%d", api, i), body); code != 201 {
			t.Fatalf("put n%d: %d %v", i, code, m)
		}
	}
	if code, m := call(t, "POST", api+"/nodes/n3/cordon", ""); code != 200 {
		t.Fatalf("cordon: %d %v", code, m)
	}
	// walk follows the cursor from the first page to the last.
	walk := func(q string) (names []string, totals []float64) {
		t.Helper()
		cursor := ""
		for range 10 {
			code, m := call(t, "GET", api+"/nodes?"+q+"&cursor="+cursor, "")
			if code != 200 {
				t.Fatalf("GET /nodes?%s&cursor=%s: %d %v", q, cursor, code, m)
			}
			names = append(names, ids(t, m, "nodes")...)
			totals = append(totals, m["total"].(float64))
			next, _ := m["cursor"].(string)
			if next == "" {
				return names, totals
			}
			cursor = next
		}
		t.Fatalf("GET /nodes?%s: more than 10 pages", q)
		return nil, nil
	}
	for q, want := range map[string][]string{
		"limit=2":                        {"cpu-a", "gpu-a", "n0", "n1", "n2", "n3", "n4"},
		"limit=3&state=ready":            {"cpu-a", "gpu-a", "n0", "n1", "n2", "n4"},
		"limit=1&state=cordoned":         {"n3"},
		"limit=2&selector=rack%3Dr1":     {"n1", "n3"},
		"limit=10000&selector=rack%3Dr0": {"n0", "n2", "n4"},
		"state=draining":                 nil,
	} {
		names, totals := walk(q)
		if !cmp.Equal(names, want) {
			t.Errorf("GET /nodes?%s walked %v, want %v", q, names, want)
		}
		for _, n := range totals {
			if int(n) != len(want) {
				t.Errorf("GET /nodes?%s: total %v, want %d on every page", q, n, len(want))
			}
		}
	}
	if code, m := call(t, "GET", api+"/nodes", ""); code != 200 || len(ids(t, m, "nodes")) != 7 || m["cursor"] != nil {
		t.Errorf("GET /nodes without limit: %d %v", code, m)
	}
	for q, field := range map[string]string{"limit=0": "limit", "limit=x": "limit", "state=gone": "state"} {
		code, m := call(t, "GET", api+"/nodes?"+q, "")
		e, _ := m["error"].(map[string]any)
		if code != 400 || e["field"] != field {
			t.Errorf("GET /nodes?%s: %d %v, want 400 naming %s", q, code, m, field)
		}
	}
}
