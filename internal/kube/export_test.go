package kube

import (
	"context"
	"errors"
	"fmt"

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

// BindDirectH2 posts a Binding as a Scheduler run by hetsched kube does:
// the poster's h2Binder over cfg, its own HTTP/2 connection. It fails
// when cfg is one the binder is not used for.
func BindDirectH2(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, ns, name string, uid types.UID, node string, annotations map[string]string) error {
	p := newBindPoster(cs)
	p.h2 = newH2Binder(cfg, p.base)
	if p.h2 == nil {
		return errors.New("no h2 binder for this configuration")
	}
	defer p.h2.close()
	err := p.bind(ctx, ns, name, uid, node, annotations)
	p.h2.mu.Lock()
	dialed := p.h2.conn != nil
	p.h2.mu.Unlock()
	if !dialed || p.h2off.Load() {
		return fmt.Errorf("the binding did not go over the h2 binder (%v)", err)
	}
	return err
}

// LeanPodInformer is the Scheduler's lean Pod informer (leanwatch.go, its
// transform trimming listed pods as the watched ones are decoded)
// over cfg, for the tests against the API server.
func LeanPodInformer(cfg *rest.Config, cs kubernetes.Interface) (cache.SharedIndexInformer, error) {
	rc, err := leanClient(cfg, cs)
	if err != nil {
		return nil, err
	}
	inf := leanInformer(rc, cs, "pods", &corev1.Pod{}, &corev1.PodList{}, 0, podIndexers())
	if err := inf.SetTransform(trimCached); err != nil { // as the Scheduler's factory sets it
		return nil, err
	}
	return inf, nil
}

// LeanPod trims p to the lean pod (leanpod.go).
func LeanPod(p *corev1.Pod) { leanPod(p) }
