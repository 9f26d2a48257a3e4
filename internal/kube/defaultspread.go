package kube

import (
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
)

// The cluster's default topology spread: kube-scheduler's PodTopologySpread
// with defaultingType System (its default) gives a pod that has no
// topologySpreadConstraints of its own two that prefer (ScheduleAnyway):
// by hostname with maxSkew 3 and by zone with maxSkew 5. They count the
// pods of its namespace that its Services, and its controller
// (ReplicationController, ReplicaSet or StatefulSet), select; a pod that
// none selects gets none (helper.DefaultSelector). hetsched gives the
// pod's task the same two spreads. They are read when the pod's task is
// made: a Service added while the pod waits is seen when the task is made
// again (kube-scheduler reads them at each attempt; both only score).

// systemDefaultSpread is kube-scheduler v1.36's systemDefaultConstraints.
var systemDefaultSpread = []corev1.TopologySpreadConstraint{
	{TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway, MaxSkew: 3},
	{TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway, MaxSkew: 5},
}

// spreadDefaults finds what selects a pod from the listers of the
// objects kube-scheduler's DefaultSelector reads.
type spreadDefaults struct {
	svc corelisters.ServiceLister
	rc  corelisters.ReplicationControllerLister
	rs  appslisters.ReplicaSetLister
	ss  appslisters.StatefulSetLister
}

// newSpreadDefaults registers the four informers with f.
func newSpreadDefaults(f informers.SharedInformerFactory) *spreadDefaults {
	return &spreadDefaults{
		svc: f.Core().V1().Services().Lister(), rc: f.Core().V1().ReplicationControllers().Lister(),
		rs: f.Apps().V1().ReplicaSets().Lister(), ss: f.Apps().V1().StatefulSets().Lister(),
	}
}

// constraints returns the default spread constraints for pod: none when
// it has its own, or when nothing selects it.
func (d *spreadDefaults) constraints(pod *corev1.Pod) []corev1.TopologySpreadConstraint {
	if d == nil || len(pod.Spec.TopologySpreadConstraints) > 0 {
		return nil
	}
	sel := d.selector(pod)
	if sel == nil {
		return nil
	}
	out := make([]corev1.TopologySpreadConstraint, len(systemDefaultSpread))
	for i, c := range systemDefaultSpread {
		c.LabelSelector = sel
		out[i] = c
	}
	return out
}

// selector is helper.DefaultSelector as a label selector (nil when it is
// empty): the selectors of the Services of pod's namespace that select
// it, merged, with its controller's.
func (d *spreadDefaults) selector(pod *corev1.Pod) *metav1.LabelSelector {
	var set labels.Set // made when something selects the pod: most pods of a bench have nothing
	if svcs, err := d.svc.Services(pod.Namespace).List(labels.Everything()); err == nil {
		for _, s := range svcs {
			// A nil selector selects nothing, not everything.
			if s.Spec.Selector != nil && labels.SelectorFromValidatedSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
				if set == nil {
					set = labels.Set{}
				}
				maps.Copy(set, s.Spec.Selector)
			}
		}
	}
	var exprs []metav1.LabelSelectorRequirement
	if owner := metav1.GetControllerOfNoCopy(pod); owner != nil {
		if set == nil {
			set = labels.Set{}
		}
		gv, err := schema.ParseGroupVersion(owner.APIVersion)
		switch {
		case err != nil:
		case gv == corev1.SchemeGroupVersion && owner.Kind == "ReplicationController":
			if rc, err := d.rc.ReplicationControllers(pod.Namespace).Get(owner.Name); err == nil {
				maps.Copy(set, rc.Spec.Selector)
			}
		case gv == appsv1.SchemeGroupVersion && owner.Kind == "ReplicaSet":
			if rs, err := d.rs.ReplicaSets(pod.Namespace).Get(owner.Name); err == nil {
				exprs = appendSelector(set, exprs, rs.Spec.Selector)
			}
		case gv == appsv1.SchemeGroupVersion && owner.Kind == "StatefulSet":
			if ss, err := d.ss.StatefulSets(pod.Namespace).Get(owner.Name); err == nil {
				exprs = appendSelector(set, exprs, ss.Spec.Selector)
			}
		}
	}
	if len(set) == 0 && len(exprs) == 0 {
		return nil
	}
	return &metav1.LabelSelector{MatchLabels: set, MatchExpressions: exprs}
}

// appendSelector adds ls's requirements to set and exprs. A selector
// that does not parse adds nothing, as DefaultSelector leaves it out.
func appendSelector(set labels.Set, exprs []metav1.LabelSelectorRequirement, ls *metav1.LabelSelector) []metav1.LabelSelectorRequirement {
	if _, err := metav1.LabelSelectorAsSelector(ls); err != nil || ls == nil {
		return exprs
	}
	maps.Copy(set, ls.MatchLabels)
	return append(exprs, ls.MatchExpressions...)
}

// trimSelecting keeps of a Service, ReplicationController, ReplicaSet or
// StatefulSet what spreadDefaults reads: its metadata (less managed
// fields) and its selector. It reports whether o was one of them.
func trimSelecting(o any) bool {
	switch x := o.(type) {
	case *corev1.Service:
		x.ManagedFields = nil
		x.Spec, x.Status = corev1.ServiceSpec{Selector: x.Spec.Selector}, corev1.ServiceStatus{}
	case *corev1.ReplicationController:
		x.ManagedFields = nil
		x.Spec, x.Status = corev1.ReplicationControllerSpec{Selector: x.Spec.Selector}, corev1.ReplicationControllerStatus{}
	case *appsv1.ReplicaSet:
		x.ManagedFields = nil
		x.Spec, x.Status = appsv1.ReplicaSetSpec{Selector: x.Spec.Selector}, appsv1.ReplicaSetStatus{}
	case *appsv1.StatefulSet:
		x.ManagedFields = nil
		x.Spec, x.Status = appsv1.StatefulSetSpec{Selector: x.Spec.Selector}, appsv1.StatefulSetStatus{}
	default:
		return false
	}
	return true
}
