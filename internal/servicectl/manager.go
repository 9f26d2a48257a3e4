// Package servicectl runs the services' controllers (package service)
// against an engine (issue 44 §1–2): one goroutine passes over every
// service each period, or sooner when woken, gives its controller the
// service's live replica tasks, their probes' states and their metrics,
// and sends the controller's decision to the engine, which makes and
// stops the replicas and keeps the status in one durable commit. It
// keeps no durable state of its own: a restarted server's manager
// rebuilds every controller from the engine's records.
//
// Glossary:
//
//	pass       one look at every service (Pass)
//	sample     one replica's value of one autoscale metric: its usage
//	           and request of a resource, or a value it pushed
//	pushed     a custom metric a replica sent (POST …/metrics); it is
//	           stale after StaleAfter
//	counted    a finished replica whose failure the controller's backoff
//	           has seen
package servicectl

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/autoscale"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/service"
)

// Engine is what the manager needs of the engine.
type Engine interface {
	Services(tenant string) []*engine.ServiceRecord
	Replicas(id string) []*engine.TaskRecord
	ApplyService(ctx context.Context, id string, a engine.ServiceApply) ([]string, error)
	Usage() map[string]agentapi.NodeUsage
	AgentLogs(node string) (url, token string, ok bool)
}

// Defaults.
const (
	DefaultPeriod = time.Second
	// StaleAfter is how long a pushed value counts.
	StaleAfter = time.Minute
	// maxPushed bounds the replicas' pushed values kept per service.
	maxPushed = 4 * api.MaxServiceReplicas
)

// Config configures a Manager.
type Config struct {
	Engine Engine
	Logger *slog.Logger
	Now    func() time.Time
	Period time.Duration
	// Gauges, when set, get every service's counts and metrics.
	Gauges *Gauges
}

// Manager runs the controllers.
type Manager struct {
	cfg  Config
	wake chan struct{}

	mu     sync.Mutex // guards ctrls, pushed and scr.last
	ctrls  map[string]*entry
	pushed map[string]map[pushKey]pushedValue // service id -> values
	scr    *scraper
}

type entry struct {
	ctrl    *service.Controller
	gen     int64
	counted map[string]bool
}

type pushKey struct{ replica, metric string }

type pushedValue struct {
	v  float64
	at time.Time
}

// New makes a manager; Run runs it.
func New(cfg Config) *Manager {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, wake: make(chan struct{}, 1), ctrls: map[string]*entry{}, pushed: map[string]map[pushKey]pushedValue{}, scr: newScraper()}
}

// Wake asks for a pass now (a service changed). A nil manager does
// nothing.
func (m *Manager) Wake() {
	if m == nil {
		return
	}
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run passes every period, or when woken, until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		m.Pass(ctx, m.cfg.Now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.wake:
		}
	}
}

// Pass looks at every service once.
func (m *Manager) Pass(ctx context.Context, now time.Time) {
	recs := m.cfg.Engine.Services("")
	var usage map[string]agentapi.NodeUsage
	if len(recs) > 0 {
		usage = m.cfg.Engine.Usage() // a copy of every node's: only when a service reads it
	}
	seen := make(map[string]bool, len(recs))
	for _, rec := range recs {
		id := rec.ID()
		seen[id] = true
		if err := m.step(ctx, now, rec, usage); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("service step", "service", id, "err", err)
		}
	}
	m.mu.Lock()
	for id := range m.ctrls {
		if !seen[id] {
			delete(m.ctrls, id)
			delete(m.pushed, id)
			delete(m.scr.last, id)
			m.cfg.Gauges.forget(id)
		}
	}
	m.mu.Unlock()
}

// step runs service rec's controller once and applies its decision.
func (m *Manager) step(ctx context.Context, now time.Time, rec *engine.ServiceRecord, usage map[string]agentapi.NodeUsage) error {
	id := rec.ID()
	m.mu.Lock()
	ent, err := m.entryFor(id, rec)
	m.mu.Unlock()
	if err != nil {
		return err
	}
	live := m.liveReplicas(now, ent, m.cfg.Engine.Replicas(id), usage)
	m.scrape(ctx, now, id, rec, live)
	samples := m.samples(id, rec, live, usage, now)
	st := ent.ctrl.Step(now, live.replicas, samples)
	a := engine.ServiceApply{Generation: rec.Generation, Create: st.Create, Revision: st.Revision, Template: rec.Spec.Template,
		Status: st.Status, Endpoints: st.Endpoints, Stop: map[string]string{}}
	for _, r := range st.Stop {
		a.Stop[r] = "stopped by service " + rec.Spec.Name + ": " + live.stopReason(r, st.Revision)
	}
	ls := st.Status.LastScale
	scaled := ls != nil && (rec.Status.LastScale == nil || !ls.At.Equal(rec.Status.LastScale.At))
	if scaled {
		msg := fmt.Sprintf("%d to %d replicas: %s", ls.From, ls.To, ls.Reason)
		a.Notes = append(a.Notes, service.Note{At: now, Kind: "scaled", Message: msg})
		a.Event, a.EventReason = "scaled", msg
	} else if !slices.Equal(rec.Endpoints, st.Endpoints) {
		a.Event, a.EventReason = "endpoints", fmt.Sprintf("%d ready of %d", st.Status.Ready, st.Status.Desired)
	}
	m.cfg.Gauges.set(id, st, scaled)
	if a.Create == 0 && len(a.Stop) == 0 && a.Event == "" && sameStatus(rec.Status, st.Status) {
		return nil // nothing to make, stop or publish: no command
	}
	if _, err := m.cfg.Engine.ApplyService(ctx, id, a); err != nil {
		if c := errs.CodeOf(err); c == errs.Conflict || c == errs.NotFound {
			return nil // the spec changed or the service went: the next pass reads it again
		}
		return err
	}
	return nil
}

// entryFor is service rec's controller, made or updated to its spec's
// generation; under mu.
func (m *Manager) entryFor(id string, rec *engine.ServiceRecord) (*entry, error) {
	ent := m.ctrls[id]
	switch {
	case ent == nil:
		c, err := service.New(rec.Spec)
		if err != nil {
			return nil, err
		}
		c.Restore(rec.Status)
		ent = &entry{ctrl: c, gen: rec.Generation, counted: map[string]bool{}}
		m.ctrls[id] = ent
	case ent.gen != rec.Generation:
		if err := ent.ctrl.Update(rec.Spec); err != nil {
			return nil, err
		}
		ent.gen = rec.Generation
	}
	return ent, nil
}

// live is a service's live replicas as the controller sees them, with
// their records.
type live struct {
	replicas []service.Replica
	recs     []*engine.TaskRecord
}

// stopReason says why the controller stops replica id.
func (l *live) stopReason(id, revision string) string {
	for _, r := range l.replicas {
		if r.ID == id && r.Revision != revision {
			return "rolled out (revision " + revision + ")"
		}
	}
	return "scaled down"
}

// liveReplicas turns the replica tasks into the controller's replicas:
// the live ones, with their probes' states from their agents' latest
// heartbeats, and the failures of finished ones it has not counted (each
// once, for the backoff).
func (m *Manager) liveReplicas(now time.Time, ent *entry, recs []*engine.TaskRecord, usage map[string]agentapi.NodeUsage) live {
	var out live
	present := make(map[string]bool, len(recs))
	for _, r := range recs {
		id := r.Spec.ID
		present[id] = true
		if ended(r.State) {
			if !ent.counted[id] {
				ent.counted[id] = true
				if r.State != "cancelled" {
					ent.ctrl.ReplicaEnded(finishedAt(r, now), ran(r))
				}
			}
			continue
		}
		running := r.State == "running"
		rep := service.Replica{ID: id, Revision: r.Spec.Metadata[engine.RevisionLabel], Running: running, Created: r.Submitted, Node: r.Node}
		rep.Started, rep.Ready = probed(r, usage)
		if r.Node != "" {
			rep.Address = m.address(r.Node)
		}
		out.replicas = append(out.replicas, rep)
		out.recs = append(out.recs, r)
	}
	for id := range ent.counted {
		if !present[id] {
			delete(ent.counted, id)
		}
	}
	return out
}

// probed is a running replica's probe states as its agent last reported
// them. Before its first report, a replica that has neither a startup nor
// a readiness probe is started and ready once it runs; one that has
// either is neither.
func probed(r *engine.TaskRecord, usage map[string]agentapi.NodeUsage) (started, ready bool) {
	if r.State != "running" {
		return false, false
	}
	if b, ok := usage[r.Node].Tasks[r.Spec.ID]; ok && b.Replica {
		return b.Started, b.Ready
	}
	plain := r.Spec.Startup == nil && r.Spec.Readiness == nil
	return plain, plain
}

// address is the host a node's agent serves from ("" when unknown).
func (m *Manager) address(node string) string {
	base, _, ok := m.cfg.Engine.AgentLogs(node)
	if !ok || base == "" {
		return ""
	}
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// ended reports whether a replica task's state is final.
func ended(state string) bool {
	s, ok := core.ParseState(state)
	return ok && s.Terminal()
}

func finishedAt(r *engine.TaskRecord, now time.Time) time.Time {
	if r.Finished != nil {
		return *r.Finished
	}
	return now
}

// ran is how long a finished replica ran (0 when it never started).
func ran(r *engine.TaskRecord) time.Duration {
	if r.Started == nil || r.Finished == nil {
		return 0
	}
	return r.Finished.Sub(*r.Started)
}

// samples are the autoscale metrics' samples, one slice per metric, one
// sample per live replica (nil when the service does not autoscale).
func (m *Manager) samples(id string, rec *engine.ServiceRecord, l live, usage map[string]agentapi.NodeUsage, now time.Time) [][]autoscale.Sample {
	a := rec.Spec.Autoscale
	if a == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	pushed := m.pushed[id]
	out := make([][]autoscale.Sample, len(a.Metrics))
	for i, mt := range a.Metrics {
		ss := make([]autoscale.Sample, len(l.recs))
		for j, r := range l.recs {
			s := autoscale.Sample{Ready: l.replicas[j].Ready, Missing: true}
			switch {
			case mt.Custom != "":
				if p, ok := pushed[pushKey{r.Spec.ID, mt.Custom}]; ok && now.Sub(p.at) <= StaleAfter {
					s.Value, s.Missing = p.v, false
				}
			default:
				s.Value, s.Request, s.Missing = resourceUse(r, mt.Resource, usage)
			}
			ss[j] = s
		}
		out[i] = ss
	}
	return out
}

// resourceUse is a replica's use and request of resource res: a device
// type's utilization over the devices it holds (in devices), or its CPU
// (in cores) when its agent reports the task's own use. missing: nothing
// reported.
func resourceUse(r *engine.TaskRecord, res string, usage map[string]agentapi.NodeUsage) (use, request float64, missing bool) {
	u, ok := usage[r.Node]
	if !ok {
		return 0, 0, true
	}
	if res == "cpu" {
		tu, ok := u.Tasks[r.Spec.ID]
		req := float64(r.Spec.Resources["cpu"]) / 1000
		if !ok || req <= 0 {
			return 0, 0, true
		}
		return tu.CPU, req, false
	}
	n := 0
	for _, d := range r.Devices {
		if d.Type != res {
			continue
		}
		b, ok := u.Devices[d.ID]
		if !ok {
			return 0, 0, true
		}
		use += b.Utilization
		n++
	}
	if n == 0 {
		return 0, 0, true
	}
	return use, float64(n), false
}

// Push records values a replica of service id pushed (POST …/metrics).
// Only the service's autoscale metrics are taken; another name is an
// error naming it.
func (m *Manager) Push(id string, rec *engine.ServiceRecord, replica string, values map[string]float64, now time.Time) error {
	if m == nil {
		return errs.New(errs.Unavailable, "", "this server runs no service controllers")
	}
	if rec.Spec.Autoscale == nil {
		return errs.Invalid("metrics", "service %q does not autoscale: no custom metric is read", rec.Spec.Name)
	}
	known := map[string]bool{}
	for _, mt := range rec.Spec.Autoscale.Metrics {
		if mt.Custom != "" {
			known[mt.Custom] = true
		}
	}
	for k, v := range values {
		if !known[k] {
			return errs.Invalid("metrics."+k, "not a custom metric of service %q's autoscale", rec.Spec.Name)
		}
		if v != v || v < 0 || v > 1e15 {
			return errs.Invalid("metrics."+k, "must be a number from 0 to 1e15, got %v", v)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pushedOf(id)
	if len(p)+len(values) > maxPushed {
		for k, v := range p {
			if now.Sub(v.at) > StaleAfter {
				delete(p, k)
			}
		}
		if len(p)+len(values) > maxPushed {
			return errs.New(errs.RateLimited, "metrics", "service %q holds %d pushed values: push for live replicas only", rec.Spec.Name, len(p))
		}
	}
	for k, v := range values {
		p[pushKey{replica, k}] = pushedValue{v, now}
	}
	return nil
}

// pushedOf is service id's values, made when it has none; under mu.
func (m *Manager) pushedOf(id string) map[pushKey]pushedValue {
	p := m.pushed[id]
	if p == nil {
		p = map[pushKey]pushedValue{}
		m.pushed[id] = p
	}
	return p
}

// record keeps a scraped value as if replica had pushed it.
func (m *Manager) record(id, replica, metric string, v float64, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.pushedOf(id); len(p) < maxPushed {
		p[pushKey{replica, metric}] = pushedValue{v, now}
	}
}

// sameStatus reports whether two statuses say the same.
func sameStatus(a, b service.Status) bool {
	if a.Replicas != b.Replicas || a.Ready != b.Ready || a.Desired != b.Desired || (a.LastScale == nil) != (b.LastScale == nil) {
		return false
	}
	if a.LastScale == nil {
		return true
	}
	x, y := a.LastScale, b.LastScale
	return x.At.Equal(y.At) && x.From == y.From && x.To == y.To && x.Reason == y.Reason
}
