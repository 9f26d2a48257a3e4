package kube_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/kube"
)

// TestLeanWatchSkipsManagedFieldsFromTheAPIServer: the lean informer (no
// transform set) holds a pod and a node without the managedFields the API
// server sends, both from its list and from its watch, and with every
// other field the API server returns.
func TestLeanWatchSkipsManagedFieldsFromTheAPIServer(t *testing.T) {
	e := newEnv(t)
	e.node("lean", nil, nil)
	listed := e.create(e.podSpec("listed", map[string]string{"cpu": "1"}))
	rc, err := kube.LeanClient(e.c.RESTConfig(100, 200))
	if err != nil {
		t.Fatal(err)
	}
	pods := kube.LeanInformer(rc, e.cs, "pods", &corev1.Pod{}, &corev1.PodList{}, 0)
	nodes := kube.LeanInformer(rc, e.cs, "nodes", &corev1.Node{}, &corev1.NodeList{}, 0)
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go pods.RunWithContext(ctx)
	go nodes.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced, nodes.HasSynced) {
		t.Fatal("the lean informers did not sync")
	}
	watched := e.create(e.podSpec("watched", map[string]string{"cpu": "1"}))
	for _, want := range []*corev1.Pod{listed, watched} {
		if len(want.ManagedFields) == 0 {
			t.Fatalf("the API server sent %s without managedFields: nothing to skip", want.Name)
		}
		var got *corev1.Pod
		e.wait("the lean informer holds "+want.Name, func() (bool, string) {
			o, ok, _ := pods.GetStore().GetByKey(e.ns + "/" + want.Name)
			got, _ = o.(*corev1.Pod)
			return ok, "not yet"
		})
		if got.ManagedFields != nil {
			t.Fatalf("%s: managedFields kept: %v", want.Name, got.ManagedFields)
		}
		w := want.DeepCopy()
		w.ManagedFields = nil
		if d := kube.ObjDiff(w, got); d != "" {
			t.Fatalf("%s: (-API server +lean informer):\n%s", want.Name, d)
		}
	}
	o, ok, _ := nodes.GetStore().GetByKey(e.prefix + "lean")
	if n, _ := o.(*corev1.Node); !ok || n.ManagedFields != nil || n.Status.Allocatable.Cpu().IsZero() {
		t.Fatalf("the lean node: %v %+v", ok, o)
	}
}
