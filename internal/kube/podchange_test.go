package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPodChangeMatters: which pod updates the Scheduler looks at again.
func TestPodChangeMatters(t *testing.T) {
	base := func(node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1", Labels: map[string]string{"a": "1"}},
			Spec:       corev1.PodSpec{NodeName: node, SchedulerName: "hetsched"},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	with := func(p *corev1.Pod, change func(*corev1.Pod)) *corev1.Pod { change(p); return p }
	now := metav1.Now()
	cases := []struct {
		name     string
		old, new *corev1.Pod
		want     bool
	}{
		{"bound", base("", corev1.PodPending), base("n1", corev1.PodPending), true},
		{"waiting pod's phase", base("", corev1.PodPending), base("", corev1.PodFailed), true},
		{"waiting pod's status only", base("", corev1.PodPending), with(base("", corev1.PodPending), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
		}), false},
		{"waiting pod's labels", base("", corev1.PodPending), with(base("", corev1.PodPending), func(p *corev1.Pod) { p.Labels = map[string]string{"a": "2"} }), true},
		{"waiting pod deleted", base("", corev1.PodPending), with(base("", corev1.PodPending), func(p *corev1.Pod) { p.DeletionTimestamp = &now }), true},
		{"bound pod starts running", base("n1", corev1.PodPending), base("n1", corev1.PodRunning), false},
		// Others' affinity reads a running pod's labels; a resize changes
		// what it holds.
		{"bound pod's labels", base("n1", corev1.PodRunning), with(base("n1", corev1.PodRunning), func(p *corev1.Pod) { p.Labels = map[string]string{"a": "2"} }), true},
		{"bound pod resized", base("n1", corev1.PodRunning), with(base("n1", corev1.PodRunning), func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "2")}}}
		}), true},
		{"bound pod's other status", base("n1", corev1.PodRunning), with(base("n1", corev1.PodRunning), func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}), false},
		{"bound pod deleted (the delete event ends it)", base("n1", corev1.PodRunning), with(base("n1", corev1.PodRunning), func(p *corev1.Pod) { p.DeletionTimestamp = &now }), false},
		{"bound pod succeeds", base("n1", corev1.PodRunning), base("n1", corev1.PodSucceeded), true},
		{"bound pod fails", base("n1", corev1.PodPending), base("n1", corev1.PodFailed), true},
		{"ended pod's later status", base("n1", corev1.PodFailed), base("n1", corev1.PodFailed), false},
		{"moved to another node", base("n1", corev1.PodRunning), base("n2", corev1.PodRunning), true},
		{"replaced by a pod of the same name", base("n1", corev1.PodRunning), with(base("n1", corev1.PodRunning), func(p *corev1.Pod) { p.UID = "u2" }), true},
	}
	for _, c := range cases {
		if got := podChangeMatters(c.old, c.new); got != c.want {
			t.Errorf("%s: podChangeMatters = %v, want %v", c.name, got, c.want)
		}
	}
	if !podChangeMatters(cacheTombstone{}, base("", corev1.PodPending)) {
		t.Error("an update that is not of two pods must matter")
	}
}

type cacheTombstone struct{}
