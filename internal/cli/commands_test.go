package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

func TestTaskDevicesShort(t *testing.T) {
	dev := func(ty, id string, share int) deviceRef { return deviceRef{Type: ty, ID: id, Share: share} }
	for _, c := range []struct {
		devs []deviceRef
		want string
	}{
		{nil, ""},
		{[]deviceRef{dev("nvidia.com/gpu", "0", 500)}, "gpu:0@500m"},
		{[]deviceRef{dev("nvidia.com/gpu", "0", 1000), dev("nvidia.com/gpu", "1", 1000), dev("nvidia.com/gpu", "2", 1000), dev("nvidia.com/gpu", "3", 1000)}, "gpu:0-3"},
		{[]deviceRef{dev("nvidia.com/gpu", "0", 0), dev("nvidia.com/gpu", "1", 0), dev("nvidia.com/gpu", "3", 0), dev("nvidia.com/gpu", "x", 0)}, "gpu:0-1,3,x"},
		{[]deviceRef{dev("google.com/tpu", "4", 0), dev("google.com/tpu", "5", 0)}, "tpu:4-5"},
		{[]deviceRef{dev("nvidia.com/gpu", "0", 0), dev("amd.com/gpu", "0", 0)}, "nvidia.com/gpu:0 amd.com/gpu:0"},
		{[]deviceRef{dev("nvidia.com/gpu", "01", 0), dev("nvidia.com/gpu", "02", 0)}, "gpu:01,02"},
	} {
		tk := task{}
		tk.Devices = c.devs
		if got := tk.devices(); got != c.want {
			t.Errorf("%v: got %q, want %q", c.devs, got, c.want)
		}
	}
}

func TestHumanQuantities(t *testing.T) {
	got := human(map[string]any{"cpu": float64(1500), "memory": float64(85899345920), "nvidia.com/gpu": float64(500), "google.com/tpu": float64(2000), "ephemeral-storage": "100Gi"})
	want := "cpu=1.5,ephemeral-storage=100Gi,google.com/tpu=2,memory=80Gi,nvidia.com/gpu=0.5"
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	for q, want := range map[any]string{"24684084Ki": "23.5Gi", float64(1 << 40): "1Ti", float64(1536): "1.5Ki", float64(1000): "1000", "512Mi": "512Mi", "1.5Gi": "1.5Gi", float64(-(1 << 30)): "-1073741824"} {
		if got := quantity("memory", q); got != want {
			t.Errorf("memory %v in a table: %q, want %q", q, got, want)
		}
	}
	if human(nil) != "-" {
		t.Error("empty is not -")
	}
}

// TestNodesAndQueuesTablesInHumanUnits: get nodes and get queues tables
// write memory in binary units and devices as devices; -o json keeps the
// server's numbers.
func TestNodesAndQueuesTablesInHumanUnits(t *testing.T) {
	base := servertest.Start(t, "nodes:\n  - name: gpu-a\n    capacity: {cpu: \"8\", memory: 80Gi}\n    devices:\n      - {type: nvidia.com/gpu, id: \"0\", model: L4}\n      - {type: nvidia.com/gpu, id: \"1\", model: L4}\n")
	c := NewClient(base, "", 10*time.Second)
	ctx := context.Background()
	if _, err := c.Do(ctx, "PUT", "/api/v1/queues/team-a", []byte(`{"name":"team-a","guaranteed":{"nvidia.com/gpu":1,"memory":"40Gi"}}`), nil); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"tasks":[{"id":"a","queue":"team-a","resources":{"cpu":"1","memory":"80Gi","nvidia.com/gpu":0.5}},{"id":"b","queue":"team-a","resources":{"cpu":"500m","nvidia.com/gpu":1}}]}`)
	var out bytes.Buffer
	if err := Submit(ctx, c, &out, body, WaitMode{On: true, Placed: true, Limit: 2 * time.Second}, Table); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "gpu:0@500m") && !strings.Contains(out.String(), "gpu:1@500m") {
		t.Errorf("submit table:\n%s", out.String())
	}
	out.Reset()
	if err := GetNodes(ctx, c, &out, Table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "cpu=1.5,memory=80Gi,nvidia.com/gpu=1.5") || strings.Contains(out.String(), "85899345920") {
		t.Errorf("get nodes:\n%s", out.String())
	}
	out.Reset()
	if err := GetQueues(ctx, c, &out, Table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "memory=40Gi,nvidia.com/gpu=1") || !strings.Contains(out.String(), "cpu=1.5,memory=80Gi,nvidia.com/gpu=1.5") {
		t.Errorf("get queues:\n%s", out.String())
	}
	out.Reset()
	if err := GetNodes(ctx, c, &out, JSON); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"memory": 85899345920`) {
		t.Errorf("get nodes -o json is not the server's:\n%s", out.String())
	}
}

// TestLogsQuery: --attempt, --previous and -f reach the server as
// ?attempt=N, ?previous=true and ?follow=true; together, or a bad attempt,
// they are refused before anything is sent.
func TestLogsQuery(t *testing.T) {
	got := make(chan string, 10)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.URL.Path + "?" + r.URL.RawQuery
		fmt.Fprint(w, "output\n")
	}))
	t.Cleanup(ts.Close)
	c := NewClient(ts.URL, "", 5*time.Second)
	for _, x := range []struct {
		o    LogOptions
		want string
	}{
		{LogOptions{}, "/api/v1/tasks/a%2Fb/logs?"},
		{LogOptions{Attempt: 2, AttemptSet: true}, "/api/v1/tasks/a%2Fb/logs?attempt=2"},
		{LogOptions{Attempt: 0, AttemptSet: true}, "/api/v1/tasks/a%2Fb/logs?attempt=0"},
		{LogOptions{Previous: true, Follow: true}, "/api/v1/tasks/a%2Fb/logs?follow=true&previous=true"},
	} {
		var out bytes.Buffer
		if err := Logs(context.Background(), c, &out, "a/b", x.o); err != nil || out.String() != "output\n" {
			t.Errorf("%+v: %v %q", x.o, err, out.String())
		}
		if p := <-got; p != strings.Replace(x.want, "a%2Fb", "a/b", 1) && p != x.want {
			t.Errorf("%+v: asked %s, want %s", x.o, p, x.want)
		}
	}
	for _, o := range []LogOptions{{Attempt: 1, AttemptSet: true, Previous: true}, {Attempt: -1, AttemptSet: true}} {
		if err := Logs(context.Background(), c, io.Discard, "a", o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if len(got) > 0 {
		t.Errorf("refused options reached the server: %s", <-got)
	}
}
