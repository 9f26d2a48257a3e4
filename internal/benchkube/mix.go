package benchkube

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Mixes of pods a run creates.
const (
	// MixPlain: every pod asks for 500m and 1Gi, every other one for a GPU.
	MixPlain = "plain"
	// MixRealistic: the constraints of real services and training jobs,
	// by pod index modulo 12:
	//   - 0, 1: required anti-affinity by hostname within a group of
	//     about 1/50 of them (a Deployment's replicas, one per node);
	//   - 2, 3: required anti-affinity by zone, two per group;
	//   - 4-7: spread over zones (maxSkew 1, DoNotSchedule) within one of
	//     20 groups;
	//   - 8, 9: a GPU, with required node affinity to the H100 nodes;
	//   - 10: a host port, one of 200 (each used by a few pods);
	//   - 11: plain.
	// Nodes carry four zones and, alternately, H100 and A100 GPUs. Every
	// pod can be placed on the default fleet (1000 nodes of 8 GPUs).
	MixRealistic = "realistic"
)

// zoneKey is the node label realistic nodes are zoned by.
const zoneKey = corev1.LabelTopologyZone

// nodeLabels are a bench node's labels in mix.
func nodeLabels(mix string, i int) map[string]string {
	name := nodeName(i)
	l := map[string]string{"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "H100-80GB", "bench": "kube"}
	if mix == MixRealistic {
		l[zoneKey] = fmt.Sprintf("zone-%d", i%4)
		if i%2 == 1 {
			l["nvidia.com/gpu.product"] = "A100-80GB"
		}
	}
	return l
}

// gpuPod reports whether pod i asks for a GPU in mix.
func gpuPod(mix string, i int) bool {
	if mix == MixRealistic {
		return i%12 == 8 || i%12 == 9
	}
	return i%2 == 0
}

// shapePod gives pod i of mix its labels and constraints.
func shapePod(mix string, i int, p *corev1.Pod) {
	if mix != MixRealistic {
		return
	}
	sel := func(app string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	}
	anti := func(app, key string) *corev1.Affinity {
		return &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{LabelSelector: sel(app), TopologyKey: key}}}}
	}
	s := &p.Spec
	switch i % 12 {
	case 0, 1:
		app := fmt.Sprintf("host-%d", i/12%50)
		p.Labels = map[string]string{"app": app}
		s.Affinity = anti(app, corev1.LabelHostname)
	case 2, 3:
		app := fmt.Sprintf("zone-%d", i/12)
		p.Labels = map[string]string{"app": app}
		s.Affinity = anti(app, zoneKey)
	case 4, 5, 6, 7:
		app := fmt.Sprintf("spread-%d", i/12%20)
		p.Labels = map[string]string{"app": app}
		s.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: zoneKey,
			WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: sel(app)}}
	case 8, 9:
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "nvidia.com/gpu.product", Operator: corev1.NodeSelectorOpIn, Values: []string{"H100-80GB"}}}}}}}}
	case 10:
		s.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: int32(8000 + i/12%200), Protocol: corev1.ProtocolTCP}}
	}
}

// gpuNodes is how many of n nodes hold the GPUs mix's GPU pods may take.
func gpuNodes(mix string, n int) int {
	if mix == MixRealistic {
		return (n + 1) / 2
	}
	return n
}

// gpuPods is how many of n pods ask for a GPU in mix.
func gpuPods(mix string, n int) int {
	c := 0
	for i := range n {
		if gpuPod(mix, i) {
			c++
		}
	}
	return c
}
