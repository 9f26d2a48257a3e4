package kube

import (
	"fmt"
	"maps"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// namespaceWatch resolves pod affinity terms' namespaceSelectors from the
// Namespaces informer. A waiting pod whose task was made with one is made
// again when namespaces change (their labels, or one added or deleted):
// its version is the one it was made at.
type namespaceWatch struct {
	lst     corelisters.NamespaceLister
	inf     cache.SharedIndexInformer
	version atomic.Uint64 // from 1; bumped by every change
}

func newNamespaceWatch(f informers.SharedInformerFactory) *namespaceWatch {
	w := &namespaceWatch{lst: f.Core().V1().Namespaces().Lister(), inf: f.Core().V1().Namespaces().Informer()}
	w.version.Store(1)
	return w
}

// resolve lists the namespaces sel selects.
func (w *namespaceWatch) resolve(sel *metav1.LabelSelector) ([]string, error) {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	nss, err := w.lst.List(s)
	if err != nil {
		return nil, fmt.Errorf("listing namespaces: %v", err)
	}
	out := make([]string, len(nss))
	for i, ns := range nss {
		out[i] = ns.Name
	}
	return out, nil
}

// watch calls changed after each change that may alter what a selector
// selects.
func (w *namespaceWatch) watch(changed func()) error {
	bump := func() { w.version.Add(1); changed() }
	_, err := w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { bump() },
		UpdateFunc: func(old, o any) {
			a, aok := old.(*corev1.Namespace)
			b, bok := o.(*corev1.Namespace)
			if !aok || !bok || !maps.Equal(a.Labels, b.Labels) {
				bump()
			}
		},
		DeleteFunc: func(any) { bump() },
	})
	return err
}

// usesNamespaceSelector reports whether one of the pod's affinity terms
// has a non-empty namespaceSelector.
func usesNamespaceSelector(pod *corev1.Pod) bool {
	aff := pod.Spec.Affinity
	if aff == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a := aff.PodAffinity; a != nil {
		terms = append(terms, a.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a := aff.PodAntiAffinity; a != nil {
		terms = append(terms, a.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if ns := t.NamespaceSelector; ns != nil && (len(ns.MatchLabels) > 0 || len(ns.MatchExpressions) > 0) {
			return true
		}
	}
	return false
}

// replanNamespaced marks the waiting pods whose tasks were made with a
// namespaceSelector at an older version, to be made again.
func (s *Scheduler) replanNamespaced() {
	v := s.ns.version.Load()
	s.mu.Lock()
	var keys []string
	for _, st := range s.byUID {
		if st.nsVersion != 0 && st.nsVersion != v && !st.bound {
			keys = append(keys, st.key)
		}
	}
	s.mu.Unlock()
	for _, k := range keys {
		s.dirty.addPodKey(k)
	}
}
