package kube_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/hetsched/hetsched/internal/kube"
)

// TestBindDirectAgainstTheAPIServer: a Binding the Scheduler posts itself
// binds the pod with its devices' annotation, and the API server's
// refusals keep their class: a pod bound already or of another uid is a
// conflict, a missing one not found.
func TestBindDirectAgainstTheAPIServer(t *testing.T) {
	e := newEnv(t)
	e.node("n0", nil, nil)
	p := e.create(e.podSpec("p0", map[string]string{"cpu": "1"}))
	other := e.create(e.podSpec("p1", map[string]string{"cpu": "1"}))
	ann := map[string]string{kube.AnnotationDevices: "gpu0,gpu1"}
	if err := kube.BindDirect(e.ctx, e.cs, e.ns, p.Name, p.UID, e.prefix+"n0", ann); err != nil {
		t.Fatal(err)
	}
	got := e.get(p.Name)
	if got.Spec.NodeName != e.prefix+"n0" || got.Annotations[kube.AnnotationDevices] != "gpu0,gpu1" {
		t.Fatalf("bound to %q with devices %q, want %q and gpu0,gpu1", got.Spec.NodeName, got.Annotations[kube.AnnotationDevices], e.prefix+"n0")
	}
	if err := kube.BindDirect(e.ctx, e.cs, e.ns, p.Name, p.UID, e.prefix+"n0", nil); !apierrors.IsConflict(err) {
		t.Errorf("binding a bound pod again: %v, want a conflict", err)
	}
	if err := kube.BindDirect(e.ctx, e.cs, e.ns, other.Name, p.UID, e.prefix+"n0", nil); !apierrors.IsConflict(err) {
		t.Errorf("binding with another pod's uid: %v, want a conflict", err)
	}
	if e.get(other.Name).Spec.NodeName != "" {
		t.Error("a Binding of the wrong uid bound the pod")
	}
	if err := kube.BindDirect(e.ctx, e.cs, e.ns, "nobody", "uid-x", e.prefix+"n0", nil); !apierrors.IsNotFound(err) {
		t.Errorf("binding a missing pod: %v, want not found", err)
	}
}
