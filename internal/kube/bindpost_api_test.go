package kube_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hetsched/hetsched/internal/kube"
)

// TestBindDirectAgainstTheAPIServer: a Binding the Scheduler posts itself
// binds the pod with its devices' annotation, and the API server's
// refusals keep their class: a pod bound already or of another uid is a
// conflict, a missing one not found. Both ways a Binding is posted: over
// the clientset's HTTP client, and over the binder's own connection.
func TestBindDirectAgainstTheAPIServer(t *testing.T) {
	type bindFunc func(ctx context.Context, e *env, ns, name string, uid types.UID, node string, ann map[string]string) error
	for _, tc := range []struct {
		name string
		bind bindFunc
	}{
		{"client", func(ctx context.Context, e *env, ns, name string, uid types.UID, node string, ann map[string]string) error {
			return kube.BindDirect(ctx, e.cs, ns, name, uid, node, ann)
		}},
		{"h2", func(ctx context.Context, e *env, ns, name string, uid types.UID, node string, ann map[string]string) error {
			return kube.BindDirectH2(ctx, e.c.RESTConfig(1000, 2000), e.cs, ns, name, uid, node, ann)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { testBindDirect(t, tc.bind) })
	}
}

func testBindDirect(t *testing.T, bind func(ctx context.Context, e *env, ns, name string, uid types.UID, node string, ann map[string]string) error) {
	e := newEnv(t)
	e.node("n0", nil, nil)
	p := e.create(e.podSpec("p0", map[string]string{"cpu": "1"}))
	other := e.create(e.podSpec("p1", map[string]string{"cpu": "1"}))
	ann := map[string]string{kube.AnnotationDevices: "gpu0,gpu1"}
	if err := bind(e.ctx, e, e.ns, p.Name, p.UID, e.prefix+"n0", ann); err != nil {
		t.Fatal(err)
	}
	got := e.get(p.Name)
	if got.Spec.NodeName != e.prefix+"n0" || got.Annotations[kube.AnnotationDevices] != "gpu0,gpu1" {
		t.Fatalf("bound to %q with devices %q, want %q and gpu0,gpu1", got.Spec.NodeName, got.Annotations[kube.AnnotationDevices], e.prefix+"n0")
	}
	if err := bind(e.ctx, e, e.ns, p.Name, p.UID, e.prefix+"n0", nil); !apierrors.IsConflict(err) {
		t.Errorf("binding a bound pod again: %v, want a conflict", err)
	}
	if err := bind(e.ctx, e, e.ns, other.Name, p.UID, e.prefix+"n0", nil); !apierrors.IsConflict(err) {
		t.Errorf("binding with another pod's uid: %v, want a conflict", err)
	}
	if e.get(other.Name).Spec.NodeName != "" {
		t.Error("a Binding of the wrong uid bound the pod")
	}
	if err := bind(e.ctx, e, e.ns, "nobody", "uid-x", e.prefix+"n0", nil); !apierrors.IsNotFound(err) {
		t.Errorf("binding a missing pod: %v, want not found", err)
	}
}
