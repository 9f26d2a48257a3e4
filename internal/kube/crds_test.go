package kube_test

import (
	"fmt"
	"testing"

	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hetsched/hetsched/internal/kube"
)

func (e *env) queueCR(name string, spec map[string]any) {
	e.t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hetsched.io/v1alpha1", "kind": "Queue", "metadata": map[string]any{"name": name}, "spec": spec,
	}}
	if _, err := e.dynamic().Resource(kube.QueueResource).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { e.dynamic().Resource(kube.QueueResource).Delete(e.ctx, name, metav1.DeleteOptions{}) })
}

// waitQueueStatus waits for a Queue's status to satisfy ok.
func (e *env) waitQueueStatus(name string, ok func(st map[string]any) bool) {
	e.t.Helper()
	e.wait("queue "+name+"'s status", func() (bool, string) {
		u, err := e.dynamic().Resource(kube.QueueResource).Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		return ok(st), fmt.Sprint(st)
	})
}

func accepted(st map[string]any) (string, string) {
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Accepted" {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["message"])
		}
	}
	return "", ""
}

// A Queue (hetsched.io/v1alpha1) is the engine's queue: its max holds
// (the pod past it waits saying so), its status shows usage and Accepted;
// one hetsched cannot hold is refused in its status with the reason.
func TestQueueCRD(t *testing.T) {
	e := newEnv(t)
	applyFile(t, e.c, "../../deploy/kubernetes/05-crds.yaml")
	e.node("a", map[string]string{"nvidia.com/gpu": "8"}, nil)
	q := e.ns + "-q"
	e.queueCR(q, map[string]any{"weight": int64(2), "max": map[string]any{"nvidia.com/gpu": "2"}})
	bad := e.ns + "-bad"
	e.queueCR(bad, map[string]any{"max": map[string]any{"bogus": "1"}})
	e.start()
	for i := range 3 {
		p := e.podSpec(fmt.Sprintf("p%d", i), map[string]string{"nvidia.com/gpu": "1"})
		p.Labels[kube.LabelQueue] = q
		e.create(p)
	}
	// Two of the three are bound (which two is the engine's choice), the
	// third waits at the max.
	var waiting string
	e.wait("two pods bound and one waiting", func() (bool, string) {
		bound, w := 0, ""
		for i := range 3 {
			if p := e.get(fmt.Sprintf("p%d", i)); p.Spec.NodeName != "" {
				bound++
			} else {
				w = p.Name
			}
		}
		waiting = w
		return bound == 2 && w != "", fmt.Sprint(bound, " bound")
	})
	e.waitReason(waiting, "max reached")
	e.waitQueueStatus(q, func(st map[string]any) bool {
		usage, _ := st["usage"].(map[string]any)
		s, _ := accepted(st)
		return s == "True" && usage["nvidia.com/gpu"] == "2"
	})
	e.waitQueueStatus(bad, func(st map[string]any) bool {
		s, msg := accepted(st)
		return s == "False" && msg != ""
	})
}

// The ResourceSchedule named default sets the tiers of pod priorities and
// a queue for a namespace's pods that name none; its status says it was
// applied.
func TestResourceSchedule(t *testing.T) {
	e := newEnv(t)
	applyFile(t, e.c, "../../deploy/kubernetes/05-crds.yaml")
	e.node("a", map[string]string{"nvidia.com/gpu": "8"}, nil)
	q := e.ns + "-q"
	e.queueCR(q, map[string]any{"max": map[string]any{"nvidia.com/gpu": "1"}})
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-sixty"}, Value: 60}
	if _, err := e.cs.SchedulingV1().PriorityClasses().Create(e.ctx, pc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hetsched.io/v1alpha1", "kind": "ResourceSchedule", "metadata": map[string]any{"name": "default"},
		"spec": map[string]any{
			"priorityTiers":   map[string]any{"urgent": int64(100), "high": int64(50), "medium": int64(10)},
			"namespaceQueues": map[string]any{e.ns: q},
		},
	}}
	dyn := e.dynamic().Resource(kube.ResourceScheduleResource)
	if _, err := dyn.Create(e.ctx, rs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dyn.Delete(e.ctx, "default", metav1.DeleteOptions{}) })
	r := e.start()
	e.wait("the ResourceSchedule accepted", func() (bool, string) {
		u, err := dyn.Get(e.ctx, "default", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st, _, _ := unstructured.NestedMap(u.Object, "status")
		s, _ := accepted(st)
		return s == "True" && st["observedGeneration"] == u.GetGeneration(), fmt.Sprint(st)
	})
	a := e.podSpec("a", map[string]string{"nvidia.com/gpu": "1"})
	a.Spec.PriorityClassName = pc.Name
	pa := e.create(a)
	e.waitBound("a")
	e.create(e.podSpec("b", map[string]string{"nvidia.com/gpu": "1"}))
	e.waitReason("b", "max")
	rec, ok := r.eng.Task(string(pa.UID))
	if !ok {
		t.Fatal("no task for pod a")
	}
	if rec.Spec.Queue != q || rec.Spec.Priority == nil || *rec.Spec.Priority != 1 {
		t.Errorf("pod a's task: queue %q, priority %v; want %s and tier 1 (priority 60 under thresholds 100/50/10)", rec.Spec.Queue, rec.Spec.Priority, q)
	}
}
