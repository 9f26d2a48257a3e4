//go:build partsguard

package kubewire

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPartsGuardCatchesAWrite: in the guard build, a write to a decoded
// part pods share (here a container's requests, through one pod) is
// caught when another pod of the template finds the part, and when the
// part's generation is evicted.
func TestPartsGuardCatchesAWrite(t *testing.T) {
	raw, err := (&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}}},
	}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	caught := func(what string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if s, _ := r.(string); !strings.Contains(s, "a shared decoded part was written") {
				t.Errorf("%s: recovered %v, want the guard's panic", what, r)
			}
		}()
		f()
	}
	for _, when := range []string{"found", "evicted"} {
		parts := &decodedParts{}
		var a corev1.Pod
		if !decodeLeanPod(&a, raw, parts) {
			t.Fatal("refused")
		}
		var b corev1.Pod
		if !decodeLeanPod(&b, raw, parts) { // found, unchanged: no panic
			t.Fatal("refused")
		}
		a.Spec.Containers[0].Resources.Requests["memory"] = rl("memory", "1Gi")["memory"]
		switch when {
		case "found":
			caught(when, func() { decodeLeanPod(&corev1.Pod{}, raw, parts) })
		case "evicted":
			caught(when, func() {
				// Two generations' worth of other parts push it out.
				big := strings.Repeat("x", maxPartBytes-64)
				for i := 0; i < 2*partGenerationBytes/maxPartBytes+2; i++ {
					parts.containers.put([]byte(big+string(rune('a'+i%26))+strings.Repeat("y", i/26)), nil)
				}
			})
		}
	}
}
