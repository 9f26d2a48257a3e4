package kubewire_test

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/hetsched/hetsched/internal/kube/kubewire"
)

// TestBindersAgainstTheAPIServer: a Binding each binder posts binds the
// pod with its devices' annotation, and the API server's refusals keep
// their class: a pod bound already or of another uid is a conflict, a
// missing one not found. Both ways a Binding is posted: client-go's Bind
// and the poster over the clientset's HTTP client.
func TestBindersAgainstTheAPIServer(t *testing.T) {
	for _, via := range kubewire.BindVias {
		t.Run(string(via), func(t *testing.T) {
			e := newEnv(t)
			b, err := kubewire.NewBinder(via, e.cs)
			if err != nil {
				t.Fatalf("NewBinder(%s): %v", via, err)
			}
			p := e.create("p0")
			other := e.create("p1")
			const devices = "hetsched.io/devices"
			if err := b.Bind(e.ctx, e.ns, p.Name, p.UID, "n0", map[string]string{devices: "gpu0,gpu1"}); err != nil {
				t.Fatal(err)
			}
			if node, got := e.bound(p.Name, devices); node != "n0" || got != "gpu0,gpu1" {
				t.Fatalf("bound to %q with devices %q, want n0 and gpu0,gpu1", node, got)
			}
			if err := b.Bind(e.ctx, e.ns, p.Name, p.UID, "n0", nil); !apierrors.IsConflict(err) {
				t.Errorf("binding a bound pod again: %v, want a conflict", err)
			}
			if err := b.Bind(e.ctx, e.ns, other.Name, p.UID, "n0", nil); !apierrors.IsConflict(err) {
				t.Errorf("binding with another pod's uid: %v, want a conflict", err)
			}
			if node, _ := e.bound(other.Name, devices); node != "" {
				t.Error("a Binding of the wrong uid bound the pod")
			}
			if err := b.Bind(e.ctx, e.ns, "nobody", "uid-x", "n0", nil); !apierrors.IsNotFound(err) {
				t.Errorf("binding a missing pod: %v, want not found", err)
			}
		})
	}
}
