package kube

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/kube/kubewire"
)

// WatchOnly runs the informers a Scheduler runs on every cluster (Nodes,
// Pods, PriorityClasses, with the same transform) through client-go's own
// decoding, and decides nothing, until ctx ends. With bindFor set it also binds the pods of
// that schedulerName, as they come, to the nodes in turn (128 at a time,
// as a Scheduler's bind workers): what any client-go scheduler pays to
// see the cluster and carry out decisions, without making any.
// `hetsched-bench kube` measures its CPU as a client-go scheduler's floor
// (`hetsched kube --watch-only --bind-floor`). A Scheduler's own pod watch
// and Bindings take cheaper paths (package kubewire): it may
// cost less than this floor.
func WatchOnly(ctx context.Context, cs kubernetes.Interface, bindFor string, timeout time.Duration) error {
	f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTransform(stripManagedFields))
	var events atomic.Int64 // the handlers do as little as a handler can
	queue := make(chan *corev1.Pod, 4096)
	count := cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			events.Add(1)
			if p, ok := o.(*corev1.Pod); ok && bindFor != "" && p.Spec.SchedulerName == bindFor && p.Spec.NodeName == "" {
				select {
				case queue <- p:
				case <-ctx.Done():
				}
			}
		},
		UpdateFunc: func(any, any) { events.Add(1) },
		DeleteFunc: func(any) { events.Add(1) },
	}
	nodes := f.Core().V1().Nodes()
	for _, inf := range []cache.SharedIndexInformer{f.Core().V1().Pods().Informer(), nodes.Informer(), f.Scheduling().V1().PriorityClasses().Informer()} {
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
	var wg sync.WaitGroup
	if bindFor != "" {
		// The nodes as they are now, in turn: no decision, no lookups.
		all, err := nodes.Lister().List(labels.Everything())
		if err != nil || len(all) == 0 {
			return fmt.Errorf("kube: no nodes to bind to (%v)", err)
		}
		b := &kubewire.TurnBinder{Client: cs, Timeout: timeout}
		for _, n := range all {
			b.Nodes = append(b.Nodes, n.Name)
		}
		wg.Add(1)
		go func() { defer wg.Done(); b.Run(ctx, queue, 128) }()
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}
