package kubewire

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TurnBinder binds pods to Nodes in turn, deciding nothing: the floor a
// scheduler's Bindings cost (kube.WatchOnly), and the benchmark's bare
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
