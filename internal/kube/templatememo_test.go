package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestTemplateMemoIsPodRequest: pods decoded through shared parts get
// from the memo what podRequest and podTolerations make of them, one
// entry per template; what a caller changes in its copy does not reach
// the next pod; a pod whose overhead or pod-level resources add to its
// request is worked out alone although its containers are shared.
func TestTemplateMemoIsPodRequest(t *testing.T) {
	parts := &decodedParts{}
	decode := func(p *corev1.Pod) *corev1.Pod {
		raw, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var out corev1.Pod
		if !decodeLeanPod(&out, raw, parts) {
			t.Fatal("refused")
		}
		return &out
	}
	spec := func(cpu string) corev1.PodSpec {
		return corev1.PodSpec{
			Containers:     []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", cpu, "nvidia.com/gpu", "1")}}},
			InitContainers: []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "4")}}},
			Tolerations:    []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
		}
	}
	var pods []*corev1.Pod
	for i, cpu := range []string{"1", "1", "2", "1"} {
		pods = append(pods, decode(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p" + string(rune('a'+i))}, Spec: spec(cpu)}))
	}
	withOverhead := spec("1")
	withOverhead.Overhead = rl("cpu", "250m")
	pods = append(pods, decode(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "overhead"}, Spec: withOverhead}))
	withPodLevel := spec("1")
	withPodLevel.Resources = &corev1.ResourceRequirements{Requests: rl("cpu", "8")}
	pods = append(pods, decode(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-level"}, Spec: withPodLevel}))

	tm := &templateMemo{}
	for _, p := range pods {
		want, werr := podRequest(p)
		got, err := tm.request(p)
		if d := cmp.Diff(want, got); d != "" || (err == nil) != (werr == nil) {
			t.Fatalf("%s: memo's request (-podRequest +memo):\n%s %v %v", p.Name, d, err, werr)
		}
		for k := range got {
			got[k] = -1 // the caller's copy
		}
		wantTols, _ := podTolerations(p.Spec.Tolerations)
		gotTols, err := tm.podTolerations(p.Spec.Tolerations)
		if d := cmp.Diff(wantTols, gotTols); d != "" || err != nil {
			t.Fatalf("%s: memo's tolerations (-podTolerations +memo):\n%s %v", p.Name, d, err)
		}
		gotTols[0] = "changed"
	}
	if n := len(tm.requests.m); n != 2 {
		t.Errorf("%d requests remembered, want 2 (one per template; overhead and pod-level pods are not)", n)
	}
	if n := len(tm.tolerations.m); n != 1 {
		t.Errorf("%d toleration lists remembered, want 1", n)
	}
	for _, p := range pods[:2] {
		if got, _ := tm.request(p); got["cpu"] != 4000 {
			t.Errorf("%s: request %v after a caller changed its copy; want cpu 4000 (the init container's)", p.Name, got)
		}
	}
	var nilMemo *templateMemo
	if got, err := nilMemo.request(pods[0]); err != nil || got["cpu"] != 4000 {
		t.Errorf("a nil memo: %v %v", got, err)
	}
}

// TestTemplateMemoIsBounded: however many lists pass, a memo holds at
// most maxMemoEntries.
func TestTemplateMemoIsBounded(t *testing.T) {
	tm := &templateMemo{}
	for i := range 3 * maxMemoEntries {
		tols := []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}
		if _, err := tm.podTolerations(tols); err != nil {
			t.Fatal(err)
		}
		if n := len(tm.tolerations.m); n > maxMemoEntries {
			t.Fatalf("after %d lists, %d held", i+1, n)
		}
	}
}
