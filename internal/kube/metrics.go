package kube

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// kubeMetrics are the front end's own metrics (the engine's are the
// server's: placements, delays, preemptions).
type kubeMetrics struct {
	bindings  *prometheus.CounterVec // by result
	evictions *prometheus.CounterVec // by result
	bindTime  prometheus.Histogram
}

func newKubeMetrics(reg prometheus.Registerer) *kubeMetrics {
	m := &kubeMetrics{
		bindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hetsched_kube_bindings_total",
			Help: "Bindings of pods to the nodes the engine chose, by result: bound, gone (the pod was deleted), conflict (bound by someone else), failed (the API server kept refusing).",
		}, []string{"result"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hetsched_kube_evictions_total",
			Help: "Evictions of pods the engine ended (preempted), by result: evicted, gone, refused (a PodDisruptionBudget kept the pod).",
		}, []string{"result"}),
		bindTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hetsched_kube_binding_seconds",
			Help:    "Time a pod's Binding took, retries included.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10},
		}),
	}
	for _, r := range []string{"bound", "gone", "conflict", "failed"} {
		m.bindings.WithLabelValues(r)
	}
	for _, r := range []string{"evicted", "gone", "refused"} {
		m.evictions.WithLabelValues(r)
	}
	if reg != nil {
		// A rebuilt Scheduler (ErrRebuild) goes on counting in the first
		// one's collectors.
		m.bindings = register(reg, m.bindings)
		m.evictions = register(reg, m.evictions)
		m.bindTime = register(reg, m.bindTime)
	}
	return m
}

// register registers c, or returns the collector registered before it.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if old, ok := are.ExistingCollector.(C); ok {
				return old
			}
		}
		panic(err)
	}
	return c
}
