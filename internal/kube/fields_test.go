package kube

import (
	"fmt"
	"github.com/hetsched/hetsched/internal/kube/kubewire"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/randfill"
)

// podSpecPaths lists the json paths of t's leaves: "containers[].ports[].hostPort".
// Types outside core/v1 (quantities, label selectors) are leaves.
func podSpecPaths(t reflect.Type, prefix string, out *[]string) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice {
			prefix += "[]"
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t.PkgPath() != "k8s.io/api/core/v1" {
		*out = append(*out, prefix)
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			podSpecPaths(f.Type, prefix, out) // inlined (VolumeSource)
			continue
		}
		if prefix != "" {
			name = prefix + "." + name
		}
		podSpecPaths(f.Type, name, out)
	}
}

// decidedBy is the entry that decides path: the longest that is path or
// an ancestor of it.
func decidedBy(path string) (podField, bool) {
	var best podField
	found := false
	for _, f := range podSpecFields {
		if (path == f.path || strings.HasPrefix(path, f.path+".") || strings.HasPrefix(path, f.path+"[]")) && (!found || len(f.path) > len(best.path)) {
			best, found = f, true
		}
	}
	return best, found
}

// TestEveryPodSpecFieldIsDecided: every field of PodSpec, down to the
// containers', volumes', affinity's and tolerations' own, is honoured,
// irrelevant to placement or refused (fields.go); every entry of the
// table names a field that exists, once.
func TestEveryPodSpecFieldIsDecided(t *testing.T) {
	var paths []string
	podSpecPaths(reflect.TypeOf(corev1.PodSpec{}), "", &paths)
	if len(paths) < 300 {
		t.Fatalf("only %d paths found: the walk is broken", len(paths))
	}
	for _, p := range paths {
		if _, ok := decidedBy(p); !ok {
			t.Errorf("PodSpec field %s is not decided: add it to podSpecFields (honoured, irrelevant or refused)", p)
		}
	}
	seen := map[string]bool{}
	for _, f := range podSpecFields {
		if seen[f.path] {
			t.Errorf("%s is decided twice", f.path)
		}
		seen[f.path] = true
		if !slices.ContainsFunc(paths, func(p string) bool {
			return p == f.path || strings.HasPrefix(p, f.path+".") || strings.HasPrefix(p, f.path+"[]")
		}) {
			t.Errorf("podSpecFields names %s, which PodSpec does not have", f.path)
		}
		if f.use == refused && f.why == "" {
			t.Errorf("%s is refused without a reason", f.path)
		}
	}
}

// TestRefusedFieldsAreRefused: a pod setting a refused field does not
// become a task; the error names the field and says why.
func TestRefusedFieldsAreRefused(t *testing.T) {
	set := map[string]func(*corev1.PodSpec){}
	vol := func(src corev1.VolumeSource) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}, {Name: "v", VolumeSource: src}}
		}
	}
	set["volumes[].csi"] = vol(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d"}})
	set["volumes[].awsElasticBlockStore"] = vol(corev1.VolumeSource{AWSElasticBlockStore: &corev1.AWSElasticBlockStoreVolumeSource{}})
	set["volumes[].gcePersistentDisk"] = vol(corev1.VolumeSource{GCEPersistentDisk: &corev1.GCEPersistentDiskVolumeSource{}})
	set["volumes[].azureDisk"] = vol(corev1.VolumeSource{AzureDisk: &corev1.AzureDiskVolumeSource{}})
	set["volumes[].cinder"] = vol(corev1.VolumeSource{Cinder: &corev1.CinderVolumeSource{}})
	set["volumes[].vsphereVolume"] = vol(corev1.VolumeSource{VsphereVolume: &corev1.VsphereVirtualDiskVolumeSource{}})
	set["volumes[].portworxVolume"] = vol(corev1.VolumeSource{PortworxVolume: &corev1.PortworxVolumeSource{}})
	set["volumes[].rbd"] = vol(corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{}})
	set["volumes[].iscsi"] = vol(corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{}})
	pt := podTranslator{tiers: DefaultPriorityTiers}
	for _, f := range podSpecFields {
		if f.use != refused {
			continue
		}
		fn := set[f.path]
		if fn == nil {
			t.Errorf("refused %s: the test cannot set it", f.path)
			continue
		}
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
		fn(&p.Spec)
		name := strings.ReplaceAll(f.path, "[]", "[1]")
		if _, err := pt.task(p, "id"); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), f.why) {
			t.Errorf("a pod setting %s: error %v, want one naming %s and saying %q", f.path, err, name, f.why)
		}
	}
}

// TestDocsListTheDecidedFields: docs/kubernetes.md's table has every
// field that is honoured or refused.
func TestDocsListTheDecidedFields(t *testing.T) {
	b, err := os.ReadFile("../../docs/kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range podSpecFields {
		if f.use != irrelevant && !strings.Contains(string(b), "| `"+f.path+"` | "+f.use.String()) {
			t.Errorf("docs/kubernetes.md's table lacks `%s` (%s)", f.path, f.use)
		}
	}
}

// TestLeanPodTranslatesAsTheWholePod: the lean pod keeps every field the
// translation reads. Pods filled at random (the fields translation reads
// drawn from valid shapes, the rest junk) become the same task, or the
// same refusal, whole and lean.
func TestLeanPodTranslatesAsTheWholePod(t *testing.T) {
	quantities := []string{"1", "250m", "2Gi", "100M"}
	f := randfill.NewWithSeed(7).NilChance(0.2).NumElements(1, 2).MaxDepth(6).Funcs(
		func(q *k8sresource.Quantity, c randfill.Continue) {
			*q = k8sresource.MustParse(quantities[c.Intn(len(quantities))])
		},
		func(tm *metav1.Time, c randfill.Continue) { *tm = metav1.Unix(c.Int63n(1<<32), 0) },
	)
	pt := podTranslator{tiers: DefaultPriorityTiers, namespaces: func(*metav1.LabelSelector) ([]string, error) { return []string{"other"}, nil }}
	sawTask := 0
	for i := range 300 {
		var p corev1.Pod
		f.Fill(&p)
		placementShape(&p, i)
		raw, err := p.Marshal()
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		var lean corev1.Pod
		if !kubewire.DecodePod(&lean, raw) {
			t.Fatalf("pod %d: kubewire.DecodePod refused it", i)
		}
		want, werr := pt.task(&p, "id")
		got, gerr := pt.task(&lean, "id")
		if fmt.Sprint(werr) != fmt.Sprint(gerr) {
			t.Fatalf("pod %d: whole pod's error %v, lean pod's %v", i, werr, gerr)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("pod %d: task of the whole pod (-) and of the lean pod (+):\n%s", i, d)
		}
		if werr == nil {
			sawTask++
		}
	}
	if sawTask < 100 {
		t.Errorf("only %d of 300 pods became tasks: the shapes test little", sawTask)
	}
}

// placementShape gives the fields translation reads valid values, drawn
// by i, over a pod full of junk.
func placementShape(p *corev1.Pod, i int) {
	p.Namespace, p.Name = "ns", fmt.Sprintf("p%d", i)
	p.Labels = map[string]string{"app": []string{"a", "b"}[i%2]}
	p.Annotations = nil
	s := &p.Spec
	s.NodeSelector = map[string]string{"zone": "a"}
	prio := int32(i * 1000)
	s.Priority, s.PriorityClassName, s.PreemptionPolicy = &prio, "", nil
	if i%3 == 0 {
		never := corev1.PreemptNever
		s.PreemptionPolicy = &never
	}
	s.Overhead, s.Resources, s.ResourceClaims, s.SchedulingGroup = nil, nil, nil, nil
	s.Tolerations = []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"x"}}}}
	term := corev1.PodAffinityTerm{LabelSelector: sel, TopologyKey: "zone", MatchLabelKeys: []string{"app"}, Namespaces: []string{"ns"}}
	if i%5 == 1 {
		term.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}
	}
	s.Affinity = &corev1.Affinity{
		NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
			{Weight: 5, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}}}}},
		PodAffinity:     &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 10, PodAffinityTerm: term}}},
		PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{term}},
	}
	s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: int32(1 + i%2), TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel}}
	always := corev1.ContainerRestartPolicyAlways
	for j := range s.InitContainers {
		c := &s.InitContainers[j]
		c.Name, c.Resources.Claims = fmt.Sprintf("i%d", j), nil
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("100m")}
		c.Resources.Limits = nil
		c.RestartPolicy = nil
		if j == 0 && i%2 == 0 {
			c.RestartPolicy = &always
		}
		c.Ports = []corev1.ContainerPort{{ContainerPort: 1, HostPort: int32(9000 + j), Protocol: corev1.ProtocolUDP}}
	}
	for j := range s.Containers {
		c := &s.Containers[j]
		c.Name, c.Resources.Claims = fmt.Sprintf("c%d", j), nil
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("1"), corev1.ResourceMemory: k8sresource.MustParse("1Gi")}
		c.Resources.Limits = nil
		c.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: int32(8000 + j), Protocol: corev1.ProtocolTCP, HostIP: "10.0.0.1"}}
	}
	switch i % 4 {
	case 0:
		s.Volumes = nil
	case 1:
		s.Volumes = []corev1.Volume{{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}}
	case 2:
		s.Volumes = []corev1.Volume{{Name: "pvc", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
	}
	if i%7 == 3 {
		s.SchedulingGroup = &corev1.PodSchedulingGroup{PodGroupName: ptr("g")}
	}
}
