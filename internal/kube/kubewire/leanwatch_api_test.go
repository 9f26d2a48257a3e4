package kubewire_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/kube/kubetest"
	"github.com/hetsched/hetsched/internal/kube/kubewire"
)

// TestLeanWatchAgainstTheAPIServer: the lean Pod informer (with LeanPod
// as its transform, as the Scheduler sets it) holds what the API server returns of a pod listed before it started and
// of one created and then changed while it watched, managedFields left
// out and every other field as sent.
func TestLeanWatchAgainstTheAPIServer(t *testing.T) {
	e := newEnv(t)
	listed := e.create("listed")
	newInformer, err := kubewire.PodInformer(e.c.RESTConfig(100, 200), e.cs)
	if err != nil {
		t.Fatal(err)
	}
	pods := newInformer(e.cs, 0)
	// As the Scheduler's factory sets it: listed pods are trimmed as the
	// watched ones are decoded.
	if err := pods.SetTransform(func(o any) (any, error) {
		if p, ok := o.(*corev1.Pod); ok {
			kubewire.LeanPod(p)
		}
		return o, nil
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go pods.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		t.Fatal("the lean informer did not sync")
	}
	watched := e.create("watched")
	watched.Labels = map[string]string{"changed": "yes"}
	watched, err = e.cs.CoreV1().Pods(e.ns).Update(e.ctx, watched, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameQuantity := cmp.Comparer(func(a, b k8sresource.Quantity) bool { return a.Cmp(b) == 0 })
	for _, want := range []*corev1.Pod{listed, watched} {
		if len(want.ManagedFields) == 0 {
			t.Fatalf("the API server sent %s without managedFields: nothing to leave out", want.Name)
		}
		var got *corev1.Pod
		if err := kubetest.WaitFor(e.ctx, time.Minute, func() (bool, string, error) {
			o, ok, _ := pods.GetStore().GetByKey(e.ns + "/" + want.Name)
			got, _ = o.(*corev1.Pod)
			return ok && got.ResourceVersion == want.ResourceVersion, "not yet", nil
		}); err != nil {
			t.Fatalf("the lean informer holding %s at %s: %v", want.Name, want.ResourceVersion, err)
		}
		w := want.DeepCopy()
		kubewire.LeanPod(w)
		if d := cmp.Diff(w, got, sameQuantity); d != "" {
			t.Fatalf("%s: (-API server +lean informer):\n%s", want.Name, d)
		}
	}
}
