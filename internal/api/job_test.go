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
		{&Job{ID: "j", Tasks: []Task{dep("a")}, Retries: &Retries{Limit: -1}}, "retries.limit", ""},
		{&Job{ID: "bad id", Tasks: []Task{dep("a")}}, "id", ""},
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
