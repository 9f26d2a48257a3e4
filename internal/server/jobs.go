package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
)

// jobView is the API's job object: the spec, the aggregated state and the
// tasks (ids "<job>.<task>").
type jobView struct {
	api.Job
	State     string         `json:"state"`
	Counts    map[string]int `json:"counts"` // tasks per state
	Submitted time.Time      `json:"submitted"`
	Tasks     []taskView     `json:"tasks,omitempty"`
}

// writeJob answers with the job of engine id id (the caller's, checked).
func (s *Server) writeJob(w http.ResponseWriter, r *http.Request, status int, id string) {
	p := principalOf(w, r)
	j, tasks, ok := s.eng.Job(id)
	if !ok || !p.sees(j.Tenant) {
		writeError(w, errs.New(errs.NotFound, "id", "no job %q", engine.LocalID(p.scope(), id)))
		return
	}
	withTasks := r.URL.Query().Get("tasks") != "false" // ?tasks=false: counts only (big jobs)
	writeJSON(w, status, jobViewOf(p.scope(), j, tasks, withTasks))
}

// jobViewOf is j as a caller of scope sees it, with its tasks' views when
// withTasks (else only their counts).
func jobViewOf(scope string, j *engine.JobRecord, tasks []*engine.TaskRecord, withTasks bool) jobView {
	v := jobView{Job: j.Spec, Submitted: j.Submitted, Counts: map[string]int{}}
	v.Job.Tasks = nil
	v.Job.ID = engine.LocalID(scope, j.Spec.ID)
	states := make([]string, len(tasks))
	for i, t := range tasks {
		if withTasks {
			v.Tasks = append(v.Tasks, view(engine.LocalRecord(scope, t)))
		}
		states[i] = t.State
		v.Counts[t.State]++
	}
	v.State = j.State(states)
	return v
}

// jobStates are the states a job can be in (JobRecord.State).
var jobStates = map[string]bool{"pending": true, "running": true, "succeeded": true, "failed": true, "cancelled": true}

// listJobs is GET /api/v1/jobs?state=&queue=&limit=&cursor=: jobs in
// submission order with their task counts ({"jobs":[...],"cursor":"N"}).
func (s *Server) listJobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := principalOf(w, r)
	f := engine.JobFilter{State: q.Get("state"), Queue: q.Get("queue")}
	if p.Role != RoleAdmin {
		f.Tenant = p.Tenant
	}
	if f.State != "" && !jobStates[f.State] {
		writeError(w, errs.Invalid("state", "must be pending, running, succeeded, failed or cancelled, got %q", f.State))
		return
	}
	limit, cursor, err := pageOf(q)
	if err != nil {
		writeError(w, err)
		return
	}
	entries, next := s.eng.ListJobs(f, cursor, limit)
	views := make([]jobView, len(entries))
	for i, e := range entries {
		views[i] = jobViewOf(p.scope(), e.Job, e.Tasks, false)
	}
	body := map[string]any{"jobs": views}
	if next > 0 {
		body["cursor"] = strconv.Itoa(next)
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) submitJob(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	j, err := decodeJob(b)
	if err != nil {
		writeError(w, err)
		return
	}
	p := principalOf(w, r)
	tenant := p.owner()
	if j.User, err = p.userOf(j.User); err != nil {
		writeError(w, err)
		return
	}
	for i := range j.Tasks {
		if j.Tasks[i].User != "" && j.Tasks[i].User != j.User {
			writeError(w, errs.Invalid(fmt.Sprintf("tasks[%d].user", i), "a job's tasks are its user's (%q); name the user once, on the job", j.User))
			return
		}
	}
	id, err := s.eng.SubmitJob(r.Context(), tenant, j)
	if err != nil {
		writeError(w, engine.LocalError(principalOf(w, r).scope(), err))
		return
	}
	s.writeJob(w, r, http.StatusCreated, id)
}

func (s *Server) getJob(w http.ResponseWriter, r *http.Request) {
	s.writeJob(w, r, http.StatusOK, principalOf(w, r).qualify(r.PathValue("id")))
}

func (s *Server) cancelJob(w http.ResponseWriter, r *http.Request) {
	p := principalOf(w, r)
	id := p.qualify(r.PathValue("id"))
	if j, _, ok := s.eng.Job(id); !ok || !p.sees(j.Tenant) {
		writeError(w, errs.New(errs.NotFound, "id", "no job %q", r.PathValue("id")))
		return
	}
	if err := s.eng.CancelJob(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	s.writeJob(w, r, http.StatusOK, id)
}
