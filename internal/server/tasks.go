package server

import (
	"bytes"
	"context"
	"strings"

	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
)

// taskView is the API's task object: the spec plus its state.
type taskView struct {
	api.Task
	State     string          `json:"state"`
	Node      string          `json:"node,omitempty"`
	Devices   []api.DeviceRef `json:"devices,omitempty"`
	Chosen    int             `json:"chosen"`
	Attempt   int             `json:"attempt"`
	ExitCode  *int            `json:"exitCode,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	Submitted time.Time       `json:"submitted"`
	Scheduled *time.Time      `json:"scheduled,omitempty"`
	Started   *time.Time      `json:"started,omitempty"`
	Finished  *time.Time      `json:"finished,omitempty"`
	// Attempts are the earlier attempts, oldest first (the fields above
	// are the current one's).
	Attempts []engine.Attempt `json:"attempts,omitempty"`
	// Restarts counts the earlier attempts that started (the command's
	// HETSCHED_RESTART_COUNT); Preemption is what preemption cost it.
	Restarts   int                    `json:"restarts,omitempty"`
	Preemption *engine.PreemptionCost `json:"preemption,omitempty"`
	// Trace is the traceparent a traced task's life continues.
	Trace string `json:"trace,omitempty"`
}

func view(r *engine.TaskRecord) taskView {
	return taskView{Task: r.Spec, State: r.State, Node: r.Node, Devices: r.Devices, Chosen: r.Chosen,
		Attempt: r.Attempt, ExitCode: r.ExitCode, Reason: r.Reason, Submitted: r.Submitted,
		Scheduled: r.Scheduled, Started: r.Started, Finished: r.Finished, Attempts: r.Attempts, Restarts: r.Restarts, Preemption: r.Preemption, Trace: r.Trace}
}

// submitTasks decodes the body and submits; it returns the durable ids
// in order and whether the body was a batch, or writes the first error.
// The caller must call leave when it has answered (the request holds its
// place in admission until then) unless ok is false.
func (s *Server) submitTasks(w http.ResponseWriter, r *http.Request) (ids []string, batch bool, leave func(), ok bool) {
	b, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return nil, false, nil, false
	}
	tasks, batch, err := decodeTasks(b)
	if err != nil {
		writeError(w, err)
		return nil, false, nil, false
	}
	tier := tierOf(tasks)
	if err := s.adm.enter(tier); err != nil {
		if s.metrics != nil {
			s.metrics.Shed.WithLabelValues(api.TierNames[tier]).Inc()
		}
		writeError(w, err)
		return nil, false, nil, false
	}
	ids, batch, ok = s.admitTasks(w, r, tasks, batch)
	if !ok {
		s.adm.leave()
		return nil, false, nil, false
	}
	return ids, batch, s.adm.leave, true
}

// admitTasks submits decoded tasks on behalf of the request's tenant.
func (s *Server) admitTasks(w http.ResponseWriter, r *http.Request, tasks []api.Task, batch bool) ([]string, bool, bool) {
	p := principalOf(w, r)
	tenant := p.owner()
	for i := range tasks {
		u, err := p.userOf(tasks[i].User)
		if err != nil {
			if batch {
				err = errs.Prefix("tasks["+strconv.Itoa(i)+"]", err)
			}
			writeError(w, err)
			return nil, false, false
		}
		tasks[i].User = u
	}
	ids, perTask, err := s.eng.Submit(r.Context(), tenant, tasks)
	if err != nil {
		writeError(w, err)
		return nil, false, false
	}
	for i, e := range perTask {
		if e != nil {
			e = engine.LocalError(p.scope(), e)
			if batch {
				e = errs.Prefix("tasks["+strconv.Itoa(i)+"]", e)
			}
			writeError(w, e)
			return nil, false, false
		}
	}
	return ids, batch, true
}

// submit is POST /api/v1/tasks: 201 once durable, with the task (one) or
// the ids in order (a batch: {"ids": [...]}, as API.md says).
func (s *Server) submit(w http.ResponseWriter, r *http.Request) {
	ids, batch, leave, ok := s.submitTasks(w, r)
	if !ok {
		return
	}
	defer leave()
	scope := principalOf(w, r).scope()
	if batch {
		writeJSON(w, http.StatusCreated, map[string]any{"ids": engine.LocalIDs(scope, ids)})
		return
	}
	rec, _ := s.eng.Task(ids[0]) // durable, so published
	writeTask(w, http.StatusCreated, engine.LocalRecord(scope, rec))
}

// listTasks is GET /api/v1/tasks?state=&queue=&node=&user=&job=&limit=&cursor=.
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := principalOf(w, r)
	f := engine.Filter{State: q.Get("state"), Queue: q.Get("queue"), Node: q.Get("node"), User: q.Get("user")}
	if p.Role != RoleAdmin {
		f.Tenant = p.Tenant
	}
	if f.State != "" {
		// One state, or several: pending,running (squeue -t PD,R).
		for _, st := range strings.Split(f.State, ",") {
			if _, ok := core.ParseState(st); !ok {
				writeError(w, errs.Invalid("state", "unknown state %q", st))
				return
			}
			f.States = append(f.States, st)
		}
	}
	var err error
	if f.Selector, err = selectorOf(q); err != nil {
		writeError(w, err)
		return
	}
	switch o := q.Get("order"); o {
	case "", "oldest":
	case "newest":
		f.Newest = true
	default:
		writeError(w, errs.Invalid("order", "must be oldest (submission order, the default) or newest, got %q", o))
		return
	}
	if job := q.Get("job"); job != "" {
		f.Job = p.qualify(job)
		if j, _, ok := s.eng.Job(f.Job); !ok || !p.sees(j.Tenant) {
			writeError(w, errs.New(errs.NotFound, "job", "no job %q", job))
			return
		}
	}
	if svc := q.Get("service"); svc != "" {
		if f.Job != "" {
			writeError(w, errs.Invalid("service", "list a job's tasks or a service's replicas, not both"))
			return
		}
		f.Service = p.qualify(svc)
		if rec, ok := s.eng.Service(f.Service); !ok || !p.sees(rec.Tenant) {
			writeError(w, errs.New(errs.NotFound, "service", "no service %q", svc))
			return
		}
	}
	limit, cursor, err := pageOf(q)
	if err != nil {
		writeError(w, err)
		return
	}
	recs, next := s.eng.List(f, cursor, limit)
	views := make([]taskView, len(recs))
	for i, rec := range recs {
		views[i] = view(engine.LocalRecord(p.scope(), rec))
	}
	body := map[string]any{"tasks": views}
	if next > 0 {
		body["cursor"] = strconv.Itoa(next)
	}
	writeJSON(w, http.StatusOK, body)
}

// selectorOf reads a listing's label selector (selector=).
func selectorOf(q url.Values) (api.Selector, error) {
	sel, err := api.ParseSelector(q.Get("selector"))
	if err != nil {
		return api.Selector{}, errs.Invalid("selector", "%v", err)
	}
	return sel, nil
}

// pageOf reads a listing's limit (1..10000, default 100) and cursor.
func pageOf(q url.Values) (limit, cursor int, err error) {
	if limit, err = pageLimit(q); err != nil {
		return 0, 0, err
	}
	if v := q.Get("cursor"); v != "" {
		if cursor, err = strconv.Atoi(v); err != nil || cursor < 0 {
			return 0, 0, errs.Invalid("cursor", "not a cursor from a previous page: %q", v)
		}
	}
	return limit, cursor, nil
}

// pageLimit reads ?limit= (1..10000, default 100).
func pageLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return 100, nil
	}
	limit, err := strconv.Atoi(v)
	if err != nil || limit < 1 || limit > 10000 {
		return 0, errs.Invalid("limit", "must be 1..10000, got %q", errs.Clip(v))
	}
	return limit, nil
}

// owned returns the task named in the path if the caller may see it; a
// task of another tenant is "not found", so ids of others do not leak.
func (s *Server) owned(w http.ResponseWriter, r *http.Request) (*engine.TaskRecord, bool) {
	id := r.PathValue("id")
	p := principalOf(w, r)
	rec, ok := s.eng.Task(p.qualify(id))
	if !ok || !p.sees(rec.Tenant) {
		writeError(w, errs.New(errs.NotFound, "id", "no task %q", id))
		return nil, false
	}
	return rec, true
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.owned(w, r)
	if !ok {
		return
	}
	view := engine.LocalRecord(principalOf(w, r).scope(), rec)
	if rec.State != "pending" || r.Method != http.MethodGet {
		writeTask(w, http.StatusOK, view)
		return
	}
	// A pending task's view says where it stands (the loop's answer,
	// bounded: without it in time the view goes out without it).
	ctx, cancel := context.WithTimeout(r.Context(), queueInfoTimeout)
	info, ok, err := s.eng.QueueInfo(ctx, rec.Spec.ID)
	cancel()
	if err != nil || !ok {
		writeTask(w, http.StatusOK, view)
		return
	}
	writeTaskQueueing(w, view, &info)
}

// queueInfoTimeout bounds the wait for a pending task's queue position.
const queueInfoTimeout = time.Second

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.owned(w, r)
	if !ok {
		return
	}
	id := rec.Spec.ID
	if err := s.eng.Cancel(r.Context(), id); err != nil {
		writeError(w, err)
		return
	}
	s.getTask(w, r)
}

// complete is POST /tasks/{id}/complete {"exitCode":0} from a lease holder.
func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ExitCode int
		Reason   string
	}
	b, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	if len(bytes.TrimSpace(b)) > 0 {
		if body.ExitCode, body.Reason, err = decodeCompletion(b); err != nil {
			writeError(w, err)
			return
		}
	}
	if len(body.Reason) > 4096 {
		writeError(w, errs.Invalid("reason", "at most 4096 bytes"))
		return
	}
	rec, ok := s.owned(w, r)
	if !ok {
		return
	}
	if len(rec.Spec.Command) > 0 {
		writeError(w, errs.New(errs.Conflict, "id", "task %q runs a command: only the agent running it reports how it ended (cancel it with DELETE)", r.PathValue("id")))
		return
	}
	if err := s.eng.Finished(r.Context(), rec.Spec.ID, core.Result{ExitCode: body.ExitCode, Reason: body.Reason}); err != nil {
		writeError(w, err)
		return
	}
	s.getTask(w, r)
}

func (s *Server) renew(w http.ResponseWriter, r *http.Request) {
	rec, ok := s.owned(w, r)
	if !ok {
		return
	}
	if err := s.eng.Renew(r.Context(), rec.Spec.ID); err != nil {
		writeError(w, err)
		return
	}
	s.getTask(w, r)
}
