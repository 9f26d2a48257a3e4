package kube_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/kube"
)

// A gang's pods are bound all together or not at all: three pods of two
// GPUs wait on a node of four (each member reports why); when the gang's
// timeout ends its try, its pods gather again as a gang (none goes alone);
// all are bound once a second node makes room for the three.
func TestGangBindsAllOrNothing(t *testing.T) {
	e := newEnv(t)
	e.node("a", map[string]string{"nvidia.com/gpu": "4"}, nil)
	r := e.start()
	for i := range 3 {
		p := e.podSpec(fmt.Sprintf("m%d", i), map[string]string{"nvidia.com/gpu": "2"})
		p.Annotations[kube.AnnotationGang] = "train"
		p.Annotations[kube.AnnotationGangMinMember] = "3"
		p.Annotations[kube.AnnotationGangTimeout] = "2"
		e.create(p)
		if i < 2 {
			e.waitReason(p.Name, "waiting for gang "+e.ns+"/train")
		}
	}
	// The gang's try ends at its timeout and its pods gather again into a
	// new job of the three (the engine's jobs say so: messages on the pods
	// go by faster than a reader sees them).
	e.wait("a gang job failed at its timeout and a new one of all three", func() (bool, string) {
		jobs, _ := r.eng.ListJobs(engine.JobFilter{}, 0, 100)
		failed, later := false, false
		for _, j := range jobs {
			if !strings.HasPrefix(j.Job.Spec.ID, "gang-"+e.ns+".train-") {
				continue
			}
			for _, tr := range j.Tasks {
				failed = failed || tr.State == "failed" && strings.Contains(tr.Reason, "did not start within 2s")
			}
			later = later || failed && len(j.Tasks) == 3 && j.State != "failed"
		}
		return failed && later, fmt.Sprint(len(jobs), " jobs")
	})
	for i := range 3 {
		if p := e.get(fmt.Sprintf("m%d", i)); p.Spec.NodeName != "" {
			t.Fatalf("gang member %s bound to %s while the gang cannot fit", p.Name, p.Spec.NodeName)
		}
	}
	e.node("b", map[string]string{"nvidia.com/gpu": "4"}, nil)
	for i := range 3 {
		e.waitBound(fmt.Sprintf("m%d", i))
	}
}

// A new Scheduler (a restart, or a new leader) rebuilds from the cluster:
// pods bound before keep their devices, no pod is bound twice, and a pod
// created while none ran is placed on what they leave free.
func TestRestartRelistsWithoutDoubleBinding(t *testing.T) {
	e := newEnv(t)
	e.node("a", map[string]string{"nvidia.com/gpu": "4"}, nil)
	first := e.start()
	before := map[string]string{}
	for _, n := range []string{"p1", "p2"} {
		e.create(e.podSpec(n, map[string]string{"nvidia.com/gpu": "2"}))
	}
	for _, n := range []string{"p1", "p2"} {
		before[n] = e.waitBound(n).Annotations[kube.AnnotationDevices]
	}
	first.stop()

	e.create(e.podSpec("p3", map[string]string{"nvidia.com/gpu": "2"}))
	reg := prometheus.NewRegistry()
	e.startWith(func(c *kube.Config) { c.Registerer = reg })
	e.waitReason("p3", "nvidia.com/gpu")
	for n, dev := range before {
		p := e.get(n)
		if p.Annotations[kube.AnnotationDevices] != dev || p.Spec.NodeName != e.prefix+"a" {
			t.Errorf("pod %s now on %s with %q, was %q", n, p.Spec.NodeName, p.Annotations[kube.AnnotationDevices], dev)
		}
	}
	e.delete("p1")
	if got := e.waitBound("p3").Annotations[kube.AnnotationDevices]; got != before["p1"] {
		t.Errorf("p3 holds %q, want p1's freed %q", got, before["p1"])
	}
	// The new Scheduler posted one Binding, p3's: none for the adopted
	// pods (a second Binding of a bound pod would be a conflict). The
	// binder counts a Binding once the API server answered it, which may
	// be after the watch showed the pod bound: wait for that count.
	e.wait("p3's Binding counted", func() (bool, string) {
		got := counter(t, reg, "hetsched_kube_bindings_total", "result", "bound")
		return got >= 1, fmt.Sprintf("%v bound", got)
	})
	for result, want := range map[string]float64{"bound": 1, "conflict": 0, "failed": 0, "gone": 0} {
		if got := counter(t, reg, "hetsched_kube_bindings_total", "result", result); got != want {
			t.Errorf("bindings %s: %v, want %v", result, got, want)
		}
	}
}

// Preemption goes through the Eviction API: the first victim leaves
// because its PodDisruptionBudget allows one disruption, and the
// preemptor is bound only once it left; the second is refused by the
// budget, stays, and the pod that would have taken its GPUs waits.
func TestPreemptionEvictsWithinDisruptionBudgets(t *testing.T) {
	e := newEnv(t)
	e.node("a", map[string]string{"nvidia.com/gpu": "4"}, nil)
	r := e.startWith(func(c *kube.Config) { c.EvictionTimeout = 2 * time.Second })
	for _, n := range []string{"low1", "low2"} {
		p := e.podSpec(n, map[string]string{"nvidia.com/gpu": "2"})
		p.Annotations[kube.AnnotationPriority] = "3"
		p.Labels["app"] = "low"
		e.create(p)
		e.waitBound(n)
	}
	// No disruption controller runs here: the budget's status is written
	// as it would write it (two healthy, one may go), once it is true. A
	// pod counts as healthy when Ready (KWOK makes it so a moment after
	// it is bound); the Eviction API lets an unready or Pending pod go
	// without using the budget, and then the second eviction is allowed.
	for _, n := range []string{"low1", "low2"} {
		e.waitReady(n)
	}
	one := intstr.FromInt32(1)
	pdb, err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Create(e.ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "low", Namespace: e.ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "low"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 1, CurrentHealthy: 2, DesiredHealthy: 1, ExpectedPods: 2}
	if _, err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).UpdateStatus(e.ctx, pdb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	high := func(name string) {
		p := e.podSpec(name, map[string]string{"nvidia.com/gpu": "2"})
		p.Annotations[kube.AnnotationPriority] = "1"
		e.create(p)
	}
	high("high1")
	e.waitBound("high1")
	gone, kept := "", ""
	for _, n := range []string{"low1", "low2"} {
		if _, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, n, metav1.GetOptions{}); err != nil {
			gone = n
		} else {
			kept = n
		}
	}
	if gone == "" || kept == "" {
		t.Fatalf("after high1: gone %q, kept %q; want one low pod evicted", gone, kept)
	}
	e.wait("a Preempted event on "+gone, func() (bool, string) {
		evs, _ := e.cs.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + gone})
		for _, ev := range evs.Items {
			if ev.Reason == "Preempted" && strings.Contains(ev.Note, "preempted by") {
				return true, ""
			}
		}
		return false, fmt.Sprint(len(evs.Items), " events")
	})

	high("high2")
	e.wait("a FailedEviction event on "+kept, func() (bool, string) {
		evs, _ := e.cs.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + kept})
		var seen []string
		for _, ev := range evs.Items {
			seen = append(seen, ev.Reason+": "+ev.Note)
			if ev.Reason == "FailedEviction" && strings.Contains(ev.Note, "disruption budget") {
				return true, ""
			}
		}
		return false, fmt.Sprint(seen)
	})
	// high2's placement was given up in the kept pod's favour (its first
	// task displaced, a second one waiting), and it says why it waits.
	h2 := e.get("high2")
	e.wait("high2's placement displaced and high2 waiting again", func() (bool, string) {
		first, ok1 := r.eng.Task(string(h2.UID))
		second, ok2 := r.eng.Task(string(h2.UID) + "-2")
		if !ok1 || !ok2 {
			return false, fmt.Sprint(ok1, ok2)
		}
		return first.State == "cancelled" && strings.Contains(first.Reason, "displaced") && second.State == "pending",
			first.State + " " + first.Reason + " / " + second.State
	})
	e.waitReason("high2", "insufficient nvidia.com/gpu")
	p := e.get(kept)
	if p.DeletionTimestamp != nil || p.Spec.NodeName == "" {
		t.Fatalf("%s, kept by its budget, is deleted (%v) or unbound", kept, p.DeletionTimestamp)
	}
	if got := e.get("high2"); got.Spec.NodeName != "" {
		t.Fatalf("high2 bound to %s over %s's GPUs", got.Spec.NodeName, kept)
	}
}

// A PodGroup (scheduler-plugins' CRD) makes a gang of the pods labelled
// with its name, minMember of them all together; a pod naming a PodGroup
// that does not exist waits with that reason, and goes once it exists.
func TestPodGroupGang(t *testing.T) {
	e := newEnv(t)
	applyFile(t, e.c, "testdata/podgroup-crd.yaml")
	e.node("a", map[string]string{"nvidia.com/gpu": "4"}, nil)
	dyn := e.dynamic()
	pg := func(name string, min int64) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
			"metadata": map[string]any{"name": name, "namespace": e.ns},
			"spec":     map[string]any{"minMember": min, "scheduleTimeoutSeconds": int64(60)},
		}}
		if _, err := dyn.Resource(kube.PodGroupResource).Namespace(e.ns).Create(e.ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pg("pair", 2)
	e.start()
	member := func(name, group string) {
		p := e.podSpec(name, map[string]string{"nvidia.com/gpu": "2"})
		p.Labels[kube.LabelPodGroup] = group
		e.create(p)
	}
	member("a0", "pair")
	e.waitReason("a0", "waiting for gang "+e.ns+"/pair: 1 of its 2 pods exist")
	member("a1", "pair")
	e.waitBound("a0")
	e.waitBound("a1")

	member("b0", "later")
	e.waitReason("b0", "no PodGroup "+e.ns+"/later")
	e.delete("a0")
	pg("later", 1)
	e.waitBound("b0")
}

// A pod that finishes (KWOK runs a Job's pod to Succeeded) gives its
// devices back: the pod waiting for them is bound to them; a deleted node
// leaves the engine (a pod pinned to it waits, saying no node fits).
func TestFinishedPodsAndDeletedNodesFreeCapacity(t *testing.T) {
	e := newEnv(t)
	e.node("a", map[string]string{"nvidia.com/gpu": "2"}, nil)
	r := e.start()
	job := e.podSpec("job", map[string]string{"nvidia.com/gpu": "2"})
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "0b0e5b46-1a9c-4b1e-9a57-5d8f3c1e2a01"}}
	e.create(job)
	devs := e.waitBound("job").Annotations[kube.AnnotationDevices]
	e.create(e.podSpec("next", map[string]string{"nvidia.com/gpu": "2"}))
	e.wait("job Succeeded", func() (bool, string) {
		p := e.get("job")
		return p.Status.Phase == corev1.PodSucceeded, string(p.Status.Phase)
	})
	if got := e.waitBound("next").Annotations[kube.AnnotationDevices]; got != devs {
		t.Errorf("next holds %q, want the finished pod's %q", got, devs)
	}
	rec, ok := r.eng.Task(string(e.get("job").UID))
	if !ok || rec.State != "succeeded" {
		t.Errorf("the finished pod's task: %+v", rec)
	}

	if err := e.cs.CoreV1().Nodes().Delete(e.ctx, e.prefix+"a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wait("the node gone from the engine", func() (bool, string) {
		for _, n := range r.eng.Nodes() {
			if n.Name == e.prefix+"a" {
				return false, "still there"
			}
		}
		return true, ""
	})
	e.create(e.podSpec("orphan", map[string]string{"nvidia.com/gpu": "1"}))
	e.waitReason("orphan", "nodes fit")
}
