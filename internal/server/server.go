// Package server is hetsched's HTTP API (../shared/API.md) on top of the
// engine. Handlers decode and validate, hand commands to the engine (which
// owns the single-threaded core) and write JSON; every error is written by
// writeError with the code and field of the one error taxonomy.
//
// Files by resource: tasks.go (submit, list, get, cancel, complete,
// renew), schedule.go (POST /schedule and its wait, with a diagram),
// jobs.go, nodes.go (list, get, put, cordon/drain), queues.go, logs.go,
// events.go, agents.go (the agent protocol), health.go (cluster, healthz,
// readyz, metrics); the request path around them: server.go (routes,
// ServeHTTP), browser.go, auth.go and tenancy.go (who may do what),
// admission.go and limits.go (load shedding), decode.go and taskjson.go
// (the hand-written JSON), expiry.go (the wait clock), memlimit.go and
// pprof.go, run.go and tls.go (listeners, certificates, shutdown).
//
// Glossary:
//   - route: a method and path pattern with its handler and the roles it
//     admits (table).
//   - principal: who a request is (role, tenant, agent's nodes), set by
//     guard on the statusWriter.
//   - statusWriter: the response writer of one request; it carries the
//     principal and, for a schedule request, its scheduleWait.
//   - scheduleWait: a schedule request whose tasks are durable, waiting
//     for their placements (schedule.go).
//   - admission: the bounded places for in-flight writes; a request holds
//     one until answered.
package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/metrics"
	"github.com/hetsched/hetsched/internal/series"
	"github.com/hetsched/hetsched/internal/servicectl"
	"github.com/hetsched/hetsched/internal/ui"
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
	// servers lists the control plane's servers (ha.go); nil: this one,
	// on the embedded store.
	servers func(context.Context) (api.ServerList, error)
	// tracing makes request spans (tracing.go).
	tracing httpTracing
	// services runs the services' controllers while the server serves
	// (nil: none run; StartServices); stopServices ends it and
	// servicesDone is closed when it has.
	services     *servicectl.Manager
	stopServices context.CancelFunc
	servicesDone chan struct{}
	// stopPools ends the node pools' manager (StartPools) and poolsDone
	// is closed when it has.
	stopPools context.CancelFunc
	poolsDone chan struct{}
	// series is the recent history (StartSeries; nil: none kept),
	// sampled every seriesEvery; stopSeries ends its sampling and
	// seriesDone is closed when it has.
	series      *series.Recorder
	seriesEvery time.Duration
	stopSeries  context.CancelFunc
	seriesDone  chan struct{}
	// The handlers of the services' API (services.go) and of the agent
	// protocol (agents.go).
	svcAPI   serviceAPI
	agentAPI agentAPI
}

// Close ends long-lived streams (events) so that a graceful shutdown does
// not wait for them.
// It stops the services' controllers and waits for them.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.closing)
		if s.stopServices != nil {
			s.stopServices()
			<-s.servicesDone
		}
		if s.stopPools != nil {
			s.stopPools()
			<-s.poolsDone
		}
		if s.stopSeries != nil {
			s.stopSeries()
			<-s.seriesDone
		}
	})
}

// StartServices runs the services' controllers on the server's engine
// until Close (gauges may be nil).
func (s *Server) StartServices(g *servicectl.Gauges) {
	ctx, cancel := context.WithCancel(context.Background())
	s.services = servicectl.New(servicectl.Config{Engine: s.eng, Logger: s.log, Gauges: g})
	s.stopServices, s.servicesDone = cancel, make(chan struct{})
	go func() {
		defer close(s.servicesDone)
		s.services.Run(ctx)
	}()
}

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
	s.svcAPI.s, s.agentAPI.s = s, s
	s.routes()
	// The web UI's static page, script and style: no data, no token
	// (the page asks for one and sends it with its API calls).
	s.mux.Handle("GET /ui/", ui.Handler("/ui/"))
	s.mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) })
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
		{"POST /api/v1/agents/register", s.guard(s.agentAPI.agentRegister, RoleAgent)},
		{"POST /api/v1/agents/{agent}/heartbeat", s.guard(s.agentAPI.agentHeartbeat, RoleAgent)},
		{"GET /api/v1/agents/{agent}/assignments", s.guard(s.agentAPI.agentAssignments, RoleAgent)},
		{"POST /api/v1/agents/{agent}/status", s.guard(s.agentAPI.agentStatus, RoleAgent)},
		{"GET /api/v1/cluster", s.guard(s.cluster, RoleTenant)},
		{"GET /api/v1/events", s.guard(s.events, RoleTenant, RoleAgent)},
		{"POST /api/v1/jobs", s.guard(s.submitJob, RoleTenant)},
		{"GET /api/v1/jobs", s.guard(s.listJobs, RoleTenant)},
		{"GET /api/v1/accounting", s.guard(s.history, RoleTenant)},
		{"GET /api/v1/usage", s.guard(s.usage, RoleTenant)},
		{"GET /api/v1/series", s.guard(s.getSeries, RoleTenant)},
		{"GET /api/v1/jobs/{id}", s.guard(s.getJob, RoleTenant)},
		{"DELETE /api/v1/jobs/{id}", s.guard(s.cancelJob, RoleTenant)},
		{"GET /api/v1/queues", s.guard(s.listQueues, RoleTenant)},
		{"PUT /api/v1/queues/{name}", s.guard(s.putQueue, RoleTenant)},
		{"POST /api/v1/nodes/{name}/cordon", s.guard(s.nodeState(api.NodeCordoned))},
		{"POST /api/v1/nodes/{name}/uncordon", s.guard(s.nodeState(api.NodeReady))},
		{"POST /api/v1/nodes/{name}/drain", s.guard(s.nodeState(api.NodeDraining))},
		{"POST /api/v1/nodes/{name}/release", s.guard(s.agentAPI.releaseNode)},
		{"GET /api/v1/servers", s.guard(s.listServers, RoleTenant, RoleAgent)},
		{"GET /api/v1/nodepools", s.guard(s.listNodePools)},
		{"PUT /api/v1/nodepools/{name}", s.guard(s.putNodePool)},
		{"DELETE /api/v1/nodepools/{name}", s.guard(s.deleteNodePool)},
		{"POST /api/v1/services", s.guard(s.svcAPI.createService, RoleTenant)},
		{"GET /api/v1/services", s.guard(s.svcAPI.listServices, RoleTenant)},
		{"GET /api/v1/services/{name}", s.guard(s.svcAPI.getService, RoleTenant)},
		{"PUT /api/v1/services/{name}", s.guard(s.svcAPI.putService, RoleTenant)},
		{"DELETE /api/v1/services/{name}", s.guard(s.svcAPI.deleteService, RoleTenant)},
		{"POST /api/v1/services/{name}/scale", s.guard(s.svcAPI.scaleService, RoleTenant)},
		{"GET /api/v1/services/{name}/endpoints", s.guard(s.svcAPI.serviceEndpoints, RoleTenant)},
		{"GET /api/v1/services/{name}/replicas", s.guard(s.svcAPI.serviceReplicas, RoleTenant)},
		{"POST /api/v1/services/{name}/metrics", s.guard(s.svcAPI.pushServiceMetrics, RoleTenant)},
		{"GET /healthz", s.healthz},
		{"GET /readyz", s.readyz},
	}
}

// ServeHTTP implements http.Handler; a panic in a handler becomes a 500
// with the internal code, logged.
//
// A schedule request whose tasks are not placed yet is finished here, in
// steps (schedule.go's diagram): tryAnswer (which may answer) and
// awaitChange (which waits for the next change). While it waits, its
// goroutine's stack holds net/http's frames, this one's, awaitChange's
// and the runtime's select, under a quarter of
// 8 KiB: the garbage collector then halves the stack to 4 KiB, which a
// deeper waiting stack (the handler's own frames) prevented. At a million
// waiting HTTP/2 streams that is 4 GiB (TestWaitingStackShrinks).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK, start: time.Now()}
	if s.tracing.tr != nil {
		var span trace.Span
		r, span = s.tracing.start(r)
		defer func() { s.tracing.end(span, r, sw.code) }()
	}
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
	s.answerWhenPlaced(sw, r)
}

// serve runs the route's handler.
func (s *Server) serve(sw *statusWriter, r *http.Request) {
	defer s.finish(sw, r)
	s.mux.ServeHTTP(sw, r)
}

// finish turns a handler's panic into a 500 and, once the request is
// answered (not left waiting in sw.waiting), records its duration.
func (s *Server) finish(sw *statusWriter, r *http.Request) {
	if p := recover(); p != nil {
		s.log.ErrorContext(r.Context(), "handler panic", "method", r.Method, "path", r.URL.Path, "panic", p)
		writeError(sw, errs.New(errs.Internal, "", "internal error"))
		if sw.waiting != nil {
			sw.waiting.leave()
			sw.waiting = nil
		}
	}
	if sw.waiting != nil || s.metrics == nil {
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
	waiting   *scheduleWait
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
