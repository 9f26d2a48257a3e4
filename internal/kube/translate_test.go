package kube

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = k8sresource.MustParse(kv[i+1])
	}
	return out
}

func TestNodeTranslation(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-1", Labels: map[string]string{
			LabelGPUProduct: "H100-80GB", LabelGPUMemory: "81920", "zone": "a", "hetsched.io/node": "spoof",
		}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "dedicated", Value: "train", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute},
		}},
		Status: corev1.NodeStatus{
			Allocatable: rl("cpu", "7500m", "memory", "60Gi", "pods", "110", "nvidia.com/gpu", "2", "example.com/licence", "5", "hugepages-2Mi", "1Gi"),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	got, dropped := newNodeTranslator(DefaultDeviceResources).node(n)
	want := api.Node{
		Name:   "gpu-1",
		Labels: map[string]string{LabelGPUProduct: "H100-80GB", LabelGPUMemory: "81920", "zone": "a"},
		Taints: []string{"dedicated=train:NoSchedule", "node.kubernetes.io/unreachable:NoSchedule"},
		Capacity: resource.List{"cpu": 7500, "memory": 60 << 30, PodsResource: 110_000,
			"nvidia.com/gpu": 2000, "example.com/licence": 5000},
		Devices: []api.Device{
			{Type: "nvidia.com/gpu", ID: "0", Model: "H100-80GB", Memory: 80 << 30},
			{Type: "nvidia.com/gpu", ID: "1", Model: "H100-80GB", Memory: 80 << 30},
		},
		State: api.NodeReady,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("node (-want +got):\n%s", d)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("translated node does not validate: %v", err)
	}
	if !strings.Contains(strings.Join(dropped, ";"), "hugepages-2Mi") || !strings.Contains(strings.Join(dropped, ";"), "label hetsched.io/node") {
		t.Errorf("dropped %v, want hugepages-2Mi and the spoofed hetsched.io/node label", dropped)
	}

	// Cordoned or not Ready: no new pods.
	n.Spec.Unschedulable = true
	if got, _ := newNodeTranslator(nil).node(n); got.State != api.NodeCordoned {
		t.Errorf("unschedulable node is %s", got.State)
	}
	n.Spec.Unschedulable = false
	n.Status.Conditions[0].Status = corev1.ConditionUnknown
	if got, _ := newNodeTranslator(nil).node(n); got.State != api.NodeCordoned {
		t.Errorf("not Ready node is %s", got.State)
	}
}

func TestNodeLabelsKeepTheWellKnownFirst(t *testing.T) {
	in := map[string]string{corev1.LabelHostname: "n1", LabelGPUProduct: "A10"}
	for i := range 100 {
		in["aaa.example.com/l"+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = "v"
	}
	got, dropped := nodeLabels(in, nil)
	if len(got) != api.MaxNodeLabels || got[corev1.LabelHostname] != "n1" || got[LabelGPUProduct] != "A10" {
		t.Errorf("kept %d labels (hostname %q, product %q), want %d with the well-known ones", len(got), got[corev1.LabelHostname], got[LabelGPUProduct], api.MaxNodeLabels)
	}
	if len(dropped) != len(in)-api.MaxNodeLabels {
		t.Errorf("dropped %d, want %d", len(dropped), len(in)-api.MaxNodeLabels)
	}
}

func TestPodRequestAsKubeSchedulerComputesIt(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi", "nvidia.com/gpu", "1")}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "500m")}},
		},
		InitContainers: []corev1.Container{
			// A plain init container runs alone: only its peak counts.
			{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "4", "memory", "512Mi")}},
			// A sidecar runs beside the containers: it adds.
			{Name: "side", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "128Mi")}},
		},
		Overhead: rl("cpu", "100m", "memory", "64Mi"),
	}}
	got, err := podRequest(pod)
	if err != nil {
		t.Fatal(err)
	}
	// cpu: max(init 4, 1+0.5+0.25) + 0.1; memory: max(0.5Gi, 1Gi+128Mi) + 64Mi.
	want := resource.List{"cpu": 4100, "memory": (1 << 30) + (128 << 20) + (64 << 20), "nvidia.com/gpu": 1000, PodsResource: 1000}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("request (-want +got):\n%s", d)
	}
}

func TestPodTranslation(t *testing.T) {
	prio := int32(2_000_000)
	pt := podTranslator{tiers: DefaultPriorityTiers}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "train-0", Labels: map[string]string{LabelQueue: "research"},
			Annotations: map[string]string{AnnotationPreemptible: "false"}},
		Spec: corev1.PodSpec{
			Priority:     &prio,
			NodeSelector: map[string]string{"zone": "a"},
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: LabelGPUProduct, Operator: corev1.NodeSelectorOpIn, Values: []string{"H100-80GB", "A100-80GB"}},
				}}},
			}}},
			Tolerations: []corev1.Toleration{
				{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "train", Effect: corev1.TaintEffectNoSchedule},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			},
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: rl("nvidia.com/gpu", "8")}}},
		},
	}
	got, err := pt.task(pod, "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	one := api.PriorityHigh
	no := false
	want := api.Task{
		ID: "uid-1", Name: "ml/train-0", Queue: "research", Priority: &one, Preemptible: &no, Requeue: &no, Lease: api.NoExpiry,
		Resources:    resource.List{"nvidia.com/gpu": 8000, PodsResource: 1000},
		NodeSelector: map[string]string{"zone": "a"},
		NodeAffinity: []string{"nvidia.com/gpu.product in (H100-80GB,A100-80GB)"},
		Tolerations:  []string{"dedicated=train:NoSchedule", "node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"},
		Metadata:     map[string]string{metaNamespace: "ml", metaPod: "train-0"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("task (-want +got):\n%s", d)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("translated task does not validate: %v", err)
	}
}

func TestPodTranslationRefusesWhatItCannotExpress(t *testing.T) {
	pt := podTranslator{tiers: DefaultPriorityTiers}
	for name, tc := range map[string]struct {
		mutate func(*corev1.Pod)
		want   string
	}{
		"bad tier":        {func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationPriority: "7"} }, "hetsched.io/priority"},
		"bad preemptible": {func(p *corev1.Pod) { p.Annotations = map[string]string{AnnotationPreemptible: "maybe"} }, "hetsched.io/preemptible"},
		"empty term": {func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}}}
		}, "matches no node"},
		"Gt of a word": {func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "mem", Operator: corev1.NodeSelectorOpGt, Values: []string{"big"}}}}},
			}}}
		}, "needs an integer"},
		"other field": {func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "spec.podCIDR", Operator: corev1.NodeSelectorOpIn, Values: []string{"x"}}}}},
			}}}
		}, "only metadata.name"},
		"own label": {func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{api.NodeNameLabel: "x"} }, "hetsched's own label"},
	} {
		t.Run(name, func(t *testing.T) {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}
			tc.mutate(p)
			_, err := pt.task(p, "id")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestPriorityTiers(t *testing.T) {
	tiers, err := ParsePriorityTiers("1000,100,0")
	if err != nil {
		t.Fatal(err)
	}
	for prio, want := range map[int32]int{2000: 0, 1000: 0, 999: 1, 100: 1, 99: 2, 0: 2, -1: 3} {
		if got := tiers.Tier(prio); got != want {
			t.Errorf("priority %d: tier %d, want %d", prio, got, want)
		}
	}
	for _, bad := range []string{"1,2", "a,b,c", "0,100,1000", "1,2,99999999999"} {
		if _, err := ParsePriorityTiers(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestDevicesAnnotationRoundTrips(t *testing.T) {
	devs := []api.DeviceRef{
		{Type: "nvidia.com/gpu", ID: "3", Share: 1000}, {Type: "google.com/tpu", ID: "0", Share: 1000},
		{Type: "nvidia.com/gpu", ID: "1", Share: 500},
	}
	s := formatDevices(devs)
	if s != "google.com/tpu=0;nvidia.com/gpu=3,1@500" {
		t.Errorf("annotation %q", s)
	}
	back := parseDevices(s)
	want := []api.DeviceRef{{Type: "google.com/tpu", ID: "0", Share: 1000}, {Type: "nvidia.com/gpu", ID: "3", Share: 1000}, {Type: "nvidia.com/gpu", ID: "1", Share: 500}}
	if d := cmp.Diff(want, back); d != "" {
		t.Errorf("parsed (-want +got):\n%s", d)
	}
	for _, bad := range []string{"x", "a=", "=1", "a=1@0", "a=1@2000", "a=1,"} {
		if got := parseDevices(bad); got != nil {
			t.Errorf("%q parsed as %v", bad, got)
		}
	}
}

func FuzzParseDevices(f *testing.F) {
	f.Add("nvidia.com/gpu=0,1;google.com/tpu=3@250")
	f.Add(";;==@@")
	f.Fuzz(func(t *testing.T, s string) {
		devs := parseDevices(s)
		if devs == nil {
			return
		}
		again := parseDevices(formatDevices(devs))
		if len(again) != len(devs) {
			t.Fatalf("%q: %v does not survive formatting (%v)", s, devs, again)
		}
	})
}

// Every operator of required node affinity becomes a term hetsched's core
// matches: In, NotIn, Exists, DoesNotExist, Gt, Lt, and metadata.name.
func TestPodNodeAffinityTerms(t *testing.T) {
	req := func(k string, op corev1.NodeSelectorOperator, v ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: k, Operator: op, Values: v}
	}
	pod := &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{
				req("zone", corev1.NodeSelectorOpNotIn, "a", "b"), req("spot", corev1.NodeSelectorOpDoesNotExist),
				req(LabelGPUMemory, corev1.NodeSelectorOpGt, "40960"), req("rank", corev1.NodeSelectorOpLt, "3"), req("gpu", corev1.NodeSelectorOpExists),
			}},
			{MatchFields: []corev1.NodeSelectorRequirement{req("metadata.name", corev1.NodeSelectorOpIn, "n1", "n2")}},
		}},
	}}}}
	got, err := podNodeAffinity(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"zone notin (a,b),!spot,nvidia.com/gpu.memory>40960,rank<3,gpu", "hetsched.io/node in (n1,n2)"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("terms (-want +got):\n%s", d)
	}
	for _, term := range got {
		if _, err := api.ParseSelector(term); err != nil {
			t.Errorf("%q: %v", term, err)
		}
	}
}

func TestLeaseTimings(t *testing.T) {
	for _, tc := range []struct {
		in, want [3]time.Duration
		err      string
	}{
		{[3]time.Duration{}, [3]time.Duration{15 * time.Second, 10 * time.Second, 2 * time.Second}, ""},
		{[3]time.Duration{3 * time.Second}, [3]time.Duration{3 * time.Second, 2 * time.Second, 400 * time.Millisecond}, ""},
		{[3]time.Duration{3 * time.Second, 2 * time.Second, 500 * time.Millisecond}, [3]time.Duration{3 * time.Second, 2 * time.Second, 500 * time.Millisecond}, ""},
		{[3]time.Duration{2 * time.Second, 3 * time.Second}, [3]time.Duration{}, "renew-deadline"},
		{[3]time.Duration{3 * time.Second, 2 * time.Second, 2 * time.Second}, [3]time.Duration{}, "retry-period"},
		{[3]time.Duration{-time.Second}, [3]time.Duration{}, "negative"},
	} {
		ld, rd, rp, err := leaseTimings(tc.in[0], tc.in[1], tc.in[2])
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want one on %s", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || [3]time.Duration{ld, rd, rp} != tc.want {
			t.Errorf("%v: %v %v %v %v, want %v", tc.in, ld, rd, rp, err, tc.want)
		}
	}
}
