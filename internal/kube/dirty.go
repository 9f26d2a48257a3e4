package kube

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// dirtySet collects the pods and nodes that changed since the reconcile
// loop last looked, by key; a key changed many times is reconciled once.
type dirtySet struct {
	mu     sync.Mutex
	pods   map[string]struct{}
	nodes  map[string]struct{}
	queues map[string]struct{} // Queue names; "" is the ResourceSchedule
	claims map[string]struct{} // ResourceClaims
	notify chan struct{}       // one buffered wake-up
}

func newDirtySet() dirtySet {
	return dirtySet{pods: map[string]struct{}{}, nodes: map[string]struct{}{}, queues: map[string]struct{}{}, claims: map[string]struct{}{}, notify: make(chan struct{}, 1)}
}

func objectKey(o any) (string, bool) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		return d.Key, true
	}
	k, err := cache.MetaNamespaceKeyFunc(o)
	return k, err == nil
}

func (d *dirtySet) addPod(o any) {
	if k, ok := objectKey(o); ok {
		d.add(&d.pods, k)
	}
}

func (d *dirtySet) addNode(o any) {
	if n, ok := o.(*corev1.Node); ok {
		d.add(&d.nodes, n.Name)
		return
	}
	if k, ok := objectKey(o); ok {
		d.add(&d.nodes, k)
	}
}

// addPodKey marks a pod by its namespace/name.
func (d *dirtySet) addPodKey(k string) { d.add(&d.pods, k) }

// add marks k in *m (one of d's maps, read under the lock: take may
// replace it).
func (d *dirtySet) add(m *map[string]struct{}, k string) {
	d.mu.Lock()
	(*m)[k] = struct{}{}
	d.mu.Unlock()
	select {
	case d.notify <- struct{}{}:
	default:
	}
}

// take returns what changed and starts afresh.
func (d *dirtySet) take() (pods, nodes, queues, claims []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return drainKeys(&d.pods), drainKeys(&d.nodes), drainKeys(&d.queues), drainKeys(&d.claims)
}

// drainKeys returns *m's keys and empties it. A map that held many keys
// is replaced rather than cleared: clearing costs its capacity, not its
// length, and a map that once held a burst of keys would cost that on
// every take after it.
func drainKeys[V any](m *map[string]V) []string {
	out := make([]string, 0, len(*m))
	for k := range *m {
		out = append(out, k)
	}
	if len(*m) > 64 {
		*m = map[string]V{}
	} else {
		clear(*m)
	}
	return out
}

func (d *dirtySet) addClaim(o any) {
	if k, ok := objectKey(o); ok {
		d.add(&d.claims, k)
	}
}

// takeClaims returns the claims marked changed and forgets them.
func (d *dirtySet) takeClaims() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return drainKeys(&d.claims)
}
