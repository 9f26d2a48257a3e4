package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

const node = "nodes:\n  - name: cpu-a\n    capacity: {cpu: \"64\", memory: 64Gi}\n"

// submitN submits tasks t1..tn, one request each, in that order.
func submitN(t *testing.T, c *Client, n int) {
	t.Helper()
	for i := 1; i <= n; i++ {
		body := fmt.Sprintf(`{"id":"t%d","name":"n%d","resources":{"cpu":"1"}}`, i, (n-i)%3)
		if _, err := c.Do(context.Background(), "POST", "/api/v1/tasks", []byte(body), nil); err != nil {
			t.Fatal(err)
		}
	}
}

func ids(t *testing.T, table string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		out = append(out, strings.Fields(l)[0])
	}
	return out
}

// TestGetTasksPagesSortsAndSaysWhenItCuts: get tasks follows the server's
// cursors (pages of 2 here), shows the newest first, and says on standard
// error when --limit cut the list.
func TestGetTasksPagesSortsAndSaysWhenItCuts(t *testing.T) {
	old := pageSize
	pageSize = 2
	t.Cleanup(func() { pageSize = old })
	c := NewClient(servertest.Start(t, node), "", 10*time.Second)
	submitN(t, c, 5)
	ctx := context.Background()
	var out, note bytes.Buffer
	if err := GetTasks(ctx, c, &out, &note, ListOptions{Limit: 3}, Table); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids(t, out.String()), " "); got != "t5 t4 t3" {
		t.Errorf("newest 3 first: %s\n%s", got, out.String())
	}
	if note.String() != "showing 3 of 5 tasks (--limit, --all)\n" {
		t.Errorf("note %q", note.String())
	}
	out.Reset()
	note.Reset()
	if err := GetTasks(ctx, c, &out, &note, ListOptions{Limit: 3, All: true}, Table); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids(t, out.String()), " "); got != "t5 t4 t3 t2 t1" || note.Len() != 0 {
		t.Errorf("--all: %s, note %q", got, note.String())
	}
	out.Reset()
	if err := GetTasks(ctx, c, &out, &note, ListOptions{Limit: 100, Sort: "name"}, Table); err != nil {
		t.Fatal(err)
	}
	// names: t1 n1, t2 n0, t3 n2, t4 n1, t5 n0; by name, then id.
	if got := strings.Join(ids(t, out.String()), " "); got != "t2 t5 t1 t4 t3" || note.Len() != 0 {
		t.Errorf("--sort name: %s, note %q", got, note.String())
	}
	out.Reset()
	if err := GetTasks(ctx, c, &out, &note, ListOptions{Limit: 2}, JSON); err != nil {
		t.Fatal(err)
	}
	var body struct {
		Tasks []struct {
			ID        string         `json:"id"`
			Resources map[string]any `json:"resources"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(out.Bytes(), &body); err != nil || len(body.Tasks) != 2 || body.Tasks[0].ID != "t5" || body.Tasks[0].Resources["cpu"] != "1" {
		t.Errorf("-o json: %v %+v\n%s", err, body, out.String())
	}
	if err := GetTasks(ctx, c, &out, &note, ListOptions{Limit: 2, Sort: "size"}, Table); err == nil {
		t.Error("--sort size accepted")
	}
}
