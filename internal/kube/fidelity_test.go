package kube_test

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Fidelity to kube-scheduler (issue 40): each test here places pods as
// kube-scheduler's default plugins would, or keeps them waiting as it
// would.

// priorityClass creates a PriorityClass of the test with value, and
// returns its name.
func (e *env) priorityClass(name string, value int32, policy *corev1.PreemptionPolicy) string {
	e.t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name}, Value: value, PreemptionPolicy: policy}
	if _, err := e.cs.SchedulingV1().PriorityClasses().Create(e.ctx, pc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return pc.Name
}

// A pod evicts pods of a smaller priority, of its tier too (kube-scheduler
// orders preemption by the priority value); a pod whose preemptionPolicy
// is Never evicts nothing, however high its priority, and waits.
func TestPreemptionFollowsPriorityValuesAndPolicy(t *testing.T) {
	e := newEnv(t)
	e.node("a", map[string]string{"nvidia.com/gpu": "1"}, nil)
	e.start()
	never := corev1.PreemptNever
	low := e.priorityClass("low", 100, nil)
	higher := e.priorityClass("higher", 200, nil)
	shy := e.priorityClass("shy", 1000, &never)
	pod := func(name, class string) {
		p := e.podSpec(name, map[string]string{"nvidia.com/gpu": "1"})
		p.Spec.PriorityClassName = class
		e.create(p)
	}
	pod("victim", low)
	e.waitBound("victim")
	// Priority 1000 but Never: it waits, and the victim stays.
	pod("shy", shy)
	e.waitReason("shy", "insufficient nvidia.com/gpu")
	if p := e.get("victim"); p.DeletionTimestamp != nil {
		t.Fatal("a pod whose preemptionPolicy is Never evicted the victim")
	}
	// 200 over 100, both in the medium tier: the victim is evicted.
	pod("preemptor", higher)
	e.wait("the victim evicted", func() (bool, string) {
		p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, "victim", metav1.GetOptions{})
		return err != nil || p.DeletionTimestamp != nil, fmt.Sprint(err)
	})
	e.waitBound("preemptor")
	if p := e.get("shy"); p.Spec.NodeName != "" {
		t.Errorf("shy bound to %s", p.Spec.NodeName)
	}
}
