package kube

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
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
		b := &TurnBinder{Client: cs, Timeout: timeout}
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

// TurnBinder binds pods to Nodes in turn, deciding nothing: the floor a
// scheduler's Bindings cost (WatchOnly), and the benchmark's bare
// binding limit. A pod is bound once; one whose Binding failed is tried
// again when it comes again.
type TurnBinder struct {
	Client  kubernetes.Interface
	Nodes   []string
	Timeout time.Duration // of each Binding
	next    atomic.Int64
	once    sync.Map // pod uid -> true
}

// Run binds the pods from queue, workers at a time, until ctx ends.
func (b *TurnBinder) Run(ctx context.Context, queue <-chan *corev1.Pod, workers int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case p := <-queue:
					b.bind(ctx, p)
				}
			}
		}()
	}
	wg.Wait()
}

func (b *TurnBinder) bind(ctx context.Context, p *corev1.Pod) {
	if _, dup := b.once.LoadOrStore(p.UID, true); dup {
		return
	}
	node := b.Nodes[int(b.next.Add(1))%len(b.Nodes)]
	bd := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID},
		Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	cctx, cancel := context.WithTimeout(ctx, b.Timeout)
	defer cancel()
	if err := b.Client.CoreV1().Pods(p.Namespace).Bind(cctx, bd, metav1.CreateOptions{}); err != nil {
		b.once.Delete(p.UID) // tried again when it comes again
	}
}
