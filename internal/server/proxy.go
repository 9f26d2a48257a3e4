package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store/etcdstore"
)

// ServeHTTP serves a replicated server's API: the leader's own while it
// leads; as a standby, /healthz, /readyz, /metrics and GET /servers
// itself and every other request passed on to the leader (leaderProxy).
func (r *replica) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if s := r.cur.Load(); s != nil {
		if since := time.Since(time.Unix(0, r.renewed.Load())); since > r.freshFor() && req.URL.Path != "/healthz" {
			// Its leadership grant may have run out (paused, cut off): it
			// acknowledges nothing until etcd renews it, or another leads.
			writeError(w, errs.New(errs.Unavailable, "", "this server's leadership is unconfirmed: etcd last renewed its leadership grant %s ago: retry (another server may be taking over)", since.Round(time.Millisecond)))
			return
		}
		s.ServeHTTP(w, req)
		return
	}
	sw := &statusWriter{ResponseWriter: w, code: http.StatusOK, start: time.Now()}
	g := r.local.browser
	if g.cors(sw, req) {
		return
	}
	if err := g.check(req); err != nil {
		r.local.refuse(sw, req, err)
		return
	}
	switch {
	case req.Method == http.MethodGet && req.URL.Path == "/healthz":
		writeJSON(sw, http.StatusOK, map[string]string{"status": "ok", "policy": r.p.cfg.Policy, "role": api.RoleStandby})
	case req.Method == http.MethodGet && req.URL.Path == "/readyz":
		r.readyz(req.Context(), sw)
	case req.Method == http.MethodGet && req.URL.Path == "/metrics":
		r.local.guard(MetricsHandler(r.p.reg, r.lg).ServeHTTP, RoleMetrics)(sw, req)
	case req.Method == http.MethodGet && req.URL.Path == "/api/v1/servers":
		r.local.guard(func(w http.ResponseWriter, req *http.Request) {
			list, err := r.listServers(req.Context())
			if err != nil {
				writeError(w, err)
				return
			}
			writeJSON(w, http.StatusOK, list)
		}, RoleTenant, RoleAgent)(sw, req)
	case req.Method == http.MethodGet && stalePath(req.URL.Path, "/api/v1/tasks/") && req.URL.Query().Get("stale") == "true":
		r.local.guard(r.staleTask, RoleTenant)(sw, req)
	case req.Method == http.MethodGet && stalePath(req.URL.Path, "/api/v1/jobs/") && req.URL.Query().Get("stale") == "true":
		r.local.guard(r.staleJob, RoleTenant)(sw, req)
	default:
		r.proxy.serve(sw, req)
	}
}

// stalePath reports whether p is prefix{id}.
func stalePath(p, prefix string) bool {
	id, ok := strings.CutPrefix(p, prefix)
	return ok && id != "" && !strings.Contains(id, "/")
}

// staleRecord reads task key from the copy (nil when it has none).
func staleRecord(ctx context.Context, st *etcdstore.Store, key string) (*engine.TaskRecord, error) {
	v, ok, err := st.Get(ctx, engine.KindTask, key)
	if err != nil || !ok {
		return nil, err
	}
	rec, err := engine.DecodeTaskRecord(key, v)
	if err != nil {
		return nil, errs.New(errs.Internal, "", "the stored record of task %q does not decode: %v", key, err)
	}
	return rec, nil
}

// staleJob is GET /api/v1/jobs/{id}?stale=true on a standby, as
// staleTask.
func (r *replica) staleJob(w http.ResponseWriter, req *http.Request) {
	st := r.copy.Load()
	if st == nil {
		r.proxy.serve(w, req)
		return
	}
	id := strings.TrimPrefix(req.URL.Path, "/api/v1/jobs/")
	p := principalOf(w, req)
	key := p.qualify(id)
	v, ok, err := st.Get(req.Context(), engine.KindJob, key)
	if err != nil {
		writeError(w, err)
		return
	}
	var j engine.JobRecord
	if ok {
		if err := json.Unmarshal(v, &j); err != nil {
			writeError(w, errs.New(errs.Internal, "", "the stored record of job %q does not decode: %v", id, err))
			return
		}
	}
	if !ok || !p.sees(j.Tenant) {
		writeError(w, errs.New(errs.NotFound, "id", "no job %q (in this standby's copy, revision %d; the leader may know it: ask without stale=true)", id, st.Revision()))
		return
	}
	tasks := make([]*engine.TaskRecord, 0, len(j.TaskIDs))
	for _, tid := range j.TaskIDs {
		rec, err := staleRecord(req.Context(), st, tid)
		if err != nil {
			writeError(w, err)
			return
		}
		if rec != nil {
			tasks = append(tasks, rec)
		}
	}
	w.Header().Set("X-Hetsched-Stale", "revision="+strconv.FormatInt(st.Revision(), 10))
	writeJSON(w, http.StatusOK, jobViewOf(p.scope(), &j, tasks, req.URL.Query().Get("tasks") != "false"))
}

// staleTask is GET /api/v1/tasks/{id}?stale=true on a standby: the task
// as this server's copy of the store has it (the leader's answer may be
// newer), X-Hetsched-Stale naming the etcd revision of the copy. The
// tenancy rules are the leader's: another tenant's task is not found.
func (r *replica) staleTask(w http.ResponseWriter, req *http.Request) {
	st := r.copy.Load()
	if st == nil {
		r.proxy.serve(w, req)
		return
	}
	id := strings.TrimPrefix(req.URL.Path, "/api/v1/tasks/")
	p := principalOf(w, req)
	rec, err := staleRecord(req.Context(), st, p.qualify(id))
	if err != nil {
		writeError(w, err)
		return
	}
	if rec == nil || !p.sees(rec.Tenant) {
		writeError(w, errs.New(errs.NotFound, "id", "no task %q (in this standby's copy, revision %d; the leader may know it: ask without stale=true)", id, st.Revision()))
		return
	}
	w.Header().Set("X-Hetsched-Stale", "revision="+strconv.FormatInt(st.Revision(), 10))
	writeTask(w, http.StatusOK, engine.LocalRecord(p.scope(), rec))
}

// readyz on a standby: ready when a leader is known (requests are passed
// on to it), else 503.
func (r *replica) readyz(ctx context.Context, w http.ResponseWriter) {
	e := r.leader.Load()
	if e == nil || *e == r.self {
		writeError(w, errs.New(errs.Unavailable, "", "not ready: standby with no leader elected (an election is in progress)"))
		return
	}
	if why := r.quorum(ctx); why != "" {
		writeError(w, errs.New(errs.Unavailable, "", "not ready: no leader can be elected now: %s", why))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "standby of " + e.URL, "role": api.RoleStandby, "leader": e.Name, "leaderURL": e.URL, "policy": r.p.cfg.Policy})
}

// leaderProxy passes a standby's requests on to the leader: the client's
// request and credentials unchanged, the answer streamed back (event
// and assignment streams included). A request authenticated by a client
// certificate, which a proxy cannot pass on, is redirected instead (307
// to the same path on the leader).
type leaderProxy struct {
	leader func() *serverEntry
	// quorum says why etcd cannot elect a leader now ("" when it can).
	quorum func(context.Context) string
	rp     *httputil.ReverseProxy
	// probe asks the leader's /healthz (watchLeader), over the same
	// transport, within probeTimeout.
	probe *http.Client
	// changed is closed, and replaced, when the observed leader changes
	// or a standby found it silent (leaderChanged): the requests passed on
	// to it end then, answered "retry", instead of waiting for a leader
	// that froze (an agent's heartbeat waited there past its fence
	// deadline).
	changed atomic.Pointer[chan struct{}]
}

// leaderChanged ends the requests passed on to the leader until now.
func (lp *leaderProxy) leaderChanged() {
	ch := make(chan struct{})
	if old := lp.changed.Swap(&ch); old != nil {
		close(*old)
	}
}

// untilLeaderChanges is ctx, ended when the leader changes too.
func (lp *leaderProxy) untilLeaderChanges(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	ch := lp.changed.Load()
	go func() {
		select {
		case <-*ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// leaderKey carries the leader a request is passed on to.
type leaderKey struct{}

func newLeaderProxy(p *prepared, leader func() *serverEntry, quorum func(context.Context) string) (*leaderProxy, error) {
	dialer := &net.Dialer{Timeout: 3 * time.Second, KeepAlive: 15 * time.Second}
	tr := &http.Transport{
		DialContext:         dialer.DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     time.Minute,
		HTTP2:               &http.HTTP2Config{MaxConcurrentStreams: MaxStreams, PingTimeout: 5 * time.Second, SendPingTimeout: 10 * time.Second},
	}
	var protos http.Protocols
	if p.tlsConfig != nil {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if p.opt.PeerCA != "" {
			c, err := certs.ClientTLSConfig(p.opt.PeerCA, "", "")
			if err != nil {
				return nil, errs.Prefix("peer", err)
			}
			tc = c
		}
		tr.TLSClientConfig = tc
		protos.SetHTTP1(true)
		protos.SetHTTP2(true)
	} else {
		// h2c: one connection multiplexes every passed-on request, so the
		// leader's per-address connection cap does not bite.
		protos.SetUnencryptedHTTP2(true)
	}
	tr.Protocols = &protos
	lp := &leaderProxy{leader: leader, quorum: quorum, probe: &http.Client{Transport: tr, Timeout: probeTimeout}}
	lp.leaderChanged()
	lp.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			u := pr.In.Context().Value(leaderKey{}).(*url.URL)
			pr.SetURL(u)
			pr.SetXForwarded()
		},
		Transport:     tr,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			u := req.Context().Value(leaderKey{}).(*url.URL)
			if why := lp.quorum(req.Context()); why != "" {
				writeError(w, errs.New(errs.Unavailable, "", "no leader can be elected now: %s; nothing is acknowledged until a majority is back (the last leader was %s)", why, u))
				return
			}
			writeError(w, errs.New(errs.Unavailable, "", "this server is a standby and the leader %s did not answer (it may be failing over: retry): %v", u, err))
		},
	}
	return lp, nil
}

// serve passes req on to the current leader.
func (lp *leaderProxy) serve(w http.ResponseWriter, req *http.Request) {
	e := lp.leader()
	if e == nil {
		if why := lp.quorum(req.Context()); why != "" {
			writeError(w, errs.New(errs.Unavailable, "", "no leader can be elected now: %s; nothing is acknowledged until a majority is back", why))
			return
		}
		writeError(w, errs.New(errs.Unavailable, "", "this server is a standby and no leader is elected yet (an election is in progress): retry"))
		return
	}
	u, err := url.Parse(e.URL)
	if err != nil {
		writeError(w, errs.New(errs.Unavailable, "", "the leader's address %q does not parse: %v", errs.Clip(e.URL), err))
		return
	}
	if req.TLS != nil && verifiedCert(req.TLS) != nil {
		to := *u
		to.Path, to.RawQuery = req.URL.Path, req.URL.RawQuery
		w.Header().Set("Location", to.String())
		writeJSON(w, http.StatusTemporaryRedirect, map[string]string{"leader": e.URL, "message": "this server is a standby: send the request to the leader"})
		return
	}
	ctx, cancel := lp.untilLeaderChanges(req.Context())
	defer cancel()
	lp.rp.ServeHTTP(w, withoutUpgrade(req).WithContext(context.WithValue(ctx, leaderKey{}, u)))
}

// withoutUpgrade is req without a protocol upgrade (Connection: Upgrade,
// Upgrade, HTTP2-Settings). The API speaks no upgraded protocol, and the
// leader is reached over HTTP/2, which carries none: passed on, an
// upgrade failed as if the leader were down (503 "retry", for ever, to a
// client asking Upgrade: h2c). A server may ignore an upgrade (RFC 9110
// §7.8), as the leader itself does: the request is answered as HTTP/1.1.
func withoutUpgrade(req *http.Request) *http.Request {
	if req.Header.Get("Upgrade") == "" && req.Header.Get("Connection") == "" && req.Header.Get("Http2-Settings") == "" {
		return req
	}
	r := *req
	r.Header = req.Header.Clone()
	for _, h := range []string{"Upgrade", "Connection", "Http2-Settings"} {
		r.Header.Del(h)
	}
	return &r
}
