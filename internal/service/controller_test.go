package service

import (
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/autoscale"
	"github.com/hetsched/hetsched/internal/resource"
)

var t0 = time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)

func echo() api.Service {
	return api.Service{Name: "echo", Replicas: 2, Template: api.ServiceTemplate{Command: []string{"./serve"},
		Readiness: &api.Probe{TCP: &api.TCPProbe{Port: 8080}},
	}}
}

func up(id, rev string) Replica {
	return Replica{ID: id, Revision: rev, Running: true, Started: true, Ready: true, Created: t0, Address: "10.0.0.1"}
}

// TestControllerKeepsReplicasRunning: starts the count, reports the ready
// ones as endpoints, restarts one whose liveness failed, replaces a
// failed one after the backoff, and rolls a changed template out without
// going below the count.
func TestControllerKeepsReplicasRunning(t *testing.T) {
	c, err := New(echo())
	if err != nil {
		t.Fatal(err)
	}
	st := c.Step(t0, nil, nil)
	if st.Create != 2 || st.Revision == "" || st.Status.Desired != 2 {
		t.Fatalf("first step: %+v, want 2 replicas started", st)
	}
	rev := st.Revision
	a, b := up("a", rev), up("b", rev)
	st = c.Step(t0, []Replica{a, b}, nil)
	if st.Create != 0 || len(st.Stop) != 0 || st.Status.Ready != 2 || len(st.Endpoints) != 2 || st.Endpoints[0].Port != 8080 {
		t.Fatalf("two ready: %+v", st)
	}
	b.Ready = false
	st = c.Step(t0, []Replica{a, b}, nil)
	if st.Create != 0 || st.Status.Ready != 1 || len(st.Endpoints) != 1 || st.Endpoints[0].Replica != "a" {
		t.Fatalf("b not ready: %+v, want it out of the endpoints and nothing started", st)
	}
	c.ReplicaEnded(t0, time.Minute)
	st = c.Step(t0.Add(5*time.Second), []Replica{a}, nil)
	if st.Create != 0 || !st.RetryAt.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("5 s after b failed: %+v, want its replacement at 10 s", st)
	}
	if st = c.Step(t0.Add(10*time.Second), []Replica{a}, nil); st.Create != 1 {
		t.Fatalf("after the backoff: %+v, want one start", st)
	}
	svc := echo()
	svc.Template.Command = []string{"./serve", "--v2"}
	if err := c.Update(svc); err != nil {
		t.Fatal(err)
	}
	b = up("b", rev)
	st = c.Step(t0.Add(time.Minute), []Replica{a, b}, nil)
	if st.Revision == rev || st.Create != 1 || len(st.Stop) != 0 {
		t.Fatalf("a new template: %+v, want one of the new revision started, nothing stopped yet (maxUnavailable 0)", st)
	}
	st = c.Step(t0.Add(2*time.Minute), []Replica{a, b, up("c", st.Revision)}, nil)
	if len(st.Stop) != 1 || st.Create != 0 {
		t.Fatalf("the new one ready: %+v, want one old stopped", st)
	}
	svc.Replicas = 3
	if err := c.Update(svc); err != nil {
		t.Fatal(err)
	}
	if ls := c.Step(t0.Add(3*time.Minute), nil, nil).Status.LastScale; ls == nil || ls.From != 2 || ls.To != 3 || !ls.At.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("replicas set to 3: last scale %+v, want 2 to 3 stamped by the step", ls)
	}
}

// TestControllerAutoscales: the autoscaler sets the desired count, the
// status says the last change and why, and a restarted controller
// resumes the count it had scaled to.
func TestControllerAutoscales(t *testing.T) {
	svc := echo()
	svc.Template.Resources = resource.List{"cpu": 1000}
	svc.Autoscale = &api.Autoscale{Min: 2, Max: 10, Metrics: []api.AutoscaleMetric{{Resource: "cpu", Target: "70%"}}}
	c, err := New(svc)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := Revision(&svc.Template)
	if err != nil {
		t.Fatal(err)
	}
	hot := []autoscale.Sample{{Ready: true, Value: 1.4, Request: 1}, {Ready: true, Value: 1.4, Request: 1}}
	st := c.Step(t0, []Replica{up("a", rev), up("b", rev)}, [][]autoscale.Sample{hot})
	if st.Status.Desired != 4 || st.Scaled == nil || st.Status.LastScale == nil || !strings.HasPrefix(st.Status.LastScale.Reason, "ScaleUp") {
		t.Fatalf("at 200 %% of the target: %+v, want 4 desired and the reason", st)
	}
	if st.Create != 2 {
		t.Errorf("starts %d, want 2 more", st.Create)
	}
	again, err := New(svc)
	if err != nil {
		t.Fatal(err)
	}
	again.Restore(st.Status)
	if got := again.Step(t0, nil, nil).Status; got.Desired != 4 || got.LastScale == nil || got.LastScale.To != 4 {
		t.Errorf("restored: %+v, want 4 desired and the last scale kept", got)
	}
}
