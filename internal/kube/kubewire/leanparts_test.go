package kubewire

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLeanPodsOfOneTemplateShareParts: two pods whose containers and
// tolerations are the same bytes get one decoded copy of what those
// point to; a pod whose container differs gets its own.
func TestLeanPodsOfOneTemplateShareParts(t *testing.T) {
	pod := func(name, cpu string) []byte {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec: corev1.PodSpec{
				Containers:  []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", cpu)}}},
				Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, TolerationSeconds: ptr(int64(300))}},
			},
		}
		raw, err := p.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	parts := &decodedParts{}
	var a, b, c corev1.Pod
	if !decodeLeanPod(&a, pod("a", "1"), parts) || !decodeLeanPod(&b, pod("b", "1"), parts) || !decodeLeanPod(&c, pod("c", "2"), parts) {
		t.Fatal("refused")
	}
	same := func(x, y corev1.Pod) bool {
		return reflect.ValueOf(x.Spec.Containers[0].Resources.Requests).UnsafePointer() == reflect.ValueOf(y.Spec.Containers[0].Resources.Requests).UnsafePointer()
	}
	if !same(a, b) || a.Spec.Tolerations[0].TolerationSeconds != b.Spec.Tolerations[0].TolerationSeconds {
		t.Error("pods of one template decoded their containers or tolerations twice")
	}
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] || cap(a.Spec.Containers) != len(a.Spec.Containers) {
		t.Error("pods of one template do not share one full slice of containers")
	}
	if same(a, c) {
		t.Error("a pod with another container got the first pod's")
	}
	if a.Name != "a" || b.Name != "b" || c.Spec.Containers[0].Resources.Requests.Cpu().String() != "2" {
		t.Errorf("pods decoded wrong: %q %q %v", a.Name, b.Name, c.Spec.Containers[0].Resources.Requests)
	}
	if got := parts.containers.len(); got != 2 {
		t.Errorf("%d containers held, want 2", got)
	}
}

// TestPartCacheIsBounded: however many distinct parts pass, what is held
// stays within two generations, a part used again survives the drop of
// its generation, and an oversized part is never held.
func TestPartCacheIsBounded(t *testing.T) {
	var c partCache[int]
	key := func(i int) []byte { return []byte(strconv.Itoa(i) + strings.Repeat("x", 1000)) }
	hot := key(-1)
	c.put(hot, -1)
	for i := range 20000 { // about 5 generations' worth
		c.put(key(i), i)
		if _, ok := c.get(hot); !ok {
			t.Fatalf("after %d parts, the part used at every step was dropped", i)
		}
	}
	held := 0
	for k := range c.cur {
		held += len(k)
	}
	for k := range c.old {
		held += len(k)
	}
	if held > 2*partGenerationBytes {
		t.Errorf("%d bytes of keys held, want at most %d", held, 2*partGenerationBytes)
	}
	if v, ok := c.get(key(19999)); !ok || v != 19999 {
		t.Errorf("the newest part: %d %v", v, ok)
	}
	if _, ok := c.get(key(0)); ok {
		t.Error("the oldest part is still held after its generations were dropped")
	}
	big := make([]byte, maxPartBytes+1)
	c.put(big, 1)
	if _, ok := c.get(big); ok {
		t.Error("a part over maxPartBytes was held")
	}
}

// TestLeanPodSplitRepeatedField: a repeated field's elements apart (valid
// protobuf, though Marshal never writes it) are all decoded, in order, as
// the generated Unmarshal does, and the shared slice of the first run is
// not written by the second.
func TestLeanPodSplitRepeatedField(t *testing.T) {
	spec := func(s corev1.PodSpec) []byte {
		b, err := s.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	first := spec(corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}}, Tolerations: []corev1.Toleration{{Key: "x"}}})
	between := spec(corev1.PodSpec{NodeName: "n1"})
	second := spec(corev1.PodSpec{Containers: []corev1.Container{{Name: "b"}}, Tolerations: []corev1.Toleration{{Key: "y"}}})
	parts := &decodedParts{}
	var alone corev1.PodSpec
	if err := decodeLeanSpec(&alone, first, parts); err != nil {
		t.Fatal(err)
	}
	raw := append(append(append([]byte{}, first...), between...), second...)
	var got, want corev1.PodSpec
	if err := decodeLeanSpec(&got, raw, parts); err != nil {
		t.Fatal(err)
	}
	if err := want.Unmarshal(raw); err != nil {
		t.Fatal(err)
	}
	p := corev1.Pod{Spec: want}
	leanPod(&p)
	if d := cmp.Diff(p.Spec, got); d != "" {
		t.Errorf("split fields (-Unmarshal +lean):\n%s", d)
	}
	if len(alone.Containers) != 1 || alone.Containers[0].Name != "a" || len(alone.Tolerations) != 1 || alone.Tolerations[0].Key != "x" {
		t.Errorf("the pod decoded first was written by the second: %+v", alone)
	}
}

// TestTrimmingSharedPartsWritesNothing: the informer's transform trims
// watched pods again (LeanPod); on a pod whose containers are shared
// it must not write them while another goroutine reads them (the race
// detector, which CI runs on this package, sees a write).
func TestTrimmingSharedPartsWritesNothing(t *testing.T) {
	p := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}}}}
	raw, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	parts := &decodedParts{}
	var a, b corev1.Pod
	if !decodeLeanPod(&a, raw, parts) || !decodeLeanPod(&b, raw, parts) {
		t.Fatal("refused")
	}
	done := make(chan string)
	go func() {
		var names string
		for range 1000 {
			names = b.Spec.Containers[0].Name
		}
		done <- names
	}()
	for range 1000 {
		LeanPod(&a)
	}
	if got := <-done; got != "c" {
		t.Errorf("the other pod's container is %q", got)
	}
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] {
		t.Error("trimming a lean pod replaced its shared containers")
	}
}
