package engine

import (
	"context"
	"slices"
	"testing"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

// Slurm's dependency types across jobs and tasks, for a scoped tenant:
// a job waits on a task by afterok (its own depends), a task waits on
// the job by afternotok and another by afterany; the ids stay the
// tenant's own in what it reads, and the waits survive a restart.
func TestDependenciesAcrossJobsAndTasks(t *testing.T) {
	dir := t.TempDir()
	e, st := open(t, dir)
	ctx := context.Background()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	cpu := resource.List{resource.CPU: 100}
	const tenant = "team-a"
	submit := func(tasks ...api.Task) {
		t.Helper()
		_, perTask, err := e.Submit(ctx, tenant, tasks)
		if err != nil || perTask[0] != nil {
			t.Fatalf("submit %s: %v %v", tasks[0].ID, err, perTask)
		}
	}
	submit(api.Task{ID: "prep", Priority: prio(0), Resources: cpu, Command: []string{"true"}})
	jid, err := e.SubmitJob(ctx, tenant, api.Job{ID: "etl", Depends: []string{"afterok:prep"}, FailurePolicy: api.Continue,
		Tasks: []api.Task{{ID: "a", Resources: cpu, Command: []string{"true"}},
			{ID: "b", Resources: cpu, Command: []string{"true"}, Depends: []string{"afterany:a"}}}})
	if err != nil {
		t.Fatal(err)
	}
	submit(api.Task{ID: "alert", Resources: cpu, Command: []string{"true"}, Depends: []string{"afternotok:etl"}})
	submit(api.Task{ID: "report", Resources: cpu, Command: []string{"true"}, Depends: []string{"afterany:etl", "prep"}})
	qid := func(id string) string { return QualifyID(tenant, id) }
	state := func(id string) string {
		t.Helper()
		r, ok := e.Task(qid(id))
		if !ok {
			t.Fatalf("no task %s", id)
		}
		return r.State
	}
	for _, id := range []string{"etl.a", "etl.b", "alert", "report"} {
		if s := state(id); s != "blocked" {
			t.Fatalf("%s is %s, want blocked", id, s)
		}
	}
	r, _ := e.Task(qid("report"))
	if got := LocalRecord(tenant, r).Spec.Depends; !slices.Equal(got, []string{"afterany:etl", "prep"}) {
		t.Errorf("report's depends as the tenant reads them: %q", got)
	}
	if jid != qid("etl") {
		t.Fatalf("job id %q", jid)
	}
	// A restart keeps every wait.
	e.Close()
	st.Close()
	e, st = open(t, dir)
	defer st.Close()
	defer e.Close()
	if _, err := e.WaitPlaced(ctx, qid("prep")); err != nil {
		t.Fatal(err)
	}
	if err := e.Finished(ctx, qid("prep"), core.Result{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.WaitPlaced(ctx, qid("etl.a")); err != nil {
		t.Fatal(err)
	}
	if err := e.Finished(ctx, qid("etl.a"), core.Result{ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	if r, err := e.WaitPlaced(ctx, qid("etl.b")); err != nil || r.State != "scheduled" { // afterany: runs after a failure
		t.Fatalf("etl.b: %v %v", r, err)
	}
	if s := state("alert"); s != "blocked" {
		t.Fatalf("alert is %s before the job ended", s)
	}
	if err := e.Finished(ctx, qid("etl.b"), core.Result{}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"alert", "report"} { // the job failed: both run
		if r, err := e.WaitPlaced(ctx, qid(id)); err != nil || r.State != "scheduled" {
			t.Fatalf("%s: %v %v", id, r, err)
		}
	}
	// A dependency on another tenant's work is not found: ids are scoped.
	_, perTask, err := e.Submit(ctx, "team-b", []api.Task{{ID: "spy", Resources: cpu, Command: []string{"true"}, Depends: []string{"afterany:prep"}}})
	if err != nil || perTask[0] == nil {
		t.Fatalf("team-b depending on team-a's prep: %v %v", err, perTask)
	}
}
