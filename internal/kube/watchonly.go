package kube

import (
	"context"
	"fmt"
	"sync/atomic"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// WatchOnly runs the informers a Scheduler runs on every cluster (Nodes,
// Pods, PriorityClasses, with the same transform and client) and nothing
// else, until ctx ends: what any client-go scheduler pays just to see the
// cluster. `hetsched bench kube` measures its CPU as the floor of a
// scheduler's (`hetsched kube --watch-only`).
func WatchOnly(ctx context.Context, cs kubernetes.Interface) error {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(stripManagedFields))
	var events atomic.Int64 // the handlers do as little as a handler can
	count := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { events.Add(1) },
		UpdateFunc: func(any, any) { events.Add(1) },
		DeleteFunc: func(any) { events.Add(1) },
	}
	for _, inf := range []cache.SharedIndexInformer{f.Core().V1().Pods().Informer(), f.Core().V1().Nodes().Informer(), f.Scheduling().V1().PriorityClasses().Informer()} {
		if _, err := inf.AddEventHandler(count); err != nil {
			return err
		}
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
		if !ok && ctx.Err() == nil {
			return fmt.Errorf("kube: the %v informer did not sync", typ)
		}
	}
	<-ctx.Done()
	return nil
}
