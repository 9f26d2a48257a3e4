package kube

import (
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/hetsched/hetsched/internal/resource"
)

// The template memo: pods of one template share their lists of
// containers, init containers and tolerations (decoded parts,
// leanparts.go), so what a task takes from those lists alone (the
// request, the tolerations in hetsched's form) is worked out once per
// list and looked up by the lists' identity after that. A list is
// identified by the address of its first element and its length. That is
// sound because cached pods are never written (a list's elements never
// change) and because the memo holds each list it remembers, so its
// address cannot be reused for another while the entry lives. A pod's
// request also depends on its overhead and pod-level resources: a pod
// with either is worked out every time. Each memo holds at most
// maxMemoEntries; when full it starts afresh.

const maxMemoEntries = 4096

// listKey identifies a list by its first element's address and length.
type listKey[T any] struct {
	first *T
	n     int
}

func keyOf[T any](l []T) listKey[T] {
	if len(l) == 0 {
		return listKey[T]{}
	}
	return listKey[T]{&l[0], len(l)}
}

// requestKey identifies the lists a pod's request is made of.
type requestKey struct {
	containers, init listKey[corev1.Container]
}

type memoEntry[V any] struct {
	hold any // the lists the key names, kept alive
	v    V
	err  error
}

// memo is a bounded map from lists' identity to what was made of them.
type memo[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]memoEntry[V]
}

func (m *memo[K, V]) get(k K) (memoEntry[V], bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[k]
	return e, ok
}

func (m *memo[K, V]) put(k K, e memoEntry[V]) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= maxMemoEntries {
		m.m = map[K]memoEntry[V]{}
	}
	m.m[k] = e
}

// templateMemo remembers pods' requests and tolerations by the lists
// they were made from; a nil *templateMemo works each out every time.
type templateMemo struct {
	requests    memo[requestKey, resource.List]
	tolerations memo[listKey[corev1.Toleration], []string]
}

// request is podRequest(pod); the list is the caller's to change.
func (tm *templateMemo) request(pod *corev1.Pod) (resource.List, error) {
	s := &pod.Spec
	if tm == nil || len(s.Containers) == 0 || s.Overhead != nil || s.Resources != nil || hasStatusResources(&pod.Status) {
		return podRequest(pod)
	}
	k := requestKey{keyOf(s.Containers), keyOf(s.InitContainers)}
	if e, ok := tm.requests.get(k); ok {
		return maps.Clone(e.v), e.err
	}
	req, err := podRequest(pod)
	tm.requests.put(k, memoEntry[resource.List]{hold: [2][]corev1.Container{s.Containers, s.InitContainers}, v: maps.Clone(req), err: err})
	return req, err
}

// hasStatusResources reports whether the status says what the pod's
// containers were given (a running pod: its request may be a resize's).
func hasStatusResources(st *corev1.PodStatus) bool {
	if st.Resources != nil || st.AllocatedResources != nil || len(st.Conditions) > 0 {
		return true
	}
	for _, l := range [][]corev1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for i := range l {
			if l[i].Resources != nil || l[i].AllocatedResources != nil {
				return true
			}
		}
	}
	return false
}

// podTolerations is podTolerations(tols); the slice is the caller's to
// change.
func (tm *templateMemo) podTolerations(tols []corev1.Toleration) ([]string, error) {
	if tm == nil || len(tols) == 0 {
		return podTolerations(tols)
	}
	k := keyOf(tols)
	if e, ok := tm.tolerations.get(k); ok {
		return slices.Clone(e.v), e.err
	}
	out, err := podTolerations(tols)
	tm.tolerations.put(k, memoEntry[[]string]{hold: tols, v: slices.Clone(out), err: err})
	return out, err
}
