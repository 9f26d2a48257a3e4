// Package service is a service's controller as a pure type (issue 44
// §1–2): the service (api.Service), its live replicas with their probes'
// states, the replicas' metrics and the time come in; what to start, stop
// and restart, the ready endpoints and the service's status come out. It
// joins the replica plans (package replicas), the autoscaler (package
// autoscale) and the probes' states (package probe). No I/O: the server
// stores the service, carries the steps out and reports the status.
//
// Glossary:
//
//	revision  the hash of the template: replicas of another are old, and
//	          are rolled out
//	desired   the replica count the service runs for: its replicas,
//	          or the autoscaler's decision when it autoscales
//	endpoint  a ready replica's node address and port
package service

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/autoscale"
	"github.com/hetsched/hetsched/internal/replicas"
)

// Replica is a live replica (placed or waiting, not ended) as the
// controller sees it.
type Replica struct {
	ID       string
	Revision string
	Running  bool
	// Started: its startup probe passed (true without one); Ready: its
	// readiness probe passes (true once started without one). A failed
	// liveness probe is its agent's to act on: the agent restarts the
	// command in place, and the replica is not ready meanwhile.
	Started, Ready bool
	Created        time.Time
	Node, Address  string // its node and the node's address ("" while not placed)
}

// Endpoint is where a ready replica answers: its node, the node's
// address (the host its agent serves from; "" when unknown) and the port.
type Endpoint struct {
	Replica string `json:"replica"`
	Node    string `json:"node"`
	Address string `json:"address,omitempty"`
	Port    int    `json:"port,omitempty"`
}

// Note is one decision of a service's, as describe shows it.
type Note struct {
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"` // scaled, unchanged, failed, created, stopped
	Message string    `json:"message"`
}

// LastScale is the last change of the desired count (API.md: status).
type LastScale struct {
	At     time.Time `json:"at"`
	From   int       `json:"from"`
	To     int       `json:"to"`
	Reason string    `json:"reason"`
}

// Status is a service's status (API.md "Service": status).
type Status struct {
	Replicas  int        `json:"replicas"`
	Ready     int        `json:"ready"`
	Desired   int        `json:"desired"`
	LastScale *LastScale `json:"lastScale,omitempty"`
}

// Step is what a controller step decides.
//
// Obligations: the caller starts Create replicas of Revision from the
// template, stops the Stop replicas, plans again at RetryAt when it is set, publishes Endpoints and Status, and
// records Scaled (an event and a metric) when it is set.
type Step struct {
	Create    int
	Revision  string
	Stop      []string
	RetryAt   time.Time
	Endpoints []Endpoint
	Status    Status
	Scaled    *autoscale.Decision // the autoscaler's decision, when it ran
}

// Controller is one service's controller.
type Controller struct {
	svc      api.Service
	revision string
	auto     *autoscale.Autoscaler
	hist     replicas.History
	desired  int
	last     *LastScale
	// set is a change of the desired count by the spec (Update), stamped
	// by the next Step.
	set *LastScale
}

// New makes a controller for svc (validated: an error names the field).
func New(svc api.Service) (*Controller, error) {
	c := &Controller{}
	if err := c.Update(svc); err != nil {
		return nil, err
	}
	c.desired = svc.Replicas
	return c, nil
}

// Update takes a changed service: a changed template is a new revision
// (rolled out), a changed autoscale spec a new autoscaler; the desired
// count follows replicas unless the service autoscales.
func (c *Controller) Update(svc api.Service) error {
	if err := svc.Validate(); err != nil {
		return err
	}
	rev, err := Revision(&svc.Template)
	if err != nil {
		return err
	}
	if svc.Autoscale != nil {
		changed := c.svc.Autoscale == nil || !sameJSON(*svc.Autoscale, *c.svc.Autoscale)
		if changed {
			if c.auto, err = autoscale.New(*svc.Autoscale); err != nil {
				return err
			}
		}
		c.setDesired(min(max(c.desired, svc.Autoscale.Min), svc.Autoscale.Max), "autoscale.min and max changed")
	} else {
		c.auto = nil
		c.setDesired(svc.Replicas, "replicas set")
	}
	c.svc, c.revision = svc, rev
	return nil
}

// setDesired changes the desired count as the spec says (a scale the
// next Step stamps); nothing before the first spec.
func (c *Controller) setDesired(n int, why string) {
	if c.revision != "" && n != c.desired {
		c.set = &LastScale{From: c.desired, To: n, Reason: why}
	}
	c.desired = n
}

// Restore takes the status a controller of the service published before
// (a restarted server's): an autoscaled service keeps the count it was
// scaled to, within min and max, and its last scale.
func (c *Controller) Restore(st Status) {
	if a := c.svc.Autoscale; a != nil && st.Desired >= a.Min && st.Desired <= a.Max {
		c.desired = st.Desired
	}
	c.last = st.LastScale
}

// ReplicaEnded records that a replica failed or was lost at now after
// running ran: its replacement waits for the backoff.
func (c *Controller) ReplicaEnded(now time.Time, ran time.Duration) { c.hist.Failed(now, ran) }

// Step decides at now for the live replicas and, when the service
// autoscales, the metrics' samples (one slice per autoscale metric, one
// sample per replica).
func (c *Controller) Step(now time.Time, live []Replica, samples [][]autoscale.Sample) Step {
	st := Step{Revision: c.revision}
	if c.set != nil {
		c.set.At, c.last, c.set = now, c.set, nil
	}
	if c.auto != nil {
		d := c.auto.Evaluate(now, c.desired, samples)
		st.Scaled = &d
		if d.Replicas != c.desired {
			c.last = &LastScale{At: now, From: c.desired, To: d.Replicas, Reason: d.Reason + ": " + d.Message}
			c.desired = d.Replicas
		}
	}
	rs := make([]replicas.Replica, 0, len(live))
	for _, r := range live {
		ready := r.Running && r.Started && r.Ready
		rs = append(rs, replicas.Replica{ID: r.ID, Revision: r.Revision, Running: r.Running, Ready: ready, Created: r.Created})
		if ready {
			st.Status.Ready++
			st.Endpoints = append(st.Endpoints, Endpoint{Replica: r.ID, Node: r.Node, Address: r.Address, Port: c.port()})
		}
	}
	spec := replicas.Spec{Replicas: c.desired, Revision: c.revision, MaxSurge: c.svc.Rollout.Surge(), MaxUnavailable: c.svc.Rollout.Unavailable()}
	p := replicas.Reconcile(now, spec, rs, c.hist)
	st.Create, st.Stop, st.RetryAt = p.Create, p.Stop, p.RetryAt
	st.Status.Replicas, st.Status.Desired, st.Status.LastScale = len(live), c.desired, c.last
	return st
}

// port is where the replicas answer: the template's first host port,
// else its readiness probe's, else its liveness probe's (0: none known).
func (c *Controller) port() int {
	t := &c.svc.Template
	if len(t.HostPorts) > 0 {
		return int(t.HostPorts[0].Port)
	}
	for _, p := range []*api.Probe{t.Readiness, t.Liveness} {
		switch {
		case p == nil:
		case p.HTTP != nil:
			return p.HTTP.Port
		case p.TCP != nil:
			return p.TCP.Port
		}
	}
	return 0
}

// Revision is the template's hash: replicas made from another are rolled
// out.
func Revision(t *api.ServiceTemplate) (string, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:5]), nil
}

func sameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
