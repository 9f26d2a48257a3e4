package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
)

// KindJob is the store kind of job records.
const KindJob = "job"

// JobRecord is a job as stored: its spec (task ids as submitted) and the
// ids its tasks got ("<job>.<task>").
type JobRecord struct {
	Spec      api.Job   `json:"spec"`
	Tenant    string    `json:"tenant"`
	TaskIDs   []string  `json:"taskIds"`
	Submitted time.Time `json:"submitted"`
	// Cancelled: the job was cancelled (its state is cancelled once no
	// task runs, whatever its skipped tasks say).
	Cancelled bool `json:"cancelled,omitempty"`
}

// jobBefore orders jobs by submission, then id.
func jobBefore(a, b *JobRecord) bool {
	if !a.Submitted.Equal(b.Submitted) {
		return a.Submitted.Before(b.Submitted)
	}
	return a.Spec.ID < b.Spec.ID
}

// State aggregates the job's task states (JobState), cancelled once the
// job was cancelled and nothing of it runs or waits.
func (j *JobRecord) State(states []string) string {
	s := JobState(states)
	if j.Cancelled && s != "running" && s != "pending" {
		return "cancelled"
	}
	return s
}

// JobTaskID is the id a job's task gets.
func JobTaskID(job, task string) string { return job + "." + task }

// JobMetadataKey is the metadata key naming a task's job.
const JobMetadataKey = "job"

// coreJob is what the core needs of a job (its tasks' ids are job.task).
func coreJob(j *api.Job) core.JobSpec {
	spec := core.JobSpec{ID: j.ID, FailFast: j.FailurePolicy != api.Continue}
	if r := j.Retries; r != nil {
		spec.RetryLimit, spec.RetryBackoff = r.Limit, time.Duration(r.Backoff)
	}
	if g := j.Gang; g != nil {
		gs := &core.GangSpec{MinMember: g.MinMember, Timeout: time.Duration(g.Timeout), Topology: g.Topology,
			RequiredTopology: g.RequiredTopology, MixedModels: g.SameModel != nil && !*g.SameModel,
			EvictMembers: g.Disruption == api.DisruptMember}
		members := g.Tasks
		if members == nil {
			for _, t := range j.Tasks {
				members = append(members, t.ID)
			}
		}
		for _, m := range members {
			gs.Members = append(gs.Members, JobTaskID(j.ID, m))
		}
		spec.Gang = gs
	}
	return spec
}

// jobCommands are the jobs' commands (submit, cancel) and the job
// events of a step (jobChanges). The Engine embeds it.
type jobCommands struct {
	e *Engine
}

// submitJob admits a whole job in one step: validated first, tasks
// submitted dependencies first, all committed together.
func (jc *jobCommands) submitJob(tenant string, j *api.Job, now time.Time) (string, error) {
	e := jc.e
	if j.ID == "" {
		for {
			e.seq++
			id := "j" + strconv.FormatUint(e.seq, 36)
			if e.staged.jobView(QualifyID(tenant, id)) == nil {
				j.ID = id
				break
			}
		}
	}
	if err := j.Expand(); err != nil {
		return "", err
	}
	for i := range j.Tasks {
		e.defaultLease(&j.Tasks[i])
	}
	if err := j.Validate(); err != nil {
		return "", err
	}
	for i := range j.Tasks {
		if j.Tasks[i].Service != "" {
			return "", errs.Prefix(fmt.Sprintf("tasks[%d]", i), errNotReplica())
		}
	}
	if scoped(tenant) {
		if len(j.ID)+len(tenant)+len(TenantSep) > api.MaxIDLen {
			return "", errs.Invalid("id", "at most %d characters for tenant %s's jobs", api.MaxIDLen-len(tenant)-len(TenantSep), tenant)
		}
		j.ID = QualifyID(tenant, j.ID)
		j.Depends = qualifyDepends(tenant, j.Depends)
	}
	if old := e.staged.jobView(j.ID); old != nil {
		a, _ := json.Marshal(old.Spec)
		b, _ := json.Marshal(j)
		if old.Tenant == tenant && bytes.Equal(a, b) {
			return j.ID, nil
		}
		return "", errs.New(errs.Conflict, "id", "job %q exists with a different spec", j.ID)
	}
	for i, t := range j.Tasks {
		if e.staged.current(JobTaskID(j.ID, t.ID)) != nil {
			return "", errs.New(errs.Conflict, fmt.Sprintf("tasks[%d].id", i), "task %q exists", JobTaskID(j.ID, t.ID))
		}
		if len(JobTaskID(j.ID, t.ID)) > api.MaxIDLen {
			return "", errs.Invalid(fmt.Sprintf("tasks[%d].id", i), "job id and task id together exceed %d characters", api.MaxIDLen)
		}
	}
	order := topoOrder(j.Tasks)
	rec := &JobRecord{Spec: *j, Tenant: tenant, Submitted: now}
	if err := e.c.AddJob(now, coreJob(j)); err != nil {
		return "", err
	}
	for _, i := range order {
		spec := j.Tasks[i] // a copy: the job keeps the ids as submitted
		spec.ID = JobTaskID(j.ID, spec.ID)
		spec.Depends = make([]string, 0, len(j.Tasks[i].Depends)+len(j.Depends))
		for _, d := range j.Tasks[i].Depends {
			spec.Depends = append(spec.Depends, api.WithDependencyID(d, JobTaskID(j.ID, api.DependencyID(d))))
		}
		spec.Depends = append(spec.Depends, j.Depends...) // qualified with the job's id
		if spec.Queue == "" {
			spec.Queue = j.Queue
		}
		spec.User = j.User
		if spec.Priority == nil {
			spec.Priority = j.Priority
		}
		if spec.Metadata == nil {
			spec.Metadata = map[string]string{}
		} else {
			m := make(map[string]string, len(spec.Metadata)+1)
			for k, v := range spec.Metadata {
				m[k] = v
			}
			spec.Metadata = m
		}
		spec.Metadata[JobMetadataKey] = j.ID
		spec.Metadata = tenantLabels(tenant, spec.Metadata)
		if _, err := e.submit(tenant, &spec, nil, false, now, j.ID); err != nil {
			// Validated above, so this is rare (a core limit): cancel what
			// was admitted so the job is not half there.
			for _, id := range rec.TaskIDs {
				_ = e.c.Cancel(now, id, "job "+j.ID+" rejected")
			}
			return "", errs.Prefix(fmt.Sprintf("tasks[%d]", i), err)
		}
		rec.TaskIDs = append(rec.TaskIDs, spec.ID)
	}
	e.staged.jobs[j.ID] = rec
	return j.ID, nil
}

// topoOrder returns task indexes with every task after its dependencies
// (Kahn's algorithm; the job was checked acyclic).
func topoOrder(tasks []api.Task) []int {
	index := make(map[string]int, len(tasks))
	for i, t := range tasks {
		index[t.ID] = i
	}
	indeg := make([]int, len(tasks))
	users := make([][]int, len(tasks))
	for i, t := range tasks {
		for _, d := range t.Depends {
			indeg[i]++
			users[index[api.DependencyID(d)]] = append(users[index[api.DependencyID(d)]], i)
		}
	}
	order := make([]int, 0, len(tasks))
	for i := range tasks {
		if indeg[i] == 0 {
			order = append(order, i)
		}
	}
	for k := 0; k < len(order); k++ {
		for _, u := range users[order[k]] {
			if indeg[u]--; indeg[u] == 0 {
				order = append(order, u)
			}
		}
	}
	return order
}

// cancelJob cancels every unfinished task of a job.
func (jc *jobCommands) cancelJob(id string, now time.Time) error {
	e := jc.e
	j := e.staged.jobView(id)
	if j == nil {
		return errs.New(errs.NotFound, "id", "no job %q", id)
	}
	if st := e.jobStateNow(j); st != "pending" && st != "running" {
		// Final, as a finished task is: its state is not rewritten.
		return errs.New(errs.Conflict, "id", "job %q is already %s", id, st)
	}
	for _, tid := range j.TaskIDs {
		if t, ok := e.c.Task(tid); ok && !t.State().Terminal() {
			if err := e.c.Cancel(now, tid, "job "+id+" cancelled"); err != nil {
				return err
			}
		}
	}
	if !j.Cancelled {
		cp := *j
		cp.Cancelled = true
		e.staged.jobs[id] = &cp
	}
	return nil
}

// JobFilter selects jobs to list; empty fields match any.
type JobFilter struct {
	State, Queue, Tenant string
}

// JobEntry is a listed job with its tasks' records (do not modify them).
type JobEntry struct {
	Job   *JobRecord
	Tasks []*TaskRecord
	State string
}

// submitJobCmd admits a job.
type submitJobCmd struct {
	answer
	tenant string
	job    *api.Job
	id     string // the job's id (result)
}

func (c *submitJobCmd) run(e *Engine, now time.Time) { c.id, c.err = e.submitJob(c.tenant, c.job, now) }

// SubmitJob admits a job owned by tenant; nil means it is durable.
func (jc *jobCommands) SubmitJob(ctx context.Context, tenant string, j api.Job) (string, error) {
	e := jc.e
	if err := e.roomForWork(jobSize(&j)); err != nil {
		return "", err
	}
	cmd := &submitJobCmd{tenant: tenant, job: &j}
	if err := e.do(ctx, cmd); err != nil {
		return "", err
	}
	return cmd.id, nil
}

// cancelJobCmd cancels a job's unfinished tasks.
type cancelJobCmd struct {
	answer
	id string
}

func (c *cancelJobCmd) run(e *Engine, now time.Time) { c.err = e.cancelJob(c.id, now) }

// CancelJob cancels a job's unfinished tasks.
func (jc *jobCommands) CancelJob(ctx context.Context, id string) error {
	e := jc.e
	return e.do(ctx, &cancelJobCmd{id: id})
}

// JobState aggregates a job's task states: running while any task is
// placed, pending while any waits, then failed if any ended badly,
// cancelled if all were cancelled, else succeeded.
func JobState(states []string) string {
	var active, waiting, bad, cancelled, done int
	for _, s := range states {
		st, _ := core.ParseState(s)
		switch st {
		case core.Scheduled, core.Running:
			active++
		case core.Pending, core.Blocked:
			waiting++
		case core.Succeeded:
			done++
		case core.Cancelled:
			cancelled++
		default:
			bad++
		}
	}
	switch {
	case active > 0:
		return "running"
	case waiting > 0:
		return "pending"
	case bad > 0:
		return "failed"
	case cancelled == len(states):
		return "cancelled"
	case cancelled > 0 && done == 0:
		return "cancelled"
	default:
		return "succeeded"
	}
}

// jobChanges are the events of the jobs whose state the staged records
// change (each job's state is worked out once per step, over its tasks).
// Runs on the loop, before the commit.
func (jc *jobCommands) jobChanges(now time.Time) []Event {
	e := jc.e
	var touched map[string]bool
	for _, r := range e.staged.tasks {
		if j := r.Spec.Metadata[JobMetadataKey]; j != "" {
			if touched == nil {
				touched = map[string]bool{}
			}
			touched[j] = true
		}
	}
	for id := range e.staged.jobs {
		if touched == nil {
			touched = map[string]bool{}
		}
		touched[id] = true
	}
	var out []Event
	for id := range touched {
		j := e.staged.jobView(id)
		if j == nil {
			continue
		}
		st := e.jobStateNow(j)
		if st != e.jobLast[id] {
			out = append(out, Event{Kind: "job", ID: id, State: st, Time: now, Tenant: j.Tenant})
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// jobStateNow is j's state from the loop's latest task records.
func (jc *jobCommands) jobStateNow(j *JobRecord) string {
	e := jc.e
	states := make([]string, 0, len(j.TaskIDs))
	for _, tid := range j.TaskIDs {
		if r := e.staged.current(tid); r != nil {
			states = append(states, r.State)
		}
	}
	return j.State(states)
}

// jobSize estimates the bytes of j's records (its tasks' specs and
// theirs), for the disk's room (roomForWork): the tasks' JSON, which is
// what a spec is encoded from, plus each record's overhead.
func jobSize(j *api.Job) int64 {
	n := int64(recordOverhead)
	for i := range j.Tasks {
		if b, err := json.Marshal(&j.Tasks[i]); err == nil {
			n += int64(len(b))
		}
		n += recordOverhead
	}
	return n
}
