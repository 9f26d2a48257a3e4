package kube

import (
	"fmt"
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
			{Key: "soft", Effect: corev1.TaintEffectPreferNoSchedule},
		}},
		Status: corev1.NodeStatus{
			Allocatable: rl("cpu", "7500m", "memory", "60Gi", "pods", "110", "nvidia.com/gpu", "2", "example.com/licence", "5", "hugepages-2Mi", "1Gi",
				"attachable-volumes-x", "3"),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	got, dropped := newNodeTranslator(DefaultDeviceResources).node(n)
	want := api.Node{
		Name:   "gpu-1",
		Labels: map[string]string{LabelGPUProduct: "H100-80GB", LabelGPUMemory: "81920", "zone": "a"},
		Taints: []string{"dedicated=train:NoSchedule", "node.kubernetes.io/unreachable:NoExecute", "soft:PreferNoSchedule"},
		Capacity: resource.List{"cpu": 7500, "memory": 60 << 30, PodsResource: 110_000,
			"nvidia.com/gpu": 2000, "example.com/licence": 5000, "kubernetes.io/hugepages-2Mi": 1 << 30},
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
	if d := cmp.Diff([]string{"resource attachable-volumes-x", "label hetsched.io/node"}, dropped); d != "" {
		t.Errorf("dropped (-want +got):\n%s", d)
	}

	// Cordoned or not Ready: NoSchedule taints, which a pod may tolerate
	// (kube-scheduler's NodeUnschedulable; the node lifecycle
	// controller's taints), unless the node has them already.
	n.Spec.Taints = n.Spec.Taints[:1]
	for _, c := range []struct {
		unschedulable bool
		ready         corev1.ConditionStatus
		want          []string
	}{
		{true, corev1.ConditionTrue, []string{"dedicated=train:NoSchedule", "node.kubernetes.io/unschedulable:NoSchedule"}},
		{false, corev1.ConditionFalse, []string{"dedicated=train:NoSchedule", "node.kubernetes.io/not-ready:NoSchedule"}},
		{false, corev1.ConditionUnknown, []string{"dedicated=train:NoSchedule", "node.kubernetes.io/unreachable:NoSchedule"}},
		{true, "", []string{"dedicated=train:NoSchedule", "node.kubernetes.io/unschedulable:NoSchedule", "node.kubernetes.io/not-ready:NoSchedule"}},
	} {
		n.Spec.Unschedulable = c.unschedulable
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: c.ready}}
		if c.ready == "" {
			n.Status.Conditions = nil
		}
		got, _ := newNodeTranslator(nil).node(n)
		if d := cmp.Diff(c.want, got.Taints); d != "" || got.State != api.NodeReady {
			t.Errorf("unschedulable %v, Ready %q: state %s, taints (-want +got):\n%s", c.unschedulable, c.ready, got.State, d)
		}
	}
	// The controller's own taint is not doubled.
	n.Spec.Unschedulable = true
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
	if got, _ := newNodeTranslator(nil).node(n); len(got.Taints) != 1 {
		t.Errorf("taints %v, want the node's one unschedulable taint", got.Taints)
	}
}

// TestNodeKeepsEveryLabelAndTaint: a node with Node Feature Discovery's
// hundreds of labels and many taints is held whole: nothing past a count
// is dropped.
func TestNodeKeepsEveryLabelAndTaint(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nfd", Labels: map[string]string{}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	for i := range 300 {
		n.Labels[fmt.Sprintf("feature.node.kubernetes.io/cpu-cpuid.F%d", i)] = "true"
	}
	for i := range 100 {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: fmt.Sprintf("t%d", i), Effect: corev1.TaintEffectNoSchedule})
	}
	got, dropped := newNodeTranslator(nil).node(n)
	if len(got.Labels) != 300 || len(got.Taints) != 100 || len(dropped) != 0 {
		t.Errorf("kept %d labels and %d taints, dropped %v; want 300, 100 and none", len(got.Labels), len(got.Taints), dropped)
	}
	if err := got.Validate(); err != nil {
		t.Errorf("the node does not validate: %v", err)
	}
}

// TestTolerationsKeepTheirEffect: each toleration tolerates taints of its
// own effect only, and an empty key with Exists keeps its effect too, as
// kube-scheduler's TaintToleration reads them.
func TestTolerationsKeepTheirEffect(t *testing.T) {
	got, err := podTolerations([]corev1.Toleration{
		{Key: "a", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: "b", Value: "v", Effect: corev1.TaintEffectNoSchedule},
		{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "c", Operator: corev1.TolerationOpEqual, Value: "w", TolerationSeconds: ptr(int64(30))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"a:NoExecute", "b=v:NoSchedule", "*:NoSchedule", "c=w"}, got); d != "" {
		t.Errorf("tolerations (-want +got):\n%s", d)
	}
	taint := func(s string) api.Taint { tt, _ := api.ParseTaint(s); return tt }
	tol := func(s string) api.Toleration { tt, _ := api.ParseToleration(s); return tt }
	for _, c := range []struct {
		tol, taint string
		want       bool
	}{
		{"a:NoExecute", "a:NoSchedule", false},
		{"a:NoExecute", "a:NoExecute", true},
		{"*:NoSchedule", "x:NoExecute", false},
		{"*:NoSchedule", "x=y:NoSchedule", true},
	} {
		if tol(c.tol).Tolerates(taint(c.taint)) != c.want {
			t.Errorf("%s tolerates %s: want %v", c.tol, c.taint, c.want)
		}
	}
	if _, err := podTolerations([]corev1.Toleration{{Key: "n", Operator: "Gt", Value: "3"}}); err == nil || !strings.Contains(err.Error(), "tolerations[0].operator") {
		t.Errorf("a Gt toleration: error %v, want one naming tolerations[0].operator", err)
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
			Priority:         &prio,
			PreemptionPolicy: ptr(corev1.PreemptNever),
			NodeSelector:     map[string]string{"zone": "a"},
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
		PriorityValue: 2_000_000, PreemptionPolicy: api.PreemptNever,
		Resources:    resource.List{"nvidia.com/gpu": 8000, PodsResource: 1000},
		NodeSelector: map[string]string{"zone": "a"},
		NodeAffinity: []string{"nvidia.com/gpu.product in (H100-80GB,A100-80GB)"},
		Tolerations:  []string{"dedicated=train:NoSchedule", "node.kubernetes.io/unreachable:NoExecute"},
		Metadata:     map[string]string{metaNamespace: "ml", metaPod: "train-0", LabelQueue: "research"},
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
		ld, rd, rp, err := leadershipTimings(tc.in[0], tc.in[1], tc.in[2])
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

// TestPodRequestHoldsHugePagesAndCountsWhatItCan: huge pages are a
// resource like any other (in bytes); a resource hetsched cannot hold is
// an error, and the list still has the rest, so that a pod another
// scheduler bound is counted by its cpu and memory.
func TestPodRequestHoldsHugePagesAndCountsWhatItCan(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "1Gi", "hugepages-2Mi", "64Mi")}},
	}}}
	got, err := podRequest(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := resource.List{"cpu": 2000, "memory": 1 << 30, "kubernetes.io/hugepages-2Mi": 64 << 20, PodsResource: 1000}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("request (-want +got):\n%s", d)
	}
	pod.Spec.Containers[0].Resources.Requests["Odd_Name"] = k8sresource.MustParse("1")
	got, err = podRequest(pod)
	if err == nil || !strings.Contains(err.Error(), "Odd_Name") {
		t.Errorf("error %v, want one naming Odd_Name", err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("what could be held (-want +got):\n%s", d)
	}
}
