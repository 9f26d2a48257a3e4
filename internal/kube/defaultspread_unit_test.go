package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appslisters "k8s.io/client-go/listers/apps/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/api"
)

// spreadDefaults selects a pod as kube-scheduler's DefaultSelector does:
// the Services of its namespace that select it (a nil selector selects
// nothing), and its controller, by kind and apiVersion; a pod with
// constraints of its own, or selected by nothing, gets none.
func TestDefaultSpreadSelector(t *testing.T) {
	idx := func(objs ...any) cache.Indexer {
		i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			if err := i.Add(o); err != nil {
				t.Fatal(err)
			}
		}
		return i
	}
	meta := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	d := &spreadDefaults{
		svc: corelisters.NewServiceLister(idx(
			&corev1.Service{ObjectMeta: meta("ns", "web"), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}}},
			&corev1.Service{ObjectMeta: meta("ns", "tier"), Spec: corev1.ServiceSpec{Selector: map[string]string{"tier": "front"}}},
			&corev1.Service{ObjectMeta: meta("ns", "headless"), Spec: corev1.ServiceSpec{}},
			&corev1.Service{ObjectMeta: meta("other", "web"), Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web", "x": "y"}}})),
		rc: corelisters.NewReplicationControllerLister(idx(
			&corev1.ReplicationController{ObjectMeta: meta("ns", "rc"), Spec: corev1.ReplicationControllerSpec{Selector: map[string]string{"rc": "1"}}})),
		rs: appslisters.NewReplicaSetLister(idx(
			&appsv1.ReplicaSet{ObjectMeta: meta("ns", "rs"), Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"pod-template-hash": "h"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}}})),
		ss: appslisters.NewStatefulSetLister(idx(
			&appsv1.StatefulSet{ObjectMeta: meta("ns", "ss"), Spec: appsv1.StatefulSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"db": "1"}}}})),
	}
	yes := true
	pod := func(labels map[string]string, apiVersion, kind, owner string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Labels: labels}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner, Controller: &yes}}
		}
		return p
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want *metav1.LabelSelector
	}{
		{"nothing selects it", pod(map[string]string{"app": "batch"}, "", "", ""), nil},
		{"two services", pod(map[string]string{"app": "web", "tier": "front"}, "", "", ""),
			&metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "tier": "front"}}},
		{"a replica set", pod(map[string]string{"app": "web", "pod-template-hash": "h"}, "apps/v1", "ReplicaSet", "rs"),
			&metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "pod-template-hash": "h"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpExists}}}},
		{"a replication controller", pod(map[string]string{"rc": "1"}, "v1", "ReplicationController", "rc"),
			&metav1.LabelSelector{MatchLabels: map[string]string{"rc": "1"}}},
		{"a stateful set", pod(map[string]string{"db": "1"}, "apps/v1", "StatefulSet", "ss"),
			&metav1.LabelSelector{MatchLabels: map[string]string{"db": "1"}}},
		{"a job is no controller it reads", pod(map[string]string{"job": "1"}, "batch/v1", "Job", "j"), nil},
		{"a replica set of another group", pod(map[string]string{"x": "1"}, "extensions/v1beta1", "ReplicaSet", "rs"), nil},
		{"a controller that is gone", pod(map[string]string{"x": "1"}, "apps/v1", "ReplicaSet", "gone"), nil},
	} {
		if got := d.selector(c.pod); !cmp.Equal(got, c.want) {
			t.Errorf("%s: %s", c.name, cmp.Diff(c.want, got))
		}
	}

	// The two constraints, translated: they prefer, over the namespace.
	p := pod(map[string]string{"app": "web"}, "", "", "")
	pt := podTranslator{defaults: d}
	var task api.Task
	if err := pt.podConstraints(p, &task); err != nil {
		t.Fatal(err)
	}
	want := []api.Spread{
		{TaskSelector: api.TaskSelector{Selector: map[string]string{"app": "web"}, Match: metaNamespace + " in (ns)"}, TopologyKey: corev1.LabelHostname, MaxSkew: 3,
			WhenUnsatisfiable: api.SpreadPlace, NodeAffinityPolicy: api.PolicyHonor, NodeTaintsPolicy: api.PolicyIgnore},
		{TaskSelector: api.TaskSelector{Selector: map[string]string{"app": "web"}, Match: metaNamespace + " in (ns)"}, TopologyKey: corev1.LabelTopologyZone, MaxSkew: 5,
			WhenUnsatisfiable: api.SpreadPlace, NodeAffinityPolicy: api.PolicyHonor, NodeTaintsPolicy: api.PolicyIgnore},
	}
	if diff := cmp.Diff(want, task.Spread); diff != "" {
		t.Errorf("the default spreads (-want +got):\n%s", diff)
	}
	// A pod with constraints of its own keeps only them.
	p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "rack", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if err := pt.podConstraints(p, &task); err != nil {
		t.Fatal(err)
	}
	if len(task.Spread) != 1 || task.Spread[0].TopologyKey != "rack" {
		t.Errorf("a pod with its own constraint: %+v", task.Spread)
	}
	// Off: none.
	p.Spec.TopologySpreadConstraints = nil
	if err := (podTranslator{}).podConstraints(p, &task); err != nil || len(task.Spread) != 0 {
		t.Errorf("without defaults: %+v, %v", task.Spread, err)
	}
}

// A pod's required affinity terms each select the pods that match all of
// them (InterPodAffinity counts only those), each requirement once.
func TestRequiredAffinityTermsMatchTogether(t *testing.T) {
	term := func(key string, ls *metav1.LabelSelector) corev1.PodAffinityTerm {
		return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: ls}
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			term("h", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}),
			term("zone", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}),
		},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 5, PodAffinityTerm: term("h", &metav1.LabelSelector{MatchLabels: map[string]string{"x": "y"}})}},
	}}}}
	var task api.Task
	if err := (podTranslator{}).podConstraints(p, &task); err != nil {
		t.Fatal(err)
	}
	all := api.TaskSelector{Match: "app in (db), " + metaNamespace + " in (ns), tier in (a,b)"}
	want := []api.AffinityTerm{
		{TaskSelector: all, TopologyKey: "h", Required: true},
		{TaskSelector: all, TopologyKey: "zone", Required: true},
		{TaskSelector: api.TaskSelector{Selector: map[string]string{"x": "y"}, Match: metaNamespace + " in (ns)"}, TopologyKey: "h", Weight: 5},
	}
	if diff := cmp.Diff(want, task.Affinity); diff != "" {
		t.Errorf("affinity (-want +got):\n%s", diff)
	}
}
