package server

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func ids(t *testing.T, m map[string]any, list string) []string {
	t.Helper()
	var out []string
	items, _ := m[list].([]any)
	for _, it := range items {
		o := it.(map[string]any)
		if id, ok := o["id"].(string); ok {
			out = append(out, id)
		} else {
			out = append(out, o["name"].(string))
		}
	}
	return out
}

// TestListSelectorAndNewestFirst (issue 16 §2): GET /tasks?selector=
// matches the tasks' metadata, ?order=newest pages newest first (a task
// submitted between pages does not shift them), GET /nodes?selector=
// matches own and derived labels, which the node view shows; bad
// selectors and orders are 400s naming the field.
func TestListSelectorAndNewestFirst(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	for i, team := range []string{"vision", "nlp", "vision", "nlp", "vision"} {
		body := fmt.Sprintf(`{"id":"t%d","resources":{"cpu":"1"},"lease":"1h","metadata":{"team":%q}}`, i, team)
		if code, m := call(t, "POST", s.base+"/api/v1/tasks", body); code != 201 {
			t.Fatalf("submit: %d %v", code, m)
		}
	}
	list := func(q string) ([]string, string) {
		code, m := call(t, "GET", s.base+"/api/v1/tasks?"+q, "")
		if code != 200 {
			t.Fatalf("GET /tasks?%s: %d %v", q, code, m)
		}
		c, _ := m["cursor"].(string)
		return ids(t, m, "tasks"), c
	}
	sel := func(s string) string { return "selector=" + url.QueryEscape(s) }
	for q, want := range map[string][]string{
		sel("team=vision"):                     {"t0", "t2", "t4"},
		sel("team!=vision"):                    {"t1", "t3"},
		sel("team in (nlp)") + "&order=newest": {"t3", "t1"},
		sel("!team"):                           nil,
		"order=newest":                         {"t4", "t3", "t2", "t1", "t0"},
		"order=oldest":                         {"t0", "t1", "t2", "t3", "t4"},
	} {
		if got, _ := list(q); !cmp.Equal(got, want) {
			t.Errorf("GET /tasks?%s = %v, want %v", q, got, want)
		}
	}
	page, cursor := list("order=newest&limit=2")
	if !cmp.Equal(page, []string{"t4", "t3"}) || cursor == "" {
		t.Fatalf("first newest page %v cursor %q", page, cursor)
	}
	call(t, "POST", s.base+"/api/v1/tasks", `{"id":"t5","resources":{"cpu":"1"},"lease":"1h"}`)
	if page, _ = list("order=newest&limit=2&cursor=" + cursor); !cmp.Equal(page, []string{"t2", "t1"}) {
		t.Fatalf("second newest page %v, want [t2 t1]", page)
	}

	code, m := call(t, "GET", s.base+"/api/v1/nodes?"+sel("nvidia.com/gpu.model=L4"), "")
	if got := ids(t, m, "nodes"); code != 200 || !cmp.Equal(got, []string{"gpu-a"}) {
		t.Fatalf("nodes with L4 GPUs: %d %v", code, got)
	}
	nodes := m["nodes"].([]any)
	derived, _ := nodes[0].(map[string]any)["derivedLabels"].(map[string]any)
	if derived["nvidia.com/gpu.model"] != "L4" || derived["hetsched.io/node"] != "gpu-a" {
		t.Fatalf("gpu-a's derived labels: %v", derived)
	}
	if _, m = call(t, "GET", s.base+"/api/v1/nodes?"+sel("!nvidia.com/gpu.model"), ""); !cmp.Equal(ids(t, m, "nodes"), []string{"cpu-a"}) {
		t.Fatalf("nodes without GPUs: %v", m)
	}

	for path, field := range map[string]string{
		"/api/v1/tasks?" + sel("team=a=b"):  "selector",
		"/api/v1/tasks?" + sel("team in x"): "selector",
		"/api/v1/nodes?" + sel("bad key"):   "selector",
		"/api/v1/tasks?order=random":        "order",
	} {
		if code, m := call(t, "GET", s.base+path, ""); code != 400 || errField(m) != field {
			t.Errorf("GET %s: %d %v, want 400 on %s", path, code, m, field)
		}
	}
}
