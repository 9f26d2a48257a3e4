package kubewire

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"
)

// TestLeanPodPathsAgree: a pod decoded lean from its bytes (a watch
// event's) is the pod decoded whole and trimmed (a listed one), for pods
// with every field filled at random, so the field numbers decodeLeanPod
// keeps and the fields leanPod keeps are the same.
func TestLeanPodPathsAgree(t *testing.T) {
	quantities := []string{"1", "250m", "2Gi", "100M", "0"}
	f := randfill.NewWithSeed(1).NilChance(0.1).NumElements(1, 2).MaxDepth(8).Funcs(
		func(q *k8sresource.Quantity, c randfill.Continue) {
			*q = k8sresource.MustParse(quantities[c.Intn(len(quantities))])
		},
		func(tm *metav1.Time, c randfill.Continue) {
			*tm = metav1.Unix(c.Int63n(1<<32), 0)
		},
	)
	parts := &decodedParts{} // shared by all: a second decoding finds its parts
	for i := range 200 {
		var p corev1.Pod
		f.Fill(&p)
		if i%4 == 0 {
			p.Spec.Containers = nil // absent lists, too
			p.Status.ContainerStatuses = nil
		}
		raw, err := p.Marshal()
		if err != nil {
			t.Fatalf("pod %d: marshal: %v", i, err)
		}
		var lean, again, cached corev1.Pod
		if !decodeLeanPod(&lean, raw, nil) || !decodeLeanPod(&again, raw, parts) || !decodeLeanPod(&cached, raw, parts) {
			t.Fatalf("pod %d: decodeLeanPod refused a pod's bytes", i)
		}
		if d := cmp.Diff(lean, again); d != "" {
			t.Fatalf("pod %d: decoded with parts (+) differs from decoded alone (-):\n%s", i, d)
		}
		if d := cmp.Diff(lean, cached); d != "" {
			t.Fatalf("pod %d: decoded from held parts (+) differs from decoded alone (-):\n%s", i, d)
		}
		var whole corev1.Pod
		if err := whole.Unmarshal(raw); err != nil {
			t.Fatalf("pod %d: unmarshal: %v", i, err)
		}
		leanPod(&whole)
		if d := cmp.Diff(whole, lean); d != "" {
			t.Fatalf("pod %d: decoded lean (+) differs from decoded and trimmed (-):\n%s", i, d)
		}
		// What is kept is there.
		if len(p.Spec.Containers) > 0 && (lean.Spec.Containers[0].Name != p.Spec.Containers[0].Name ||
			!lean.Spec.Containers[0].Resources.Requests.Cpu().Equal(*p.Spec.Containers[0].Resources.Requests.Cpu())) {
			t.Fatalf("pod %d: container %+v, want its name and requests from %+v", i, lean.Spec.Containers[0], p.Spec.Containers[0])
		}
		if lean.Spec.NodeName != p.Spec.NodeName || lean.Spec.SchedulerName != p.Spec.SchedulerName || lean.Status.Phase != p.Status.Phase ||
			len(lean.Spec.Tolerations) != len(p.Spec.Tolerations) || len(lean.Spec.ResourceClaims) != len(p.Spec.ResourceClaims) ||
			lean.Name != p.Name || len(lean.Labels) != len(p.Labels) || len(lean.Annotations) != len(p.Annotations) {
			t.Fatalf("pod %d: a kept field was lost", i)
		}
	}
}

// TestLeanPodLeavesOut: what the Scheduler never reads is not cached.
func TestLeanPodLeavesOut(t *testing.T) {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Env: []corev1.EnvVar{{Name: "A"}}, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}},
			Hostname:   "h", NodeName: "n1", DNSPolicy: corev1.DNSClusterFirst,
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{{Type: corev1.PodReady}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Image: "busybox", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	raw, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if !decodeLeanPod(&got, raw, nil) {
		t.Fatal("refused")
	}
	want := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}}, NodeName: "n1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("lean pod (-want +got):\n%s", d)
	}
}
