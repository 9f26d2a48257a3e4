package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// BindDirect posts a Binding as a Scheduler does (bindPoster), for the
// tests against the API server.
func BindDirect(ctx context.Context, cs kubernetes.Interface, ns, name string, uid types.UID, node string, annotations map[string]string) error {
	return newBindPoster(cs).bind(ctx, ns, name, uid, node, annotations)
}

// LeanPodInformer is the Scheduler's lean Pod informer (leanwatch.go, its
// transform trimming listed pods as the watched ones are decoded)
// over cfg, for the tests against the API server.
func LeanPodInformer(cfg *rest.Config, cs kubernetes.Interface) (cache.SharedIndexInformer, error) {
	rc, err := leanClient(cfg, cs)
	if err != nil {
		return nil, err
	}
	inf := leanInformer(rc, cs, "pods", &corev1.Pod{}, &corev1.PodList{}, 0)
	if err := inf.SetTransform(trimCached); err != nil { // as the Scheduler's factory sets it
		return nil, err
	}
	return inf, nil
}

// LeanPod trims p to the lean pod (leanpod.go).
func LeanPod(p *corev1.Pod) { leanPod(p) }
