// Package server is hetsched's HTTP API (../shared/API.md) on top of the
// engine. Handlers decode and validate, hand commands to the engine (which
// owns the single-threaded core) and write JSON; every error is written by
// writeError with the code and field of the one error taxonomy.
package server

import (
	"bytes"

	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/metrics"
)

// Server serves the API.
type Server struct {
	eng     *engine.Engine
	log     *slog.Logger
	policy  string
	mux     *http.ServeMux
	metrics *metrics.Metrics
	auth    *Auth
	closing chan struct{} // closed by Close: long-lived streams end
	once    sync.Once
	// logClient fetches task logs from agents.
	logClient *http.Client
	// adm sheds submissions past capacity (admission.go).
	adm admission
	// expiry ends the waits of schedule requests (expiry.go).
	expiry expiry
	// browser refuses what a web page could send (browser.go).
	browser *browserGuard
	// streams caps the open event streams; streamWrite bounds one write
	// to a stream (limits.go).
	streams     *streamSlots
	streamWrite time.Duration
}

// Close ends long-lived streams (events) so that a graceful shutdown does
// not wait for them.
func (s *Server) Close() { s.once.Do(func() { close(s.closing) }) }

// New builds the handler tree. reg serves /metrics (nil: no metrics).
// auth nil means authentication is off (everything is tenant "default").
func New(eng *engine.Engine, policy string, log *slog.Logger, reg *prometheus.Registry, m *metrics.Metrics, auth *Auth) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{eng: eng, log: log, policy: policy, mux: http.NewServeMux(), metrics: m, auth: auth, closing: make(chan struct{}),
		browser: newBrowserGuard(auth == nil, "", nil),
		streams: newStreamSlots(DefaultMaxEventStreams, DefaultMaxEventStreamsPerTenant, m), streamWrite: StreamWriteTimeout,
		logClient: &http.Client{Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			ResponseHeaderTimeout: 10 * time.Second,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       time.Minute,
		}}}
	s.routes()
	if reg != nil {
		// With tokens, only admins and metrics tokens read the metrics:
		// they name every queue and count its work. --metrics-listen
		// serves them without a token on an address of the operator's.
		s.mux.HandleFunc("GET /metrics", s.guard(MetricsHandler(reg, log).ServeHTTP, RoleMetrics))
	}
	return s
}

// routes registers every route; Routes lists them.
func (s *Server) routes() {
	for _, r := range s.table() {
		s.mux.HandleFunc(r.pattern, r.h)
	}
	s.mux.HandleFunc("/", s.noRoute)
}

// Routes lists every API route as "METHOD /path" (the OpenAPI test
// compares it with docs/openapi.yaml), /metrics included.
func (s *Server) Routes() []string {
	out := []string{"GET /metrics"}
	for _, r := range s.table() {
		out = append(out, r.pattern)
	}
	return out
}

type route struct {
	pattern string
	h       http.HandlerFunc
}

func (s *Server) table() []route {
	return []route{
		{"POST /api/v1/schedule", s.guard(s.schedule, RoleTenant)},
		{"POST /api/v1/tasks", s.guard(s.submit, RoleTenant)},
		{"GET /api/v1/tasks", s.guard(s.listTasks, RoleTenant)},
		{"GET /api/v1/tasks/{id}", s.guard(s.getTask, RoleTenant)},
		{"DELETE /api/v1/tasks/{id}", s.guard(s.cancel, RoleTenant)},
		{"POST /api/v1/tasks/{id}/complete", s.guard(s.complete, RoleTenant)},
		{"POST /api/v1/tasks/{id}/renew", s.guard(s.renew, RoleTenant)},
		{"GET /api/v1/tasks/{id}/logs", s.guard(s.logs, RoleTenant)},
		{"GET /api/v1/nodes", s.guard(s.listNodes, RoleTenant, RoleAgent)},
		{"GET /api/v1/nodes/{name}", s.guard(s.getNode, RoleTenant, RoleAgent)},
		{"PUT /api/v1/nodes/{name}", s.guard(s.putNode)},
		{"POST /api/v1/agents/register", s.guard(s.agentRegister, RoleAgent)},
		{"POST /api/v1/agents/{agent}/heartbeat", s.guard(s.agentHeartbeat, RoleAgent)},
		{"GET /api/v1/agents/{agent}/assignments", s.guard(s.agentAssignments, RoleAgent)},
		{"POST /api/v1/agents/{agent}/status", s.guard(s.agentStatus, RoleAgent)},
		{"GET /api/v1/cluster", s.guard(s.cluster, RoleTenant)},
		{"GET /api/v1/events", s.guard(s.events, RoleTenant, RoleAgent)},
		{"POST /api/v1/jobs", s.guard(s.submitJob, RoleTenant)},
		{"GET /api/v1/jobs", s.guard(s.listJobs, RoleTenant)},
		{"GET /api/v1/jobs/{id}", s.guard(s.getJob, RoleTenant)},
		{"DELETE /api/v1/jobs/{id}", s.guard(s.cancelJob, RoleTenant)},
		{"GET /api/v1/queues", s.guard(s.listQueues, RoleTenant)},
		{"PUT /api/v1/queues/{name}", s.guard(s.putQueue, RoleTenant)},
		{"POST /api/v1/nodes/{name}/cordon", s.guard(s.nodeState(api.NodeCordoned))},
		{"POST /api/v1/nodes/{name}/uncordon", s.guard(s.nodeState(api.NodeReady))},
		{"POST /api/v1/nodes/{name}/drain", s.guard(s.nodeState(api.NodeDraining))},
		{"POST /api/v1/nodes/{name}/release", s.guard(s.releaseNode)},
		{"GET /healthz", s.healthz},
		{"GET /readyz", s.readyz},
	}
}

// ServeHTTP implements http.Handler; a panic in a handler becomes a 500
// with the internal code, logged.
//
// A schedule request whose tasks are not placed yet is finished here, in
// steps: continueSchedule (which may answer) and park (which waits for the
// next change). While it waits, its goroutine's stack holds net/http's
// frames, this one's, park's and the runtime's select, under a quarter of
// 8 KiB: the garbage collector then halves the stack to 4 KiB, which a
// deeper waiting stack (the handler's own frames) prevented. At a million
// waiting HTTP/2 streams that is 4 GiB (TestWaitingStackShrinks).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK, start: time.Now()}
	if s.browser.cors(sw, r) {
		return // a preflight of an allowed origin, answered
	}
	if err := s.browser.check(r); err != nil {
		s.refuse(sw, r, err)
		return
	}
	if !canonicalPath(r.URL.Path) {
		// The mux would redirect (an HTML 307); every answer is JSON.
		writeError(sw, errs.New(errs.NotFound, "", "no route %s %s: the path is not in canonical form (no '.', '..' or '//' segments)", r.Method, r.URL.Path))
		return
	}
	s.serve(sw, r)
	s.finishWaits(sw, r)
}

// finishWaits answers a schedule request left waiting in sw.then, parking
// in this shallow frame between checks (so the stack stays small).
func (s *Server) finishWaits(sw *statusWriter, r *http.Request) {
	for sw.then != nil {
		changed := s.continueSchedule(sw, r)
		if changed == nil {
			return
		}
		s.park(sw.then, changed, r)
	}
}

// serve runs the route's handler.
func (s *Server) serve(sw *statusWriter, r *http.Request) {
	defer s.finish(sw, r)
	s.mux.ServeHTTP(sw, r)
}

// finish turns a handler's panic into a 500 and, once the request is
// answered (not left waiting in sw.then), records its duration.
func (s *Server) finish(sw *statusWriter, r *http.Request) {
	if p := recover(); p != nil {
		s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", p)
		writeError(sw, errs.New(errs.Internal, "", "internal error"))
		if sw.then != nil {
			sw.then.leave()
			sw.then = nil
		}
	}
	if sw.then != nil || s.metrics == nil {
		return
	}
	route := r.Pattern // set by the mux on r itself
	if route == "" || route == "/" {
		route = "unmatched"
	}
	s.metrics.APIDuration.WithLabelValues(route, strconv.Itoa(sw.code)).Observe(time.Since(sw.start).Seconds())
}

// statusWriter remembers the status code written. It also carries the
// request's principal (set by guard: a request copy with a context value
// per request cost more) and a schedule request's wait (see schedule).
type statusWriter struct {
	http.ResponseWriter
	code      int
	start     time.Time
	principal Principal
	authed    bool
	then      *pendingSchedule
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type errorBody struct {
	Error struct {
		Code    errs.Code `json:"code"`
		Message string    `json:"message"`
		Field   string    `json:"field,omitempty"`
	} `json:"error"`
}

// maxErrorMessage bounds an error body's message: errs.New already clips
// the values it quotes, and this catches a cause's text (Wrap) that quotes
// more.
const maxErrorMessage = 1024

// writeError writes err as API.md's error body with its status.
func writeError(w http.ResponseWriter, err error) {
	var body errorBody
	body.Error.Code = errs.CodeOf(err)
	body.Error.Field = errs.ClipTo(errs.FieldOf(err), errs.MaxEcho) // a field path may hold a client's key
	body.Error.Message = err.Error()
	if len(body.Error.Message) > maxErrorMessage {
		body.Error.Message = errs.ClipTo(body.Error.Message, maxErrorMessage)
	}
	switch body.Error.Code {
	case errs.RateLimited, errs.Unavailable:
		w.Header().Set("Retry-After", "1")
	case errs.InsufficientStorage:
		w.Header().Set("Retry-After", "30") // space is freed by a person or a compaction, not in a second
	}
	writeJSON(w, errs.HTTPStatus(body.Error.Code), body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v) // the client may have gone; nothing to do then
}

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
}

func view(r *engine.TaskRecord) taskView {
	return taskView{Task: r.Spec, State: r.State, Node: r.Node, Devices: r.Devices, Chosen: r.Chosen,
		Attempt: r.Attempt, ExitCode: r.ExitCode, Reason: r.Reason, Submitted: r.Submitted,
		Scheduled: r.Scheduled, Started: r.Started, Finished: r.Finished, Attempts: r.Attempts}
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
	tenant := p.Tenant
	if tenant == "" {
		tenant = DefaultTenant // admins submit as the default tenant
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

// schedule is POST /api/v1/schedule?wait=2s: 200 when every task is
// placed (or finished), 202 with those still pending when wait runs out.
// Once the tasks are durable, ServeHTTP waits for their placements and
// answers (statusWriter.then).
func (s *Server) schedule(w http.ResponseWriter, r *http.Request) {
	wait := 2 * time.Second
	if v := queryGet(r.URL.RawQuery, "wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 10*time.Minute {
			writeError(w, errs.Invalid("wait", "must be a duration from 0 to 10m, got %q", v))
			return
		}
		wait = d
	}
	ids, batch, leave, ok := s.submitTasks(w, r)
	if !ok {
		return
	}
	p := &pendingSchedule{ids: ids, batch: batch, leave: leave, wait: wait, deadline: s.expiry.deadline(wait), status: http.StatusOK}
	if len(ids) == 1 {
		p.recs = p.one[:]
	} else {
		p.recs = make([]*engine.TaskRecord, len(ids))
	}
	if sw, ok := w.(*statusWriter); ok && sw.then == nil {
		sw.then = p
		return
	}
	// Not under ServeHTTP (a handler called directly): finish here.
	s.finishWaits(&statusWriter{ResponseWriter: w, code: http.StatusOK, start: time.Now(), then: p}, r)
}

// pendingSchedule is a schedule request whose tasks are durable, waiting
// for their placements until deadline.
type pendingSchedule struct {
	ids      []string
	batch    bool
	leave    func() // admission: the request's place, held until answered
	wait     time.Duration
	deadline time.Duration // on the expiry clock
	expired  <-chan struct{}
	over     bool // the wait is over (deadline, client gone): answer with what is there
	stopped  bool // the engine stopped
	next     int  // ids[:next] are answered in recs
	recs     []*engine.TaskRecord
	one      [1]*engine.TaskRecord
	status   int
}

// continueSchedule answers sw's pending schedule if it can (every task
// placed, or the wait over) and returns nil, or returns the channel that
// closes at the next change of the task it waits for.
func (s *Server) continueSchedule(sw *statusWriter, r *http.Request) <-chan struct{} {
	defer s.finish(sw, r)
	p := sw.then
	if p.stopped {
		writeError(sw, engine.ErrStopped)
		p.leave()
		sw.then = nil
		return nil
	}
	for p.next < len(p.ids) {
		id := p.ids[p.next]
		rec, ok := s.eng.Task(id)
		if !ok {
			writeError(sw, errs.New(errs.NotFound, "id", "no task %q", id))
			p.leave()
			sw.then = nil
			return nil
		}
		if rec.Waiting() && !p.over {
			if p.expired == nil {
				p.expired = s.expiry.at(p.deadline, p.wait)
			}
			if isClosed(p.expired) {
				p.over = true
				continue
			}
			// Register, then read again: a commit publishes a task's new
			// record before it wakes the registered waiters.
			changed := s.eng.WaitChange(id)
			if rec, ok = s.eng.Task(id); !ok || rec.Waiting() {
				return changed
			}
		}
		if rec.Waiting() {
			p.status = http.StatusAccepted
		}
		p.recs[p.next] = rec
		p.next++
	}
	writeTasks(sw, p.status, engine.LocalRecords(principalOf(sw, r).scope(), p.recs), p.batch)
	p.leave()
	sw.then = nil
	return nil
}

// park waits for the next change of the task p waits for, p's deadline,
// the client's leaving or the engine's stop. Its frame is kept small: it
// is on the stack of every waiting request.
func (s *Server) park(p *pendingSchedule, changed <-chan struct{}, r *http.Request) {
	select {
	case <-changed:
	case <-p.expired:
		p.over = true
	case <-r.Context().Done():
		p.over = true
	case <-s.eng.Stopped():
		p.stopped = true
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// listTasks is GET /api/v1/tasks?state=&queue=&node=&job=&limit=&cursor=.
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := principalOf(w, r)
	f := engine.Filter{State: q.Get("state"), Queue: q.Get("queue"), Node: q.Get("node")}
	if p.Role != RoleAdmin {
		f.Tenant = p.Tenant
	}
	if f.State != "" {
		if _, ok := core.ParseState(f.State); !ok {
			writeError(w, errs.Invalid("state", "unknown state %q", f.State))
			return
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
	limit = 100
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 10000 {
			return 0, 0, errs.Invalid("limit", "must be 1..10000, got %q", v)
		}
	}
	if v := q.Get("cursor"); v != "" {
		if cursor, err = strconv.Atoi(v); err != nil || cursor < 0 {
			return 0, 0, errs.Invalid("cursor", "not a cursor from a previous page: %q", v)
		}
	}
	return limit, cursor, nil
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
	if rec, ok := s.owned(w, r); ok {
		writeTask(w, http.StatusOK, engine.LocalRecord(principalOf(w, r).scope(), rec))
	}
}

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

// listNodes is GET /api/v1/nodes?selector=: every node, or those whose
// labels (their own and the derived ones) match the selector.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	sel, err := selectorOf(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	nodes, err := s.eng.NodeViews(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if !sel.Empty() {
		kept := nodes[:0]
		for _, n := range nodes {
			if sel.Matches(n.Label) {
				kept = append(kept, n)
			}
		}
		nodes = kept
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": nodes})
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	nodes, err := s.eng.NodeViews(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	for i := range nodes {
		if nodes[i].Name == name {
			writeJSON(w, http.StatusOK, nodes[i])
			return
		}
	}
	writeError(w, errs.New(errs.NotFound, "name", "no node %q", name))
}

func (s *Server) nodeState(state string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := s.eng.SetNodeState(r.Context(), name, state); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"name": name, "state": state})
	}
}

func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	sum, err := s.eng.Summarize(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sum)
}

// readyz is 200 while the store is open and the engine runs (it was
// rebuilt before the server started listening), 503 once a commit failed.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.Err(); err != nil {
		writeError(w, errs.New(errs.Unavailable, "", "not ready: the scheduler stopped acknowledging after a store commit failed: %v", err))
		return
	}
	if sp, failed, ok := s.eng.Disk(); ok {
		switch {
		case failed != nil:
			writeError(w, errs.New(errs.Unavailable, "", "not ready: the store failed: %v", failed))
			return
		case sp.Low:
			writeError(w, errs.New(errs.InsufficientStorage, "", "not ready for new work: the store's disk has %d bytes free, below its reserve of %d (reads, cancels, completions and agents go on)", sp.Free, sp.Reserve))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "policy": s.policy})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "policy": s.policy})
}

// MetricsHandler serves reg in the Prometheus text format.
func MetricsHandler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)})
}

// metricsOnly serves GET /metrics from reg and 404 for everything else
// (the --metrics-listen listener).
func metricsOnly(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", MetricsHandler(reg, log))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errs.New(errs.NotFound, "", "this listener serves only GET /metrics"))
	})
	return mux
}

// noRoute answers a request no route took: 405 with Allow when the path
// has routes for other methods, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := s.mux.Handler(probe); pattern != "" && pattern != "/" {
			allow = append(allow, m)
		}
	}
	if len(allow) == 0 {
		writeError(w, errs.New(errs.NotFound, "", "no route %s %s", r.Method, r.URL.Path))
		return
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, errs.New(errs.MethodNotAllowed, "", "%s is not allowed on %s: use %s", r.Method, r.URL.Path, strings.Join(allow, ", ")))
}

// canonicalPath reports whether p is as the mux matches it (cleaned, a
// trailing slash kept).
func canonicalPath(p string) bool {
	if p == "" || p[0] != '/' {
		return p == ""
	}
	c := path.Clean(p)
	if c != "/" && strings.HasSuffix(p, "/") {
		c += "/"
	}
	return c == p
}
