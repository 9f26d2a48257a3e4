package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

// TestNotTasks: a queue tree or a node list given to submit is named, with
// the command that takes it; tasks, jobs and anything else pass (the
// server judges them).
func TestNotTasks(t *testing.T) {
	examples, err := ReadSpec(filepath.Join("..", "..", "examples", "queues.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, body string
		want       []string // nil: no error
	}{
		{"examples/queues.yaml", string(examples), []string{"queue tree", "hetsched apply -f FILE", "hetsched up --queues FILE"}},
		{"queues, yaml", "queues:\n  - {name: a}\n", []string{"queue tree (top-level queues:)", "apply -f"}},
		{"nodes", `{"nodes":[{"name":"n1"}]}`, []string{"node list (top-level nodes:)", "hetsched apply -f FILE", "server --nodes"}},
		{"both", `{"queues":[],"nodes":[]}`, []string{"a queue tree and a node list", "apply -f"}},
		{"a task", `{"name":"x","command":["true"],"resources":{"cpu":"1"}}`, nil},
		{"a task list", `{"tasks":[{"name":"x"}]}`, nil},
		{"a job", `{"name":"j","tasks":[{"id":"a"}]}`, nil},
		{"a job with a stray queues key", `{"name":"j","queues":"a","tasks":[{"id":"a"}]}`, nil},
		{"a task with a stray nodes key", `{"command":["true"],"nodes":["a"]}`, nil},
		{"a list", `[{"name":"x"}]`, nil},
		{"not JSON or YAML", "{{{", nil},
		{"empty", "", nil},
	} {
		err := NotTasks([]byte(c.body))
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
}

// TestParseManifestBadInput: every problem names its field.
func TestParseManifestBadInput(t *testing.T) {
	for _, c := range []struct{ body, field, msg string }{
		{`{"queue":[]}`, "queue", `unknown field; did you mean "queues"?`},
		{`{"queues":[],"nodez":[]}`, "nodez", `did you mean "nodes"?`},
		{`{"apiVersion":"v1"}`, "apiVersion", "unknown field"},
		{`{"name":"x","command":["true"]}`, "command", "hetsched submit -f FILE"},
		{`{"tasks":[]}`, "tasks", "hetsched submit -f FILE"},
		{`[]`, "tasks", "hetsched submit -f FILE"}, // ReadSpec made it {"tasks": []}
		{`{}`, "", "the file is empty"},
		{`"queues"`, "", "must be a mapping"},
		{`{"queues":{"name":"a"}}`, "queues", "must be a list"},
		{`{"queues":[{"name":"a","wieght":2}]}`, "queues[0].wieght", `did you mean "weight"?`},
		{`{"queues":[{"name":"a"},{"name":"b","weight":0}]}`, "queues[1].weight", "a weight of 0"},
		{`{"queues":[{"name":"a","weight":"heavy"}]}`, "queues[0].weight", "must be float64"},
		{`{"queues":[{"name":"a","parent":"a"}]}`, "queues[0].parent", "its own parent"},
		{`{"queues":[{"name":"root"}]}`, "queues[0].name", "implicit root"},
		{`{"queues":[{"name":"a","guaranteed":{"cpu":"4"},"max":{"cpu":"2"}}]}`, "queues[0].max.cpu", "below the guarantee"},
		{`{"queues":[{"name":"a"},{"name":"a"}]}`, "queues[1].name", "twice"},
		{`{"nodes":[{"name":"n","capacity":{"cpu":"1"},"devices":[{"type":"nvidia.com/gpu","id":"0","modle":"L4"}]}]}`, "nodes[0].devices[0].modle", `did you mean "model"?`},
		{`{"nodes":[{"name":"n","capcity":{"cpu":"1"}}]}`, "nodes[0].capcity", `did you mean "capacity"?`},
		{`{"nodes":[{"name":"n","capacity":{"cpu":"lots"}}]}`, "nodes[0].capacity.cpu", ""},
		{`{"nodes":[{"name":"n","state":"asleep"}]}`, "nodes[0].state", "must be ready"},
		{`{"nodes":[{"name":"n"},{"name":"n"}]}`, "nodes[1].name", "duplicate"},
		{`{"nodes":[{}]}`, "nodes[0].name", ""},
		{`{"services":[{"name":"web","template":{"comand":["x"]}}]}`, "services[0].template.comand", `did you mean "command"?`},
		{`{"services":[{"name":"web","replicas":1,"template":{"command":["x"],"timeout":"1m"}}]}`, "services[0].template.timeout", "not for a service"},
		{`{"services":[{"name":"web","replicas":1,"template":{"command":["x"]}},{"name":"web","replicas":1,"template":{"command":["x"]}}]}`, "services[1].name", "twice"},
		{`{"nodePools":[{"name":"p","template":{},"max":0,"provider":{"exec":{"command":["x"]}}}]}`, "nodePools[0].max", "min and max"},
		{`{"nodePools":[{"name":"p","template":{},"max":1,"provder":{}}]}`, "nodePools[0].provder", `did you mean "provider"?`},
	} {
		body := []byte(c.body)
		if strings.HasPrefix(c.body, "[") {
			body = []byte(`{"tasks":` + c.body + `}`)
		}
		_, err := ParseManifest(body)
		if err == nil {
			t.Errorf("%s: no error", c.body)
			continue
		}
		if errs.FieldOf(err) != c.field || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: field %q, %v; want field %q and %q", c.body, errs.FieldOf(err), err, c.field, c.msg)
		}
	}
}

// TestApply: queues (children before parents in the file) and nodes are
// created, then reported unchanged, then configured when they change;
// a refused object is named while the others are applied.
func TestApply(t *testing.T) {
	c := NewClient(servertest.Start(t, node), "", 10*time.Second)
	ctx := context.Background()
	apply := func(body, output string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		err := Apply(ctx, c, &out, []byte(body), output)
		return out.String(), err
	}
	examples, err := ReadSpec(filepath.Join("..", "..", "examples", "queues.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := apply(string(examples), Table)
	if err != nil || out != "queue/research created\nqueue/prod created\nqueue/vision created\nqueue/nlp created\n" {
		t.Fatalf("examples/queues.yaml: %v\n%s", err, out)
	}
	if out, err = apply(string(examples), Table); err != nil || strings.Count(out, " unchanged\n") != 4 {
		t.Fatalf("again: %v\n%s", err, out)
	}

	// Children first in the file, a queue and nodes in one file.
	both := `{"queues":[{"name":"team-a-dev","parent":"team-a","guaranteed":{"cpu":"2"}},
	                    {"name":"team-a","parent":"root","guaranteed":{"cpu":"4"},"weight":2}],
	          "nodes":[{"name":"gpu-1","labels":{"rack":"r1"},"capacity":{"cpu":"16","memory":"64Gi"},
	                    "devices":[{"type":"nvidia.com/gpu","id":"0","model":"L4","memory":"24Gi","topology":{"nvlink":"nv0"}}]},
	                   {"name":"cpu-a","capacity":{"cpu":"32","memory":"64Gi"}}]}`
	out, err = apply(both, Table)
	if err != nil || out != "queue/team-a created\nqueue/team-a-dev created\nnode/gpu-1 created\nnode/cpu-a configured\n" {
		t.Fatalf("queues and nodes: %v\n%s", err, out)
	}
	if out, err = apply(both, Table); err != nil || out != "queue/team-a unchanged\nqueue/team-a-dev unchanged\nnode/gpu-1 unchanged\nnode/cpu-a unchanged\n" {
		t.Fatalf("queues and nodes again: %v\n%s", err, out)
	}
	changed := strings.Replace(strings.Replace(both, `"weight":2`, `"weight":3`, 1), `"cpu":"32"`, `"cpu":"48"`, 1)
	if out, err = apply(changed, Table); err != nil || out != "queue/team-a configured\nqueue/team-a-dev unchanged\nnode/gpu-1 unchanged\nnode/cpu-a configured\n" {
		t.Fatalf("changed: %v\n%s", err, out)
	}
	var nv struct{ Capacity map[string]any }
	if _, err := c.Do(ctx, "GET", "/api/v1/nodes/cpu-a", nil, &nv); err != nil || nv.Capacity["cpu"] != "48" {
		t.Errorf("cpu-a after apply: %v %+v", err, nv)
	}

	// -o json: the objects as the server answered.
	out, err = apply(`{"queues":[{"name":"ops","weight":5}]}`, JSON)
	var got struct {
		Queues []struct {
			Name   string
			Weight float64
		}
	}
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || len(got.Queues) != 1 || got.Queues[0].Name != "ops" || got.Queues[0].Weight != 5 {
		t.Fatalf("-o json: %v\n%s", err, out)
	}

	// A refused queue is named; the rest goes in.
	out, err = apply(`{"queues":[{"name":"orphan","parent":"nowhere"},{"name":"fine"}]}`, Table)
	if err == nil || !strings.Contains(err.Error(), `queue/orphan: parent: no queue "nowhere"`) || out != "queue/fine created\n" {
		t.Fatalf("a refused queue: %v\n%s", err, out)
	}
	// A bad file sends nothing.
	_, err = apply(`{"queues":[{"name":"late"}],"nodes":[{"name":"n","capcity":{}}]}`, Table)
	if err == nil || err.Error() != `-f: nodes[0].capcity: unknown field; did you mean "capacity"?` {
		t.Fatalf("bad file: %v", err)
	}
	var qs struct{ Queues []struct{ Name string } }
	if _, err := c.Do(ctx, "GET", "/api/v1/queues", nil, &qs); err != nil {
		t.Fatal(err)
	}
	for _, q := range qs.Queues {
		if q.Name == "late" {
			t.Errorf("a queue of a refused file was put")
		}
	}
}
