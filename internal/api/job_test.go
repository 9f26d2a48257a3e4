package api

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/errs"
)

func job(tasks ...Task) *Job { return &Job{ID: "j", Tasks: tasks} }

func dep(id string, deps ...string) Task { return Task{ID: id, Depends: deps} }

func TestJobValidate(t *testing.T) {
	bad := 7
	cases := []struct {
		j     *Job
		field string
		msg   string
	}{
		{job(dep("a"), dep("b", "a"), dep("c", "a", "b")), "", ""},
		{job(dep("a", "b"), dep("b", "c"), dep("c", "a")), "tasks", "a → b → c → a"},
		{job(dep("a", "a")), "tasks[0].depends[0]", ""},
		{job(dep("x"), dep("a", "b"), dep("b", "a")), "tasks", "a → b → a"},
		{job(dep("a"), dep("a")), "tasks[1].id", "duplicate"},
		{job(dep("a", "zzz")), "tasks[0].depends[0]", "not a task of this job"},
		{job(Task{}), "tasks[0].id", ""},
		{job(Task{ID: "a", Priority: &bad}), "tasks[0].priority", ""},
		{&Job{ID: "j"}, "tasks", ""},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, FailurePolicy: "sometimes"}, "failurePolicy", ""},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Gang: &Gang{MinMember: 2}}, "gang.minMember", ""},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Gang: &Gang{MinMember: 1, RequiredTopology: "not a key!"}}, "gang.requiredTopology", ""},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Gang: &Gang{MinMember: 1, Disruption: "pod"}}, "gang.disruption", "gang or member"},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Gang: &Gang{MinMember: 1, RequiredTopology: "topology.kubernetes.io/zone", SameModel: new(false)}}, "", ""},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Retries: &Retries{Limit: -1}}, "retries.limit", ""},
		{&Job{ID: "bad id", Tasks: []Task{dep("a")}}, "id", ""},
		{job(dep("a"), dep("b", "afterany:a"), dep("c", "afternotok:a", "afterok:b")), "", ""},
		{job(dep("a", "afterany:b"), dep("b", "afternotok:a")), "tasks", "a → b → a"},
		{job(dep("a", "afterany:zzz")), "tasks[0].depends[0]", "not a task of this job"},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Depends: []string{"afterok:etl", "afternotok:train-3"}}, "", ""},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Depends: []string{"afterany:j"}}, "depends[0]", "itself"},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Depends: []string{"j.a"}}, "depends[0]", "a task of this job"},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Depends: []string{"beforeok:x"}}, "", ""},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Depends: []string{"afterwards:x"}}, "depends[0]", "unknown dependency type"},
		{&Job{ID: "j", Tasks: []Task{dep("a")}, User: "a b"}, "user", ""},
	}
	for i, c := range cases {
		err := c.j.Validate()
		if errs.FieldOf(err) != c.field || (c.field == "") != (err == nil) || (c.msg != "" && !strings.Contains(fmt.Sprint(err), c.msg)) {
			t.Errorf("case %d: %v, want field %q containing %q", i, err, c.field, c.msg)
		}
	}
}

// TestJobCycleSearchIsLinear builds a 100,000-task chain closed into a
// cycle: it is found and named from its start.
func TestJobCycleSearchIsLinear(t *testing.T) {
	n := 100_000
	tasks := make([]Task, n)
	for i := range tasks {
		tasks[i] = Task{ID: fmt.Sprintf("t%d", i), Depends: []string{fmt.Sprintf("t%d", (i+1)%n)}}
	}
	err := (&Job{ID: "big", Tasks: tasks}).Validate()
	if err == nil || !strings.Contains(err.Error(), "t0 → t1 → t2") {
		t.Fatalf("%.200v", err)
	}
}

func TestJobExpandShards(t *testing.T) {
	j := &Job{ID: "mr", Tasks: []Task{
		{ID: "map", Shards: 3, Env: map[string]string{"X": "1"}},
		{ID: "split", Inputs: []Input{{Name: "a.csv", Locality: &Locality{Nodes: []string{"n1"}}}, {Name: "b.csv", Locality: &Locality{Labels: map[string]string{"rack": "r2"}}}}},
		{ID: "reduce", Depends: []string{"map", "split"}},
	}, Gang: &Gang{MinMember: 2, Tasks: []string{"map"}}}
	if err := j.Expand(); err != nil {
		t.Fatal(err)
	}
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range j.Tasks {
		ids = append(ids, x.ID)
	}
	if got := strings.Join(ids, ","); got != "map-0,map-1,map-2,split-0,split-1,reduce" {
		t.Fatalf("ids %s", got)
	}
	if m := j.Tasks[1]; m.Env["HETSCHED_SHARD"] != "1" || m.Env["HETSCHED_SHARDS"] != "3" || m.Env["X"] != "1" {
		t.Fatalf("map-1 env %v", m.Env)
	}
	if s := j.Tasks[4]; s.Env["HETSCHED_INPUT"] != "b.csv" || s.Locality == nil || s.Locality.Labels["rack"] != "r2" {
		t.Fatalf("split-1 %+v", s)
	}
	if got := strings.Join(j.Tasks[5].Depends, ","); got != "map-0,map-1,map-2,split-0,split-1" {
		t.Fatalf("reduce depends on %s", got)
	}
	if got := strings.Join(j.Gang.Tasks, ","); got != "map-0,map-1,map-2" {
		t.Fatalf("gang %s", got)
	}
	for _, c := range []struct {
		j     *Job
		field string
	}{
		{&Job{ID: "j", Tasks: []Task{{ID: "a", Shards: 2, Inputs: []Input{{Name: "x"}}}}}, "tasks[0].shards"},
		{&Job{ID: "j", Tasks: []Task{{ID: "a", Shards: MaxShards + 1}}}, "tasks[0].shards"},
		{&Job{ID: "j", Tasks: []Task{{ID: "a", Inputs: []Input{{}}}}}, "tasks[0].inputs[0].name"},
		{&Job{ID: "j", Tasks: []Task{{Shards: 2}}}, "tasks[0].id"},
	} {
		if err := c.j.Expand(); errs.FieldOf(err) != c.field {
			t.Errorf("%+v: %v, want field %s", c.j.Tasks, err, c.field)
		}
	}
	// A standalone task may not be sharded; a bad locality names its field.
	if err := (&Task{Shards: 2}).Validate(); errs.FieldOf(err) != "shards" {
		t.Errorf("standalone shards: %v", err)
	}
	if err := (&Task{Locality: &Locality{Nodes: []string{"bad node"}}}).Validate(); errs.FieldOf(err) != "locality.nodes[0]" {
		t.Errorf("bad locality: %v", err)
	}
	if err := (&Job{ID: "j", Tasks: []Task{{ID: "a"}}, Gang: &Gang{MinMember: 1, Tasks: []string{"zz"}}}).Validate(); errs.FieldOf(err) != "gang.tasks[0]" {
		t.Errorf("unknown gang member: %v", err)
	}
}
