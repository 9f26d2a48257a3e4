package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/service"
	"github.com/hetsched/hetsched/internal/store"
)

// Services (issue 44): the engine keeps a service's record durable and
// makes and stops its replica tasks in the same commits as any task; the
// service's controller (package servicectl) decides what to make and stop
// and sends it here (ApplyService). The record's key is the service's
// name qualified by its tenant, as a job's id.

// KindService is the store kind of service records.
const KindService = "service"

// Metadata keys every replica carries (its labels: selectors match them).
const (
	ServiceLabel  = "hetsched.io/service"
	RevisionLabel = "hetsched.io/revision"
)

// maxServiceNotes bounds the decisions a service's record keeps.
const maxServiceNotes = 16

// ServiceRecord is a service as stored: its spec, its owner, the status
// and endpoints its controller last published, and its latest decisions.
type ServiceRecord struct {
	Spec    api.Service `json:"spec"`
	Tenant  string      `json:"tenant"`
	Created time.Time   `json:"created"`
	// Generation counts the spec's changes (1: as created); a controller
	// decision made for another generation is refused.
	Generation int64 `json:"generation"`
	// NextReplica numbers the next replica task (<name>-<n>): never
	// reused, so a replica's id names one process's life.
	NextReplica uint64             `json:"nextReplica"`
	Status      service.Status     `json:"status"`
	Endpoints   []service.Endpoint `json:"endpoints,omitempty"`
	Notes       []service.Note     `json:"notes,omitempty"`
}

// ID is the record's engine id.
func (r *ServiceRecord) ID() string { return QualifyID(r.Tenant, r.Spec.Name) }

// serviceState is the engine's services: the published records and the
// replica index (under published.mu), and the step's staged changes
// (loop-owned).
type serviceState struct {
	recs map[string]*ServiceRecord
	// replicas indexes each service's replica tasks (live, and finished
	// ones until retention forgets them) by service id.
	replicas map[string]map[string]struct{}
	staged   map[string]*ServiceRecord // nil: deleted
	events   []Event
}

func newServiceState() serviceState {
	return serviceState{recs: map[string]*ServiceRecord{}, replicas: map[string]map[string]struct{}{}, staged: map[string]*ServiceRecord{}}
}

func (s *serviceState) pending() bool { return len(s.staged) > 0 || len(s.events) > 0 }

// view is the loop's latest record of service id (staged over published).
func (s *serviceState) view(id string) *ServiceRecord {
	if r, ok := s.staged[id]; ok {
		return r
	}
	return s.recs[id]
}

// serviceCommands are the services' commands (create, update, scale,
// delete, apply) and their part of the loop's step: staging a service's
// record, encoding and publishing it with the commit, indexing its
// replicas, recovering them. The Engine embeds it; its state is the read
// model's svc (published under its lock, staged by the loop).
type serviceCommands struct {
	e *Engine
}

// stage stages r with an event (kind service, state) when state is set.
func (sv *serviceCommands) stageService(id string, r *ServiceRecord, state, reason string, now time.Time) {
	e := sv.e
	e.svc.staged[id] = r
	if state != "" {
		tenant := ""
		if r != nil {
			tenant = r.Tenant
		} else if old := e.svc.recs[id]; old != nil {
			tenant = old.Tenant
		}
		e.svc.events = append(e.svc.events, Event{Kind: "service", ID: id, State: state, Reason: reason, Time: now, Tenant: tenant})
	}
}

// encodeServices appends the staged service records to b.
func (sv *serviceCommands) encodeServices(b *commitBatch) error {
	e := sv.e
	for id, r := range e.svc.staged {
		if r == nil {
			b.recs = append(b.recs, store.Record{Kind: KindService, Key: id})
			continue
		}
		v, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encode service %s: %w", id, err)
		}
		b.recs = append(b.recs, store.Record{Kind: KindService, Key: id, Value: v})
	}
	return nil
}

// publishServices publishes the staged records and indexes the batch's
// new replica tasks; under mu.
func (sv *serviceCommands) publishServices(changes []change) {
	e := sv.e
	for id, r := range e.svc.staged {
		if r == nil {
			delete(e.svc.recs, id)
		} else {
			e.svc.recs[id] = r
		}
	}
	for _, c := range changes {
		if c.old == nil && c.r.Spec.Service != "" {
			e.indexReplica(c.r)
		}
	}
}

func (sv *serviceCommands) indexReplica(r *TaskRecord) {
	e := sv.e
	id := QualifyID(r.Tenant, r.Spec.Service)
	set := e.svc.replicas[id]
	if set == nil {
		set = map[string]struct{}{}
		e.svc.replicas[id] = set
	}
	set[r.Spec.ID] = struct{}{}
}

// unindexReplica drops a forgotten task from its service's index; under mu.
func (sv *serviceCommands) unindexReplica(r *TaskRecord) {
	e := sv.e
	if r == nil || r.Spec.Service == "" {
		return
	}
	id := QualifyID(r.Tenant, r.Spec.Service)
	if set := e.svc.replicas[id]; set != nil {
		delete(set, r.Spec.ID)
		if len(set) == 0 {
			delete(e.svc.replicas, id)
		}
	}
}

// publishServiceEvents adds the staged service events (between begin and
// end of the event log) and clears the staging.
func (sv *serviceCommands) publishServiceEvents(l *eventLog) {
	e := sv.e
	for _, ev := range e.svc.events {
		l.add(ev)
	}
	clear(e.svc.staged)
	e.svc.events = e.svc.events[:0]
}

// recoverServices loads the service records and indexes the replicas of
// the recovered tasks.
func (sv *serviceCommands) recoverServices(ctx context.Context, recs []*TaskRecord) error {
	e := sv.e
	if err := loadJSON(ctx, e.st, KindService, func(key string, r *ServiceRecord) error {
		e.svc.recs[key] = r
		return nil
	}); err != nil {
		return err
	}
	for _, r := range recs {
		if r.Spec.Service != "" {
			e.indexReplica(r)
		}
	}
	return nil
}

// fnCmd runs fn on the loop (the services' and node pools' commands).
type fnCmd struct {
	answer
	fn func(e *Engine, now time.Time) error
}

func (c *fnCmd) run(e *Engine, now time.Time) { c.err = c.fn(e, now) }

// CreateService admits svc for tenant. The same spec again returns the
// existing record (created false); another spec under the name is a
// conflict.
func (sv *serviceCommands) CreateService(ctx context.Context, tenant string, svc api.Service) (rec *ServiceRecord, created bool, err error) {
	e := sv.e
	if err := svc.Validate(); err != nil {
		return nil, false, err
	}
	if err := e.roomForWork(recordOverhead); err != nil {
		return nil, false, err
	}
	err = e.do(ctx, &fnCmd{fn: func(e *Engine, now time.Time) error {
		id := QualifyID(tenant, svc.Name)
		if old := e.svc.view(id); old != nil {
			if old.Tenant == tenant && sameJSON(old.Spec, svc) {
				rec = old
				return nil
			}
			return errs.New(errs.AlreadyExists, "name", "service %q exists with a different spec (PUT it to change it)", svc.Name)
		}
		if err := e.checkServiceQueue(tenant, &svc); err != nil {
			return err
		}
		rec = &ServiceRecord{Spec: svc, Tenant: tenant, Created: now, Generation: 1, NextReplica: 1,
			Status: service.Status{Desired: svc.Replicas}}
		e.stageService(id, rec, "created", fmt.Sprintf("%d replicas", svc.Replicas), now)
		created = true
		return nil
	}})
	return rec, created, err
}

// checkServiceQueue refuses a queue that does not exist or is another
// tenant's, as a task's submission would.
func (sv *serviceCommands) checkServiceQueue(tenant string, svc *api.Service) error {
	e := sv.e
	if svc.Queue == "" {
		return nil
	}
	all := e.staged.queueView()
	if all[svc.Queue] == nil {
		return errs.Invalid("queue", "no queue %q", svc.Queue)
	}
	if scoped(tenant) && api.QueueOwner(svc.Queue, all) != tenant {
		return errs.New(errs.PermissionDenied, "queue", "queue %q belongs to another tenant", svc.Queue)
	}
	return nil
}

// UpdateService replaces service id's spec (PUT): a changed template is
// rolled out by its controller. The name cannot change.
func (sv *serviceCommands) UpdateService(ctx context.Context, id string, svc api.Service) (rec *ServiceRecord, err error) {
	e := sv.e
	if err := svc.Validate(); err != nil {
		return nil, err
	}
	err = e.do(ctx, &fnCmd{fn: func(e *Engine, now time.Time) error {
		old := e.svc.view(id)
		if old == nil {
			return errs.New(errs.NotFound, "name", "no service %q", svc.Name)
		}
		if svc.Name != old.Spec.Name {
			return errs.Invalid("name", "a service's name cannot change (%q is %q)", svc.Name, old.Spec.Name)
		}
		if sameJSON(old.Spec, svc) {
			rec = old
			return nil
		}
		if err := e.checkServiceQueue(old.Tenant, &svc); err != nil {
			return err
		}
		cp := *old
		cp.Spec, cp.Generation = svc, old.Generation+1
		rec = &cp
		e.stageService(id, rec, "updated", "generation "+strconv.FormatInt(cp.Generation, 10), now)
		return nil
	}})
	return rec, err
}

// ScaleService sets service id's replica count by hand (POST …/scale);
// refused for a service that autoscales.
func (sv *serviceCommands) ScaleService(ctx context.Context, id string, n int) (rec *ServiceRecord, err error) {
	e := sv.e
	if n < 0 || n > api.MaxServiceReplicas {
		return nil, errs.Invalid("replicas", "must be from 0 to %d, got %d", api.MaxServiceReplicas, n)
	}
	err = e.do(ctx, &fnCmd{fn: func(e *Engine, now time.Time) error {
		old := e.svc.view(id)
		if old == nil {
			return errs.New(errs.NotFound, "name", "no service %q", id)
		}
		if old.Spec.Autoscale != nil {
			return errs.Invalid("replicas", "service %q autoscales (%d..%d): change autoscale.min and max instead", old.Spec.Name, old.Spec.Autoscale.Min, old.Spec.Autoscale.Max)
		}
		if old.Spec.Replicas == n {
			rec = old
			return nil
		}
		cp := *old
		cp.Spec.Replicas, cp.Generation = n, old.Generation+1
		cp.Notes = addNote(old.Notes, service.Note{At: now, Kind: "scaled", Message: fmt.Sprintf("%d to %d replicas, by hand", old.Spec.Replicas, n)})
		rec = &cp
		e.stageService(id, rec, "scaled", fmt.Sprintf("%d to %d replicas, by hand", old.Spec.Replicas, n), now)
		return nil
	}})
	return rec, err
}

// DeleteService stops every replica of service id and deletes it.
func (sv *serviceCommands) DeleteService(ctx context.Context, id string) error {
	e := sv.e
	return e.do(ctx, &fnCmd{fn: func(e *Engine, now time.Time) error {
		old := e.svc.view(id)
		if old == nil {
			return errs.New(errs.NotFound, "name", "no service %q", id)
		}
		for tid := range e.svc.replicas[id] {
			if r := e.staged.current(tid); r != nil && !finished(r.State) {
				if err := e.c.Cancel(now, tid, "service "+old.Spec.Name+" deleted"); err != nil {
					return err
				}
			}
		}
		e.stageService(id, nil, "deleted", "", now)
		return nil
	}})
}

// ServiceApply is a controller's decision for one service (package
// service's Step), to be carried out in one commit.
type ServiceApply struct {
	// Generation is the spec generation decided for; another is refused
	// (conflict: the controller reads the record again).
	Generation int64
	// Create replicas of Template (revision Revision) are made.
	Create   int
	Revision string
	Template api.Task
	// Stop names the replica tasks to stop, each with its reason.
	Stop      map[string]string
	Status    service.Status
	Endpoints []service.Endpoint
	Notes     []service.Note
	// Event, when set, is the decision's event state (scaled, endpoints)
	// and EventReason its message.
	Event, EventReason string
}

// ApplyService carries out a controller's decision for service id. It
// returns the ids of the replicas it made.
func (sv *serviceCommands) ApplyService(ctx context.Context, id string, a ServiceApply) (made []string, err error) {
	e := sv.e
	if a.Create > 0 {
		if err := e.roomForWork(int64(a.Create) * recordOverhead); err != nil {
			return nil, err
		}
	}
	err = e.do(ctx, &fnCmd{fn: func(e *Engine, now time.Time) error {
		old := e.svc.view(id)
		if old == nil {
			return errs.New(errs.NotFound, "name", "no service %q", id)
		}
		if old.Generation != a.Generation {
			return errs.New(errs.Conflict, "generation", "service %q is at generation %d, the decision was for %d", id, old.Generation, a.Generation)
		}
		for tid, why := range a.Stop {
			if _, ok := e.svc.replicas[id][tid]; !ok {
				if r := e.staged.tasks[tid]; r == nil || QualifyID(r.Tenant, r.Spec.Service) != id {
					return errs.Invalid("stop", "task %q is not a replica of service %q", tid, id)
				}
			}
			if r := e.staged.current(tid); r != nil && !finished(r.State) {
				if err := e.c.Cancel(now, tid, why); err != nil {
					return err
				}
			}
		}
		cp := *old
		for range a.Create {
			tid, err := e.makeReplica(&cp, a.Template, a.Revision, now)
			if err != nil {
				return err
			}
			made = append(made, tid)
		}
		cp.Status, cp.Endpoints = a.Status, a.Endpoints
		for _, n := range a.Notes {
			cp.Notes = addNote(cp.Notes, n)
		}
		if len(made) == 0 && len(a.Stop) == 0 && len(a.Notes) == 0 && a.Event == "" &&
			sameJSON(old.Status, cp.Status) && sameJSON(old.Endpoints, cp.Endpoints) {
			return nil // nothing changed: no commit
		}
		e.stageService(id, &cp, a.Event, a.EventReason, now)
		return nil
	}})
	return made, err
}

// makeReplica submits the next replica of rec (rec.NextReplica advances):
// the template as a task of the service's queue, labelled with the
// service and revision, spread over nodes and zones unless the template
// says how to place replicas apart.
func (sv *serviceCommands) makeReplica(rec *ServiceRecord, tmpl api.Task, rev string, now time.Time) (string, error) {
	e := sv.e
	t := tmpl
	name := rec.Spec.Name
	t.ID = name + "-" + strconv.FormatUint(rec.NextReplica, 10)
	rec.NextReplica++
	t.Service, t.Queue = name, rec.Spec.Queue
	t.Metadata = maps.Clone(tmpl.Metadata)
	if t.Metadata == nil {
		t.Metadata = map[string]string{}
	}
	t.Metadata[ServiceLabel], t.Metadata[RevisionLabel] = name, rev
	if len(t.Spread) == 0 && len(t.AntiAffinity) == 0 {
		t.Spread = DefaultReplicaSpread(name)
	}
	spec, err := e.prepareFor(rec.Tenant, &t)
	if err != nil {
		return "", errs.Prefix("template", err)
	}
	return e.submit(rec.Tenant, &t, spec, true, now, "")
}

// DefaultReplicaSpread is how replicas of a template that gives neither
// spread nor anti-affinity spread: Kubernetes' default topology spread
// (its system defaults: at most 3 more on a node, 5 more in a zone, as
// scores).
func DefaultReplicaSpread(service string) []api.Spread {
	sel := api.TaskSelector{Selector: map[string]string{ServiceLabel: service}}
	return []api.Spread{
		{TaskSelector: sel, TopologyKey: api.NodeNameLabel, MaxSkew: 3, WhenUnsatisfiable: "place"},
		{TaskSelector: sel, TopologyKey: "zone", MaxSkew: 5, WhenUnsatisfiable: "place"},
	}
}

// addNote appends n to notes, keeping the latest maxServiceNotes.
func addNote(notes []service.Note, n service.Note) []service.Note {
	out := make([]service.Note, 0, min(len(notes)+1, maxServiceNotes))
	if len(notes)+1 > maxServiceNotes {
		notes = notes[len(notes)+1-maxServiceNotes:]
	}
	out = append(out, notes...)
	return append(out, n)
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
