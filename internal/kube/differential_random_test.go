package kube_test

// The randomised differential scenario (issue 40 §3): KWOK nodes of
// random zones, taints and GPUs, and pods of ten shapes mixing the
// constraints, created in a random order. Which pods of a shape a
// scheduler leaves waiting is its queue's order, so the copies are
// compared by the count bound per shape, and every bound pod's legality
// is checked.
//
// By default one seed of 100 nodes and 600 pods runs (about a minute on
// two cores); HETSCHED_DIFF_BIG=1 (and not -short) runs the issue's
// size, 200 nodes and 2,000 pods, for three seeds.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestDifferentialRandom(t *testing.T) {
	if testing.Short() {
		t.Skip("the randomised differential scenario is not short")
	}
	nodes, pods, seeds := 100, 600, []uint64{1}
	if os.Getenv("HETSCHED_DIFF_BIG") != "" {
		nodes, pods, seeds = 200, 2000, []uint64{1, 2, 3}
	}
	ks := startOracle(t)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			newDiffEnv(t, ks, randomScenario(seed, nodes, pods), 20*time.Minute).run()
		})
	}
}

// A shape is one kind of pod of the randomised scenario: its name (the
// pods' group and app label), how many there are per node of the
// cluster, and how it is made.
type shape struct {
	name    string
	perNode float64
	opts    []podOpt
}

// randomShapes are the ten shapes. Each pod asks for little cpu, so that
// only the constraints (and GPUs) keep pods waiting, whatever the order:
// host ports and hostname anti-affinity outnumber the nodes that take
// them, GPU pods the GPUs, zone anti-affinity the zones (a node without
// the zone key takes any number: its term does not apply there).
func randomShapes() []shape {
	zone := "zone"
	gpuTol := corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}
	honor := corev1.NodeInclusionPolicyHonor
	return []shape{
		{"plain", 0, nil}, // the rest
		{"host-port", 1.2, []podOpt{withHostPort(8080, corev1.ProtocolTCP, "")}},
		{"anti-host", 1.2, []podOpt{withLabels("app", "anti-host"), withAnti(term(corev1.LabelHostname, "app", "anti-host"))}},
		{"anti-zone", 0.3, []podOpt{withLabels("app", "anti-zone"), withAnti(term(zone, "app", "anti-zone"))}},
		{"spread-zone", 0.5, []podOpt{withLabels("app", "spread-zone"), withSpread(zone, 1, nil)}},
		{"spread-host", 0.5, []podOpt{withLabels("app", "spread-host"), withSpread(corev1.LabelHostname, 2, func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &honor })}},
		{"anchor", 0.05, []podOpt{withLabels("app", "anchor"), request("cpu", "200m")}},
		{"follower", 0.25, []podOpt{withLabels("app", "follower"), withAffinity(term(zone, "app", "anchor"))}},
		{"gpu", 0.5, []podOpt{request("nvidia.com/gpu", "1"), tolerate(gpuTol), func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"accel": "gpu"} }}},
		{"noexecute-zone01", 0.25, []podOpt{tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}),
			withNodeAffinity(corev1.NodeSelectorRequirement{Key: zone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z0", "z1"}}, false)}},
	}
}

// randomScenario makes nodes nodes (8 cpu, 32Gi; a tenth without a zone,
// a fifth with two GPUs and tainted gpu=true:NoSchedule, a twentieth
// tainted NoExecute, a tenth PreferNoSchedule) and pods pods of the
// shapes, each count varied by ±20% by the seed, in a random order.
func randomScenario(seed uint64, nodes, pods int) *scenario {
	r := rand.New(rand.NewPCG(seed, 40))
	sc := &scenario{name: fmt.Sprintf("random-%d", seed), quiet: 12 * time.Second, limit: 5 * time.Minute, workers: 8}
	for i := range nodes {
		n := diffNode{name: fmt.Sprintf("n%03d", i), alloc: map[string]string{"cpu": "8", "memory": "32Gi"}, labels: map[string]string{}}
		if r.IntN(10) != 0 {
			n.labels["zone"] = fmt.Sprintf("z%d", r.IntN(4))
		}
		switch {
		case r.IntN(5) == 0:
			n.alloc["nvidia.com/gpu"] = "2"
			n.labels["accel"] = "gpu"
			n.taints = append(n.taints, corev1.Taint{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule})
		case r.IntN(20) == 0:
			n.taints = append(n.taints, corev1.Taint{Key: "dedicated", Value: "infra", Effect: corev1.TaintEffectNoExecute})
		}
		if r.IntN(10) == 0 {
			n.taints = append(n.taints, corev1.Taint{Key: "maint", Effect: corev1.TaintEffectPreferNoSchedule})
		}
		sc.nodes = append(sc.nodes, n)
	}
	shapes := randomShapes()
	var list []diffPod
	for _, s := range shapes[1:] {
		count := int(s.perNode * float64(nodes) * (0.8 + 0.4*r.Float64()))
		for i := range count {
			list = append(list, diffPod{pod: dpod(fmt.Sprintf("%s-%d", s.name, i), s.opts...), group: s.name})
		}
	}
	for i := range max(pods-len(list), 0) {
		list = append(list, diffPod{pod: dpod(fmt.Sprintf("plain-%d", i)), group: "plain"})
	}
	r.Shuffle(len(list), func(i, j int) { list[i], list[j] = list[j], list[i] })
	sc.pods = list
	return sc
}
