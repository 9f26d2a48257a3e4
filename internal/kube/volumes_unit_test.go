package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/api"
)

// TestVolumeNodeTerms: a volume's node affinity and zone labels (several
// zones joined by "__") become node terms, each term with the zones; a
// pod's terms and its volumes' combine one of each, within the bound on
// terms.
func TestVolumeNodeTerms(t *testing.T) {
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "v", Labels: map[string]string{corev1.LabelTopologyZone: "a__b"}},
		Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"ssd"}}}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpIn, Values: []string{"nvme"}}}},
		}}}}}
	got, err := pvTerms(pv)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"disk in (ssd),topology.kubernetes.io/zone in (a,b)", "disk in (nvme),topology.kubernetes.io/zone in (a,b)"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("terms (-want +got):\n%s", d)
	}
	for _, term := range got {
		if _, err := api.ParseSelector(term); err != nil {
			t.Errorf("%q: %v", term, err)
		}
	}
	joined, err := joinTerms([]string{"gpu", "tpu"}, [][]string{got, {"rack=r1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(joined) != 4 || joined[0] != "gpu,disk in (ssd),topology.kubernetes.io/zone in (a,b),rack=r1" {
		t.Errorf("joined %q", joined)
	}
	if _, err := joinTerms([]string{"a", "b", "c"}, [][]string{{"x", "y", "z"}}); err == nil || !strings.Contains(err.Error(), "terms") {
		t.Errorf("9 terms past the bound of %d: error %v", api.MaxAffinityTerms, err)
	}
	if j, _ := joinTerms(nil, [][]string{{"x"}}); len(j) != 1 || j[0] != "x" {
		t.Errorf("a pod without terms takes its volume's: %q", j)
	}
}
