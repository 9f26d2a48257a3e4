package server

import (
	"encoding/json"
	"math"
	"net/http"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/jsonread"
	"github.com/hetsched/hetsched/internal/service"
)

// serviceView is the API's service object (API.md "Service"): the spec,
// its status, and what describe shows (generation, created, the latest
// decisions).
type serviceView struct {
	api.Service
	Status     service.Status `json:"status"`
	Generation int64          `json:"generation"`
	Created    time.Time      `json:"created"`
	Notes      []service.Note `json:"notes,omitempty"`
}

func serviceViewOf(rec *engine.ServiceRecord) serviceView {
	return serviceView{Service: rec.Spec, Status: rec.Status, Generation: rec.Generation, Created: rec.Created, Notes: rec.Notes}
}

// serviceWire mirrors api.Service with the template raw, decoded as a
// task for full field paths ("template.resources.cpu").
type serviceWire struct {
	api.Service
	Template json.RawMessage `json:"template"`
}

// decodeService decodes and validates a service.
func decodeService(b []byte) (api.Service, error) {
	var w serviceWire
	if err := decodeStrict(b, &w); err != nil {
		return api.Service{}, err
	}
	svc := w.Service
	if len(w.Template) == 0 {
		return api.Service{}, errs.Invalid("template", "a service needs a template (its replicas' task)")
	}
	r := jsonread.New(w.Template)
	t, err := api.DecodeTask(r)
	if err == nil {
		if ferr := r.Finish(); ferr != nil {
			err = errs.Invalid("", "%v", ferr)
		}
	}
	if err != nil {
		return api.Service{}, errs.Prefix("template", err)
	}
	svc.Template = t
	if err := svc.Validate(); err != nil {
		return api.Service{}, err
	}
	return svc, nil
}

// serviceAPI is the services' handlers (API.md "services"): a tenant
// sees and changes only its own services.
type serviceAPI struct {
	s *Server
}

// serviceOf is the service the request's path names, if p sees it.
func (sa *serviceAPI) serviceOf(w http.ResponseWriter, r *http.Request) (*engine.ServiceRecord, Principal, bool) {
	s := sa.s
	p := principalOf(w, r)
	name := r.PathValue("name")
	rec, ok := s.eng.Service(p.qualify(name))
	if !ok || !p.sees(rec.Tenant) {
		writeError(w, errs.New(errs.NotFound, "name", "no service %q", name))
		return nil, p, false
	}
	return rec, p, true
}

// serviceBody is the path's service and the request's body decoded into
// v (strictly, or by decode when set); ok false: the answer is written.
func (sa *serviceAPI) serviceBody(w http.ResponseWriter, r *http.Request, v any) (*engine.ServiceRecord, Principal, bool) {
	rec, p, ok := sa.serviceOf(w, r)
	if !ok {
		return nil, p, false
	}
	b, err := readBody(w, r)
	if err == nil {
		if svc, isSvc := v.(*api.Service); isSvc {
			if *svc, err = decodeService(b); err == nil {
				svc.Template.User, err = p.userOf(svc.Template.User)
			}
		} else {
			err = decodeStrict(b, v)
		}
	}
	if err != nil {
		writeError(w, err)
		return nil, p, false
	}
	return rec, p, true
}

// answerService writes the service after a change (or the change's
// error, as the caller's tenant sees it), and wakes the controllers.
func (sa *serviceAPI) answerService(w http.ResponseWriter, p Principal, rec *engine.ServiceRecord, err error) {
	s := sa.s
	if err != nil {
		writeError(w, engine.LocalError(p.scope(), err))
		return
	}
	s.services.Wake()
	writeJSON(w, http.StatusOK, serviceViewOf(rec))
}

func (sa *serviceAPI) createService(w http.ResponseWriter, r *http.Request) {
	s := sa.s
	if s.services == nil {
		writeError(w, errs.New(errs.Unavailable, "", "this server runs no service controllers"))
		return
	}
	b, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	svc, err := decodeService(b)
	if err != nil {
		writeError(w, err)
		return
	}
	p := principalOf(w, r)
	tenant := p.owner()
	if svc.Template.User, err = p.userOf(svc.Template.User); err != nil {
		writeError(w, errs.Prefix("template", err))
		return
	}
	rec, created, err := s.eng.CreateService(r.Context(), tenant, svc)
	if err != nil {
		writeError(w, engine.LocalError(p.scope(), err))
		return
	}
	s.services.Wake()
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, serviceViewOf(rec))
}

func (sa *serviceAPI) listServices(w http.ResponseWriter, r *http.Request) {
	s := sa.s
	p := principalOf(w, r)
	tenant := ""
	if p.Role != RoleAdmin {
		tenant = p.Tenant
	}
	recs := s.eng.Services(tenant)
	views := make([]serviceView, len(recs))
	for i, rec := range recs {
		views[i] = serviceViewOf(rec)
		if p.scope() == "" {
			views[i].Name = rec.ID() // an admin sees the engine's names
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"services": views})
}

func (sa *serviceAPI) getService(w http.ResponseWriter, r *http.Request) {
	if rec, _, ok := sa.serviceOf(w, r); ok {
		writeJSON(w, http.StatusOK, serviceViewOf(rec))
	}
}

func (sa *serviceAPI) putService(w http.ResponseWriter, r *http.Request) {
	s := sa.s
	var svc api.Service
	rec, p, ok := sa.serviceBody(w, r, &svc)
	if !ok {
		return
	}
	if svc.Name != rec.Spec.Name {
		writeError(w, errs.Invalid("name", "must be the path's service %q, got %q", rec.Spec.Name, svc.Name))
		return
	}
	out, err := s.eng.UpdateService(r.Context(), rec.ID(), svc)
	sa.answerService(w, p, out, err)
}

func (sa *serviceAPI) deleteService(w http.ResponseWriter, r *http.Request) {
	s := sa.s
	rec, p, ok := sa.serviceOf(w, r)
	if ok {
		sa.answerService(w, p, rec, s.eng.DeleteService(r.Context(), rec.ID()))
	}
}

// scaleService is POST …/scale {"replicas": N}.
func (sa *serviceAPI) scaleService(w http.ResponseWriter, r *http.Request) {
	s := sa.s
	var body struct {
		Replicas *int `json:"replicas"`
	}
	rec, p, ok := sa.serviceBody(w, r, &body)
	if !ok {
		return
	}
	if body.Replicas == nil {
		writeError(w, errs.Invalid("replicas", "required: the replica count to run"))
		return
	}
	out, err := s.eng.ScaleService(r.Context(), rec.ID(), *body.Replicas)
	sa.answerService(w, p, out, err)
}

// serviceEndpoints is GET …/endpoints: the ready replicas' node, address
// and port, as the service's controller last published them.
func (sa *serviceAPI) serviceEndpoints(w http.ResponseWriter, r *http.Request) {
	rec, p, ok := sa.serviceOf(w, r)
	if !ok {
		return
	}
	eps := make([]service.Endpoint, len(rec.Endpoints))
	for i, e := range rec.Endpoints {
		e.Replica = engine.LocalID(p.scope(), e.Replica)
		eps[i] = e
	}
	writeJSON(w, http.StatusOK, map[string]any{"service": rec.Spec.Name, "ready": rec.Status.Ready,
		"desired": rec.Status.Desired, "endpoints": eps})
}

// replicaState is one live replica as GET …/replicas shows it: its task's
// state and node, and its probes' states and restarts in place as its
// agent last reported them.
type replicaState struct {
	ID       string `json:"id"`
	State    string `json:"state"`
	Node     string `json:"node,omitempty"`
	Revision string `json:"revision"`
	Started  bool   `json:"started"`
	Ready    bool   `json:"ready"`
	Restarts int    `json:"restarts"`
	// Restarted is why the command last restarted in place; Probe why a
	// probe fails now.
	Restarted string `json:"restarted,omitempty"`
	Probe     string `json:"probe,omitempty"`
}

// serviceReplicas is GET …/replicas: the live replicas with their probe
// states (kubectl get pods' READY and RESTARTS).
func (sa *serviceAPI) serviceReplicas(w http.ResponseWriter, r *http.Request) {
	s := sa.s
	rec, p, ok := sa.serviceOf(w, r)
	if !ok {
		return
	}
	out := []replicaState{}
	for _, t := range s.eng.Replicas(rec.ID()) {
		if st, ok := core.ParseState(t.State); ok && st.Terminal() {
			continue
		}
		rs := replicaState{ID: engine.LocalID(p.scope(), t.Spec.ID), State: t.State, Node: t.Node, Revision: t.Spec.Metadata[engine.RevisionLabel]}
		if b, ok := s.eng.TaskBeat(t.Node, t.Spec.ID); ok && b.Replica {
			rs.Started, rs.Ready, rs.Restarts, rs.Restarted, rs.Probe = b.Started, b.Ready, b.Restarts, b.Restarted, b.Probe
		}
		out = append(out, rs)
	}
	writeJSON(w, http.StatusOK, map[string]any{"service": rec.Spec.Name, "replicas": out})
}

// maxPushedMetrics bounds the values of one push.
const maxPushedMetrics = 16

// pushServiceMetrics is POST …/metrics {"replica": "echo-3", "metrics":
// {"requests_per_second": 120}}: a replica's custom metrics for the
// autoscaler.
func (sa *serviceAPI) pushServiceMetrics(w http.ResponseWriter, r *http.Request) {
	s := sa.s
	var body struct {
		Replica string             `json:"replica"`
		Metrics map[string]float64 `json:"metrics"`
	}
	rec, p, ok := sa.serviceBody(w, r, &body)
	if !ok {
		return
	}
	if len(body.Metrics) == 0 || len(body.Metrics) > maxPushedMetrics {
		writeError(w, errs.Invalid("metrics", "must hold 1 to %d values", maxPushedMetrics))
		return
	}
	for k, v := range body.Metrics {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			writeError(w, errs.Invalid("metrics."+k, "must be a finite number"))
			return
		}
	}
	id := p.qualify(body.Replica)
	t, ok := s.eng.Task(id)
	if body.Replica == "" || !ok || t.Tenant != rec.Tenant || engine.QualifyID(t.Tenant, t.Spec.Service) != rec.ID() {
		writeError(w, errs.New(errs.NotFound, "replica", "no replica %q of service %q", body.Replica, rec.Spec.Name))
		return
	}
	if err := s.services.Push(rec.ID(), rec, id, body.Metrics, time.Now()); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
