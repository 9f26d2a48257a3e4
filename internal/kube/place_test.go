package kube_test

import (
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/kube"
)

// GPU and TPU pods land on the nodes with their devices, each with the
// concrete device ids in its annotation, no id given twice; a pod that
// does not fit waits with hetsched's reason in a FailedScheduling event
// and its PodScheduled condition, and is bound once capacity frees.
func TestGPUAndTPUPodsBindToTheirDevices(t *testing.T) {
	e := newEnv(t)
	e.node("gpu", map[string]string{"nvidia.com/gpu": "4"}, map[string]string{kube.LabelGPUProduct: "H100-80GB", kube.LabelGPUMemory: "81920"})
	e.node("tpu", map[string]string{"google.com/tpu": "4"}, map[string]string{kube.LabelTPUAccelerator: "tpu-v5-lite-podslice"})
	e.node("cpu", map[string]string{}, nil)
	e.start()

	for _, n := range []string{"g1", "g2", "g3"} {
		e.create(e.podSpec(n, map[string]string{"nvidia.com/gpu": "2", "cpu": "1"}))
	}
	e.create(e.podSpec("t1", map[string]string{"google.com/tpu": "4"}))
	e.create(e.podSpec("c1", map[string]string{"cpu": "30"}))

	ids := map[string]string{}
	var bound, waiting []string
	for _, n := range []string{"g1", "g2", "g3"} {
		e.wait("pod "+n+" bound or reported", func() (bool, string) {
			p := e.get(n)
			if p.Spec.NodeName != "" {
				return true, ""
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
					return true, ""
				}
			}
			return false, "neither"
		})
		if p := e.get(n); p.Spec.NodeName != "" {
			bound = append(bound, n)
			if p.Spec.NodeName != e.prefix+"gpu" {
				t.Errorf("pod %s on %s, want %sgpu", n, p.Spec.NodeName, e.prefix)
			}
			dev := p.Annotations[kube.AnnotationDevices]
			if !strings.HasPrefix(dev, "nvidia.com/gpu=") || len(strings.Split(strings.TrimPrefix(dev, "nvidia.com/gpu="), ",")) != 2 {
				t.Errorf("pod %s devices %q, want two nvidia.com/gpu ids", n, dev)
			}
			for _, id := range strings.Split(strings.TrimPrefix(dev, "nvidia.com/gpu="), ",") {
				if other, dup := ids[id]; dup {
					t.Errorf("GPU %s given to %s and %s", id, other, n)
				}
				ids[id] = n
			}
		} else {
			waiting = append(waiting, n)
		}
	}
	if len(bound) != 2 || len(waiting) != 1 {
		t.Fatalf("bound %v, waiting %v: want two bound (4 GPUs, 2 each) and one waiting", bound, waiting)
	}
	if note := e.waitReason(waiting[0], "nvidia.com/gpu"); !strings.Contains(note, "insufficient nvidia.com/gpu") {
		t.Errorf("the waiting pod's event says %q, want hetsched's reason", note)
	}

	if p := e.waitBound("t1"); p.Spec.NodeName != e.prefix+"tpu" || p.Annotations[kube.AnnotationDevices] != "google.com/tpu=0,1,2,3" {
		t.Errorf("TPU pod on %s with %q, want %stpu with google.com/tpu=0,1,2,3", p.Spec.NodeName, p.Annotations[kube.AnnotationDevices], e.prefix)
	}
	if p := e.waitBound("c1"); p.Annotations[kube.AnnotationDevices] != "" {
		t.Errorf("CPU pod holds devices %q", p.Annotations[kube.AnnotationDevices])
	}

	// The waiting pod takes the GPUs the first bound pod frees.
	freed := []string{}
	for id, n := range ids {
		if n == bound[0] {
			freed = append(freed, id)
		}
	}
	sort.Strings(freed)
	e.delete(bound[0])
	p := e.waitBound(waiting[0])
	if want := "nvidia.com/gpu=" + strings.Join(freed, ","); p.Annotations[kube.AnnotationDevices] != want {
		t.Errorf("the pod that waited holds %q, want the freed %q", p.Annotations[kube.AnnotationDevices], want)
	}
}

// A pod bound by someone else (here: created with spec.nodeName, as a
// DaemonSet's are) holds its node's capacity: hetsched places around it.
func TestOtherSchedulersPodsHoldCapacity(t *testing.T) {
	e := newEnv(t)
	e.node("gpu", map[string]string{"nvidia.com/gpu": "4"}, nil)
	foreign := e.podSpec("foreign", map[string]string{"nvidia.com/gpu": "3"})
	foreign.Spec.SchedulerName = "default-scheduler"
	foreign.Spec.NodeName = e.prefix + "gpu"
	e.create(foreign)
	e.start()

	e.create(e.podSpec("two", map[string]string{"nvidia.com/gpu": "2"}))
	e.waitReason("two", "nvidia.com/gpu")
	p := e.create(e.podSpec("one", map[string]string{"nvidia.com/gpu": "1"}))
	if got := e.waitBound(p.Name); got.Spec.NodeName != e.prefix+"gpu" {
		t.Errorf("pod one on %s", got.Spec.NodeName)
	}
	if got := e.get("two"); got.Spec.NodeName != "" {
		t.Errorf("pod two was bound to %s, over the foreign pod's GPUs", got.Spec.NodeName)
	}
}

// Every node-side rule kube-scheduler applies to fit holds: a cordoned
// node takes only pods tolerating the cordon, a taint repels pods without its toleration,
// required node affinity (In, NotIn, Gt) picks the node or keeps the pod
// waiting.
func TestNodeRules(t *testing.T) {
	e := newEnv(t)
	e.node("tainted", nil, map[string]string{"zone": "a"})
	e.node("plain", nil, map[string]string{"zone": "b"})
	n, err := e.cs.CoreV1().Nodes().Get(e.ctx, e.prefix+"tainted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "infer", Effect: corev1.TaintEffectNoSchedule}}
	if _, err := e.cs.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.start()

	// Affinity to zone a, no toleration: waits on the taint.
	aff := e.podSpec("aff", map[string]string{"cpu": "1"})
	aff.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
	}}}
	e.create(aff)
	e.waitReason("aff", "taint")
	// With the toleration it goes to zone a.
	tol := aff.DeepCopy()
	tol.Name = "tol"
	tol.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infer", Effect: corev1.TaintEffectNoSchedule}}
	e.create(tol)
	if p := e.waitBound("tol"); p.Spec.NodeName != e.prefix+"tainted" {
		t.Errorf("tolerating pod on %s, want %stainted", p.Spec.NodeName, e.prefix)
	}
	// NotIn keeps it off zone a (where it would fit, tolerating nothing
	// else): it goes to zone b.
	notin := e.podSpec("notin", map[string]string{"cpu": "1"})
	notin.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a"}}}}},
	}}}
	notin.Spec.Tolerations = tol.Spec.Tolerations
	e.create(notin)
	if p := e.waitBound("notin"); p.Spec.NodeName != e.prefix+"plain" {
		t.Errorf("zone notin (a) pod on %s, want %splain", p.Spec.NodeName, e.prefix)
	}
	// Affinity no node meets waits, saying so.
	gt := e.podSpec("gt", map[string]string{"cpu": "1"})
	gt.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "rank", Operator: corev1.NodeSelectorOpGt, Values: []string{"3"}}}}},
	}}}
	e.create(gt)
	e.waitReason("gt", "node affinity mismatch")

	// Cordon plain: a new pod for zone b waits, and goes once uncordoned.
	n, err = e.cs.CoreV1().Nodes().Get(e.ctx, e.prefix+"plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Unschedulable = true
	if n, err = e.cs.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	zb := e.podSpec("zb", map[string]string{"cpu": "1"})
	zb.Spec.NodeSelector["zone"] = "b"
	e.create(zb)
	e.waitReason("zb", "untolerated taint node.kubernetes.io/unschedulable:NoSchedule")
	if p := e.get("zb"); p.Spec.NodeName != "" {
		t.Fatalf("pod bound to cordoned %s", p.Spec.NodeName)
	}
	// A pod tolerating the cordon (a DaemonSet's) lands there, as
	// kube-scheduler's NodeUnschedulable lets it.
	ds := e.podSpec("ds", map[string]string{"cpu": "1"})
	ds.Spec.NodeSelector["zone"] = "b"
	ds.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	e.create(ds)
	if p := e.waitBound("ds"); p.Spec.NodeName != e.prefix+"plain" {
		t.Errorf("the pod tolerating the cordon is on %s, want %splain", p.Spec.NodeName, e.prefix)
	}
	n.Spec.Unschedulable = false
	if _, err := e.cs.CoreV1().Nodes().Update(e.ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := e.waitBound("zb"); p.Spec.NodeName != e.prefix+"plain" {
		t.Errorf("zb on %s", p.Spec.NodeName)
	}
}

// A pod with scheduling gates (a queue controller holds it, as Kueue
// does) is not placed, even as pods created after it are; once its gates
// are removed it is bound. Status-only updates of a gated pod do not place
// it either.
func TestSchedulingGatesHoldAPod(t *testing.T) {
	e := newEnv(t)
	e.node("a", map[string]string{"nvidia.com/gpu": "2"}, nil)
	r := e.start()
	gated := e.podSpec("gated", map[string]string{"nvidia.com/gpu": "1"})
	gated.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
	e.create(gated)
	e.create(e.podSpec("after", map[string]string{"nvidia.com/gpu": "1"}))
	e.waitBound("after")
	// Had it been taken, its task would be in the engine by now: it was
	// submitted no later than the pod bound after it.
	if p := e.get("gated"); p.Spec.NodeName != "" {
		t.Fatalf("the gated pod was bound to %s", p.Spec.NodeName)
	} else if rec, ok := r.eng.Task(string(p.UID)); ok {
		t.Fatalf("the gated pod has a task: %+v", rec)
	}
	p := e.get("gated")
	p.Spec.SchedulingGates = nil
	if _, err := e.cs.CoreV1().Pods(e.ns).Update(e.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitBound("gated")
}
