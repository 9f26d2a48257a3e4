package kube_test

// The deterministic scenarios of the differential test (issue 40 §3),
// one per constraint of §1 and their mixes. Each pod's expected fate is
// what kube-scheduler does: the test does not state it, it compares.

import (
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/hetsched/hetsched/internal/kube"
	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// TestDifferential runs each scenario under kube-scheduler and hetsched
// side by side and compares them (differential_test.go).
func TestDifferential(t *testing.T) {
	ks := startOracle(t)
	for _, sc := range diffScenarios() {
		t.Run(sc.name, func(t *testing.T) {
			if !sc.serial {
				t.Parallel() // each its own namespaces, nodes and hetsched; one kube-scheduler for all
			}
			newDiffEnv(t, ks, sc, 3*time.Minute).run()
		})
	}
}

func diffScenarios() []*scenario {
	return []*scenario{lateJoinerScenario(), hostPortScenario(), antiAffinityScenario(), affinityScenario(), spreadScenario(),
		taintScenario(), cordonScenario(), spreadTaintScenario(), crossNamespaceScenario(), preemptionScenario(),
		resourcesScenario(), nodeAffinityScenario(), manyLabelsScenario(), labelKeysScenario(), preferencesScenario(), foreignPodsScenario(), volumesScenario(), preemptionConstraintsScenario(), csiScenario(), gangAntiAffinityScenario()}
}

// A podOpt shapes a template pod.
type podOpt func(*corev1.Pod)

// dpod is a template pod asking for 100m cpu and 64Mi, shaped by opts.
func dpod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("100m"), corev1.ResourceMemory: k8sresource.MustParse("64Mi")}}}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func inNS(ns string) podOpt { return func(p *corev1.Pod) { p.Namespace = ns } }

func withLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// request sets a resource's request (and limit, for an extended one).
func request(res, qty string) podOpt {
	return func(p *corev1.Pod) {
		r := &p.Spec.Containers[0].Resources
		r.Requests[corev1.ResourceName(res)] = k8sresource.MustParse(qty)
		if res != "cpu" && res != "memory" {
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			r.Limits[corev1.ResourceName(res)] = k8sresource.MustParse(qty)
		}
	}
}

// onKind keeps the pod to the nodes labelled diff-kind=kind.
func onKind(kind string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[diffKindLabel] = kind
	}
}

func withHostPort(port int32, proto corev1.Protocol, ip string) podOpt {
	return func(p *corev1.Pod) {
		c := &p.Spec.Containers[0]
		c.Ports = append(c.Ports, corev1.ContainerPort{ContainerPort: 80 + int32(len(c.Ports)), HostPort: port, Protocol: proto, HostIP: ip})
	}
}

func affinityOf(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

// term is a pod affinity term over key selecting pods by labels kv.
func term(key string, kv ...string) corev1.PodAffinityTerm {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: m}}
}

func withAffinity(t corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinityOf(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	}
}

func withAnti(t corev1.PodAffinityTerm) podOpt {
	return func(p *corev1.Pod) {
		a := affinityOf(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	}
}

// withNodeAffinity adds a required node affinity term of one requirement.
func withNodeAffinity(req corev1.NodeSelectorRequirement, field bool) podOpt {
	return func(p *corev1.Pod) {
		a := affinityOf(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}}
		}
		t := &a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0]
		if field {
			t.MatchFields = append(t.MatchFields, req)
		} else {
			t.MatchExpressions = append(t.MatchExpressions, req)
		}
	}
}

// withSpread adds a DoNotSchedule constraint over key selecting the
// pod's app label, tuned by tune.
func withSpread(key string, skew int32, tune func(*corev1.TopologySpreadConstraint)) podOpt {
	return func(p *corev1.Pod) {
		c := corev1.TopologySpreadConstraint{MaxSkew: skew, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Labels["app"]}}}
		if tune != nil {
			tune(&c)
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, c)
	}
}

func tolerate(ts ...corev1.Toleration) podOpt {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, ts...) }
}

// replicas are n pods of one group, name-0..n-1, made by opts.
func replicas(name string, n, phase int, opts ...podOpt) []diffPod {
	var out []diffPod
	for i := range n {
		out = append(out, diffPod{pod: dpod(fmt.Sprintf("%s-%d", name, i), opts...), group: name, phase: phase})
	}
	return out
}

func single(phase int, name string, opts ...podOpt) diffPod {
	return diffPod{pod: dpod(name, opts...), phase: phase}
}

func kindNode(name string, taints ...corev1.Taint) diffNode {
	return diffNode{name: name, labels: map[string]string{diffKindLabel: name}, taints: taints}
}

// Host ports: three pods asking for 8080/TCP on two nodes (two bound);
// 8080/UDP is another port; one port on two host addresses is two.
func hostPortScenario() *scenario {
	sc := &scenario{name: "host-ports", nodes: []diffNode{kindNode("a"), kindNode("b")}}
	sc.pods = append(sc.pods, replicas("tcp8080", 3, 0, withHostPort(8080, corev1.ProtocolTCP, ""))...)
	sc.pods = append(sc.pods,
		single(1, "udp8080", withHostPort(8080, corev1.ProtocolUDP, "")),
		single(1, "ip1-9090", onKind("a"), withHostPort(9090, corev1.ProtocolTCP, "127.0.0.1")),
		single(1, "ip2-9090", onKind("a"), withHostPort(9090, corev1.ProtocolTCP, "127.0.0.2")),
		single(2, "any-9090", onKind("a"), withHostPort(9090, corev1.ProtocolTCP, "")),
		single(2, "two-ports", withHostPort(7070, corev1.ProtocolTCP, ""), withHostPort(7071, corev1.ProtocolSCTP, "")))
	return sc
}

// A pod that comes once others of its shape wait: it waits for the same
// reason, and must be told so too. Run alone: another test's nodes
// coming or going change the reason's node count, which tells every
// waiting pod again.
func lateJoinerScenario() *scenario {
	sc := &scenario{name: "late-joiner", serial: true, nodes: []diffNode{{name: "a"}}}
	sc.pods = append(replicas("tcp8080", 2, 0, withHostPort(8080, corev1.ProtocolTCP, "")),
		single(1, "late-tcp8080", withHostPort(8080, corev1.ProtocolTCP, "")))
	return sc
}

// Required anti-affinity by hostname: four replicas on three nodes; a
// later pod the replicas' terms select (and that has none of its own)
// waits too, as the existing pods' anti-affinity is symmetric; zone
// anti-affinity: one per zone.
func antiAffinityScenario() *scenario {
	sc := &scenario{name: "anti-affinity", nodes: []diffNode{
		{name: "a", labels: map[string]string{"zone": "z1"}}, {name: "b", labels: map[string]string{"zone": "z1"}},
		{name: "c", labels: map[string]string{"zone": "z2"}}}}
	sc.pods = append(sc.pods, replicas("web", 4, 0, withLabels("app", "web"), withAnti(term(corev1.LabelHostname, "app", "web")))...)
	sc.pods = append(sc.pods, replicas("zonal", 3, 0, withLabels("app", "zonal"), withAnti(term("zone", "app", "zonal")))...)
	sc.pods = append(sc.pods, single(1, "plain-web", withLabels("app", "web")))
	return sc
}

// Required affinity: to a label no pod has (waits), with a null selector
// (waits), to an anchor by hostname and by zone (joins it), away from it
// by zone, two terms (only pods matching both count), and a series with
// affinity to itself (the first pod's rule).
func affinityScenario() *scenario {
	sc := &scenario{name: "affinity", nodes: []diffNode{
		{name: "a", labels: map[string]string{"zone": "z1", diffKindLabel: "a"}}, {name: "b", labels: map[string]string{"zone": "z1", diffKindLabel: "b"}},
		{name: "c", labels: map[string]string{"zone": "z2", diffKindLabel: "c"}}, {name: "x", labels: map[string]string{diffKindLabel: "x"}}}}
	sc.pods = append(sc.pods,
		single(0, "lonely", withAffinity(term(corev1.LabelHostname, "app", "nobody"))),
		single(0, "null-selector", withAffinity(corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname})),
		single(0, "anchor", withLabels("app", "anchor"), onKind("c")),
		single(1, "by-host", withAffinity(term(corev1.LabelHostname, "app", "anchor"))),
		single(1, "by-zone", withAffinity(term("zone", "app", "anchor"))),
		single(1, "by-zone-on-x", onKind("x"), withAffinity(term("zone", "app", "anchor"))),
		single(1, "away-by-zone", withAnti(term("zone", "app", "anchor"))),
		single(1, "self-on-x", onKind("x"), withLabels("app", "self-x"), withAffinity(term("zone", "app", "self-x"))),
		// Two required terms count only the pods that match both: one
		// pod on c matches each, none both (waits); one pod on b
		// matches both (joins it).
		single(0, "tier-anchor", withLabels("tier", "db"), onKind("c")),
		single(0, "both-anchor", withLabels("app", "both", "tier", "both"), onKind("b")),
		single(1, "two-terms-apart", withAffinity(term(corev1.LabelHostname, "app", "anchor")), withAffinity(term(corev1.LabelHostname, "tier", "db"))),
		single(1, "two-terms-together", withAffinity(term(corev1.LabelHostname, "app", "both")), withAffinity(term("zone", "tier", "both"))))
	sc.pods = append(sc.pods, replicas("series", 3, 0, withLabels("app", "series"), withAffinity(term("zone", "app", "series")))...)
	return sc
}

// Spread over zones, maxSkew 1: 2 nodes in a, 1 in b (4 cpu each), and a
// 16-cpu node without the key; 13 one-cpu pods: b takes 4, a 5, x none.
func spreadScenario() *scenario {
	z := func(name, zone, cpu string) diffNode {
		n := diffNode{name: name, alloc: map[string]string{"cpu": cpu}, labels: map[string]string{}}
		if zone != "" {
			n.labels["zone"] = zone
		}
		return n
	}
	sc := &scenario{name: "spread", nodes: []diffNode{z("a1", "a", "4"), z("a2", "a", "4"), z("b1", "b", "4"), z("x", "", "16")}}
	sc.pods = replicas("spread", 13, 0, withLabels("app", "spread"), request("cpu", "1"), withSpread("zone", 1, nil))
	return sc
}

// Taint effects and tolerations: NoSchedule, NoExecute and
// PreferNoSchedule nodes; tolerations with and without an effect, of the
// wrong value, and empty-key Exists ones naming an effect.
func taintScenario() *scenario {
	taint := func(e corev1.TaintEffect) corev1.Taint { return corev1.Taint{Key: "dedicated", Value: "x", Effect: e} }
	sc := &scenario{name: "taints", nodes: []diffNode{
		kindNode("ns", taint(corev1.TaintEffectNoSchedule)), kindNode("ne", taint(corev1.TaintEffectNoExecute)),
		kindNode("pn", taint(corev1.TaintEffectPreferNoSchedule)),
		kindNode("two", corev1.Taint{Key: "a", Value: "1", Effect: corev1.TaintEffectNoSchedule}, corev1.Taint{Key: "b", Value: "2", Effect: corev1.TaintEffectNoExecute})}}
	eq := func(v string, e corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: v, Effect: e}
	}
	exists := func(key string, e corev1.TaintEffect) corev1.Toleration {
		return corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: e}
	}
	tols := map[string][]corev1.Toleration{
		"plain": nil, "tol-noschedule": {eq("x", corev1.TaintEffectNoSchedule)}, "tol-noexecute": {eq("x", corev1.TaintEffectNoExecute)},
		"tol-any-effect": {eq("x", "")}, "tol-wrong-value": {eq("y", "")}, "exists-key": {exists("dedicated", corev1.TaintEffectNoSchedule)},
		"empty-exists-noschedule": {exists("", corev1.TaintEffectNoSchedule)}, "empty-exists-noexecute": {exists("", corev1.TaintEffectNoExecute)},
		"empty-exists-all": {exists("", "")},
		"tol-a":            {{Key: "a", Value: "1", Effect: corev1.TaintEffectNoSchedule}},
		"tol-a-b":          {{Key: "a", Value: "1", Effect: corev1.TaintEffectNoSchedule}, {Key: "b", Operator: corev1.TolerationOpExists}},
	}
	for _, name := range sortedKeys(tols) {
		for _, kind := range []string{"ns", "ne", "pn", "two"} {
			sc.pods = append(sc.pods, single(0, name+"-on-"+kind, onKind(kind), tolerate(tols[name]...)))
		}
	}
	return sc
}

// daemonSetTolerations are what the DaemonSet controller gives its pods.
var daemonSetTolerations = []corev1.Toleration{
	{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
}

// Cordoned nodes (spec.unschedulable, with and without the taint the
// node controller adds) and nodes tainted not-ready: a DaemonSet-style
// pod (its tolerations, and node affinity to one node by name) lands
// where its tolerations let it; a plain pod does not.
func cordonScenario() *scenario {
	sc := &scenario{name: "cordon", nodes: []diffNode{
		{name: "cordoned", cordon: true},
		{name: "cordoned-tainted", cordon: true, taints: []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}},
		{name: "notready-exec", taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}}},
		{name: "notready", taints: []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute}, {Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}},
	}}
	for _, n := range sc.nodes {
		on := withNodeAffinity(corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{n.name}}, true)
		sc.pods = append(sc.pods,
			single(0, "plain-"+n.name, on),
			single(0, "ds-"+n.name, on, tolerate(daemonSetTolerations...)),
			single(0, "exec-only-"+n.name, on, tolerate(daemonSetTolerations[0])))
	}
	return sc
}

// Spread with taints and node affinity policies, and minDomains: zones a,
// b, c of one node each, b's tainted NoSchedule. nodeTaintsPolicy Honor
// leaves b out; Ignore (the default) counts it, empty, so a and c take
// one each. nodeAffinityPolicy Ignore counts zones the pod's affinity
// rules out. minDomains above the domains there are makes the fewest 0.
func spreadTaintScenario() *scenario {
	honor, ignore := corev1.NodeInclusionPolicyHonor, corev1.NodeInclusionPolicyIgnore
	zone := func(name string, taints ...corev1.Taint) diffNode {
		return diffNode{name: name, alloc: map[string]string{"cpu": "8"}, labels: map[string]string{"st-zone": name}, taints: taints}
	}
	sc := &scenario{name: "spread-taints", nodes: []diffNode{zone("a"), zone("b", corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}), zone("c")}}
	inA := withNodeAffinity(corev1.NodeSelectorRequirement{Key: "st-zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}, false)
	four := int32(4)
	sc.pods = append(sc.pods, replicas("taints-honor", 4, 0, withLabels("app", "honor"), withSpread("st-zone", 1, func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &honor }))...)
	sc.pods = append(sc.pods, replicas("taints-ignore", 4, 0, withLabels("app", "ignore"), withSpread("st-zone", 1, nil))...)
	sc.pods = append(sc.pods, replicas("affinity-honor", 3, 0, withLabels("app", "aff-honor"), inA,
		withSpread("st-zone", 1, func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy = &honor }))...)
	sc.pods = append(sc.pods, replicas("affinity-ignore", 3, 0, withLabels("app", "aff-ignore"), inA,
		withSpread("st-zone", 1, func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy, c.NodeAffinityPolicy = &honor, &ignore }))...)
	sc.pods = append(sc.pods, replicas("min-domains", 4, 0, withLabels("app", "md"),
		withSpread("st-zone", 1, func(c *corev1.TopologySpreadConstraint) { c.NodeTaintsPolicy, c.MinDomains = &honor, &four }))...)
	return sc
}

// Affinity across namespaces: to a pod of another namespace by the
// namespaces list, by namespaceSelector, by the empty one (every
// namespace), by the wrong list; anti-affinity across namespaces, both
// the pod's own and an existing pod's (symmetric).
func crossNamespaceScenario() *scenario {
	sc := &scenario{name: "cross-namespace", namespaces: []string{"other", "third"}, nodes: []diffNode{kindNode("a"), kindNode("b"), kindNode("c")}}
	db := term(corev1.LabelHostname, "app", "db")
	listed := func(t corev1.PodAffinityTerm, ns ...string) corev1.PodAffinityTerm { t.Namespaces = ns; return t }
	selected := func(t corev1.PodAffinityTerm, kv ...string) corev1.PodAffinityTerm {
		t.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			t.NamespaceSelector.MatchLabels[kv[i]] = kv[i+1]
		}
		return t
	}
	sc.pods = []diffPod{
		single(0, "db", inNS("other"), withLabels("app", "db"), onKind("c")),
		single(0, "guard", inNS("other"), onKind("a"), withAnti(selected(term(corev1.LabelHostname, "app", "front")))),
		single(1, "same-namespace", withAffinity(db)),
		single(1, "listed", withAffinity(listed(db, "other"))),
		single(1, "by-selector", withAffinity(selected(db, diffNSLabel, "other"))),
		single(1, "every-namespace", withAffinity(selected(db))),
		single(1, "wrong-namespace", withAffinity(listed(db, "third"))),
		single(1, "from-third", inNS("third"), withAffinity(listed(db, "other"))),
		single(1, "away-listed", withAnti(listed(db, "other"))),
		single(1, "away-everywhere", withAnti(selected(db))),
		single(1, "front-on-a", withLabels("app", "front"), onKind("a")),
		single(1, "front-on-b", withLabels("app", "front"), onKind("b")),
	}
	return sc
}

// Preemption: a low pod fills each node. On a, a pod of a higher
// priority whose preemptionPolicy is Never waits (and evicts nothing);
// then a pod of a priority between the two comes, may preempt, and
// evicts the low one. Who gets the freed node is an order: hetsched
// keeps it for the preemptor; kube-scheduler gives it to whichever of
// the two it tries first, most often the one of higher priority that
// could not preempt (its queue orders by priority, and a nomination
// holds nothing against a pod of higher priority), the preemptor when
// that one is in backoff. So the two form a group: one of them is bound.
// On b, a plain preemption.
func preemptionScenario() *scenario {
	sc := &scenario{name: "preemption", nodes: []diffNode{
		{name: "a", alloc: map[string]string{"cpu": "1"}, labels: map[string]string{diffKindLabel: "a"}},
		{name: "b", alloc: map[string]string{"cpu": "1"}, labels: map[string]string{diffKindLabel: "b"}}},
		classes: map[string]priorityDef{"low": {value: 100}, "high": {value: 1000}, "shy": {value: 2000, never: true}}}
	full := request("cpu", "1")
	class := func(c string) podOpt { return func(p *corev1.Pod) { p.Spec.PriorityClassName = c } }
	sc.pods = []diffPod{
		single(0, "victim-a", onKind("a"), full, class("low")),
		single(0, "victim-b", onKind("b"), full, class("low")),
		{pod: dpod("shy", onKind("a"), full, class("shy")), phase: 1, group: "freed-a"},
		{pod: dpod("preemptor-a", onKind("a"), full, class("high")), phase: 2, group: "freed-a"},
		single(2, "preemptor-b", onKind("b"), full, class("high")),
	}
	return sc
}

// Preemption for a constraint rather than a resource: the only node's
// low pod holds host port 8080, carries the label a high pod's required
// anti-affinity refuses, or has required anti-affinity against the high
// pod's label. Both evict it: its preemption's what-if frees the port
// and lifts the conflict.
func preemptionConstraintsScenario() *scenario {
	sc := &scenario{name: "preemption-constraints", nodes: []diffNode{kindNode("port"), kindNode("anti"), kindNode("sym")},
		classes: map[string]priorityDef{"low": {value: 100}, "high": {value: 1000}}}
	class := func(c string) podOpt { return func(p *corev1.Pod) { p.Spec.PriorityClassName = c } }
	sc.pods = []diffPod{
		single(0, "port-low", onKind("port"), class("low"), withHostPort(8080, corev1.ProtocolTCP, "")),
		single(0, "anti-low", onKind("anti"), class("low"), withLabels("app", "noisy")),
		single(1, "port-high", onKind("port"), class("high"), withHostPort(8080, corev1.ProtocolTCP, "")),
		single(1, "anti-high", onKind("anti"), class("high"), withAnti(term(corev1.LabelHostname, "app", "noisy"))),
		single(0, "sym-low", onKind("sym"), class("low"), withAnti(term(corev1.LabelHostname, "app", "quiet"))),
		single(1, "sym-high", onKind("sym"), class("high"), withLabels("app", "quiet")),
	}
	return sc
}

// Resources as NodeResourcesFit counts them, one node per kind so the
// groups do not compete: hugepages, an extended resource, the pod count,
// an init container's peak, a sidecar's addition.
func resourcesScenario() *scenario {
	sc := &scenario{name: "resources", nodes: []diffNode{
		{name: "huge", alloc: map[string]string{"hugepages-2Mi": "1Gi"}, labels: map[string]string{diffKindLabel: "huge"}},
		{name: "ext", alloc: map[string]string{"example.com/foo": "3"}, labels: map[string]string{diffKindLabel: "ext"}},
		{name: "few", alloc: map[string]string{"pods": "2"}, labels: map[string]string{diffKindLabel: "few"}},
		{name: "init", alloc: map[string]string{"cpu": "2"}, labels: map[string]string{diffKindLabel: "init"}},
		{name: "sidecar", alloc: map[string]string{"cpu": "2"}, labels: map[string]string{diffKindLabel: "sidecar"}},
	}}
	always := corev1.ContainerRestartPolicyAlways
	initC := func(cpu string, restart *corev1.ContainerRestartPolicy) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.InitContainers = append(p.Spec.InitContainers, corev1.Container{Name: "init", Image: "busybox", RestartPolicy: restart,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse(cpu)}}})
		}
	}
	sc.pods = append(sc.pods, replicas("hugepages", 3, 0, onKind("huge"), request("hugepages-2Mi", "512Mi"))...)
	sc.pods = append(sc.pods, replicas("extended", 4, 0, onKind("ext"), request("example.com/foo", "1"))...)
	sc.pods = append(sc.pods, replicas("pod-count", 3, 0, onKind("few"))...)
	sc.pods = append(sc.pods, replicas("init-peak", 3, 0, onKind("init"), initC("1500m", nil))...)
	sc.pods = append(sc.pods, replicas("sidecar", 3, 0, onKind("sidecar"), initC("600m", &always), request("cpu", "400m"))...)
	return sc
}

// Required node affinity's operators and terms: Gt, Lt, NotIn and
// DoesNotExist (which a node without the label passes), terms ORed,
// requirements of a term ANDed, matchFields with an expression.
func nodeAffinityScenario() *scenario {
	sc := &scenario{name: "node-affinity"}
	for i := 1; i <= 4; i++ {
		sc.nodes = append(sc.nodes, diffNode{name: fmt.Sprintf("r%d", i), labels: map[string]string{"rank": fmt.Sprint(i)}})
	}
	sc.nodes = append(sc.nodes, diffNode{name: "norank", labels: map[string]string{"gpu": "yes"}})
	req := func(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
		return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
	}
	na := func(r corev1.NodeSelectorRequirement) podOpt { return withNodeAffinity(r, false) }
	orTerms := func(terms ...corev1.NodeSelectorRequirement) podOpt {
		return func(p *corev1.Pod) {
			ns := &corev1.NodeSelector{}
			for _, t := range terms {
				ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{t}})
			}
			affinityOf(p).NodeAffinity = &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: ns}
		}
	}
	sc.pods = []diffPod{
		single(0, "gt-3", na(req("rank", corev1.NodeSelectorOpGt, "3"))),
		single(0, "gt-4", na(req("rank", corev1.NodeSelectorOpGt, "4"))),
		single(0, "lt-2", na(req("rank", corev1.NodeSelectorOpLt, "2"))),
		single(0, "lt-1", na(req("rank", corev1.NodeSelectorOpLt, "1"))),
		single(0, "notin-all", na(req("rank", corev1.NodeSelectorOpNotIn, "1", "2", "3", "4"))),
		single(0, "notin-all-but-gpu", na(req("rank", corev1.NodeSelectorOpNotIn, "1", "2", "3", "4")), na(req("gpu", corev1.NodeSelectorOpDoesNotExist))),
		single(0, "does-not-exist", na(req("rank", corev1.NodeSelectorOpDoesNotExist))),
		single(0, "exists-and-in", na(req("rank", corev1.NodeSelectorOpExists)), na(req("rank", corev1.NodeSelectorOpIn, "2", "9"))),
		single(0, "or-terms", orTerms(req("rank", corev1.NodeSelectorOpIn, "9"), req("gpu", corev1.NodeSelectorOpExists))),
		single(0, "or-terms-none", orTerms(req("rank", corev1.NodeSelectorOpIn, "9"), req("gpu", corev1.NodeSelectorOpIn, "no"))),
		single(0, "field-and-label", withNodeAffinity(req("metadata.name", corev1.NodeSelectorOpIn, "r1"), true), na(req("rank", corev1.NodeSelectorOpIn, "2"))),
		single(0, "field-not-in", withNodeAffinity(req("metadata.name", corev1.NodeSelectorOpNotIn, "r1"), true), na(req("rank", corev1.NodeSelectorOpLt, "3"))),
		single(0, "selector-and-affinity", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"rank": "1"} }, na(req("rank", corev1.NodeSelectorOpGt, "1"))),
	}
	return sc
}

// A node of 100 labels and one of 40 taints (issue 40 §1.7): a selector
// on the 90th label, DoesNotExist on the 80th, and tolerations of 32 of
// the 40 taints or all of them.
func manyLabelsScenario() *scenario {
	labels := map[string]string{diffKindLabel: "labels"}
	for i := range 100 {
		labels[fmt.Sprintf("feature.example.com/l%02d", i)] = "true"
	}
	var taints []corev1.Taint
	var tols []corev1.Toleration
	for i := range 40 {
		k := fmt.Sprintf("example.com/t%02d", i)
		taints = append(taints, corev1.Taint{Key: k, Value: "x", Effect: corev1.TaintEffectNoSchedule})
		tols = append(tols, corev1.Toleration{Key: k, Operator: corev1.TolerationOpEqual, Value: "x", Effect: corev1.TaintEffectNoSchedule})
	}
	sc := &scenario{name: "many-labels-taints", nodes: []diffNode{
		{name: "labels", labels: labels}, {name: "taints", labels: map[string]string{diffKindLabel: "taints"}, taints: taints}}}
	sel := func(k string) podOpt {
		return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{k: "true"} }
	}
	sc.pods = []diffPod{
		single(0, "selector-l90", sel("feature.example.com/l90")),
		single(0, "selector-l99-absent-value", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"feature.example.com/l99": "false"} }),
		single(0, "does-not-exist-l80", onKind("labels"), withNodeAffinity(corev1.NodeSelectorRequirement{Key: "feature.example.com/l80", Operator: corev1.NodeSelectorOpDoesNotExist}, false)),
		single(0, "not-in-l70", onKind("labels"), withNodeAffinity(corev1.NodeSelectorRequirement{Key: "feature.example.com/l70", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"true"}}, false)),
		single(0, "tolerates-32", onKind("taints"), tolerate(tols[:32]...)),
		single(0, "tolerates-39", onKind("taints"), tolerate(tols[1:]...)),
		single(0, "tolerates-40", onKind("taints"), tolerate(tols...)),
	}
	return sc
}

// matchLabelKeys and mismatchLabelKeys: a spread counting only the pods
// of the pod's own revision, affinity to the database of the pod's own
// shard, and anti-affinity keeping tenants off each other's nodes.
func labelKeysScenario() *scenario {
	zoned := func(name, zone string) diffNode {
		return diffNode{name: name, labels: map[string]string{"zone": zone, diffKindLabel: name}}
	}
	sc := &scenario{name: "label-keys", nodes: []diffNode{zoned("a", "z1"), zoned("b", "z2")}}
	rev2 := func(c *corev1.TopologySpreadConstraint) { c.MatchLabelKeys = []string{"rev"} }
	shardTerm := term(corev1.LabelHostname, "app", "db")
	shardTerm.MatchLabelKeys = []string{"shard"}
	tenantTerm := corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, MismatchLabelKeys: []string{"tenant"},
		LabelSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: metav1.LabelSelectorOpExists}}}}
	sc.pods = append(sc.pods, replicas("web-rev1", 3, 0, withLabels("app", "web", "rev", "1"), onKind("a"))...)
	sc.pods = append(sc.pods,
		single(0, "db-shard1", withLabels("app", "db", "shard", "1"), onKind("a")),
		single(0, "db-shard2", withLabels("app", "db", "shard", "2"), onKind("b")),
		single(0, "tenant-x", withLabels("tenant", "x"), onKind("a"), withAnti(tenantTerm)),
		single(1, "client-shard2", withLabels("shard", "2"), withAffinity(shardTerm)),
		single(1, "tenant-y", withLabels("tenant", "y"), withAnti(tenantTerm)),
		single(1, "tenant-x-too", withLabels("tenant", "x"), onKind("a"), withAnti(tenantTerm)),
		single(2, "tenant-z", withLabels("tenant", "z"), withAnti(tenantTerm)))
	sc.pods = append(sc.pods, replicas("web-rev2", 2, 1, withLabels("app", "web", "rev", "2"), withSpread("zone", 1, rev2))...)
	return sc
}

// Preferences on two empty, equal nodes, where kube-scheduler's other
// scores tie: the node without a PreferNoSchedule taint, the node of the
// heavier preferred node affinity term, the node of a pod the preferred
// pod affinity names (over the emptier one), away from the pod preferred
// anti-affinity names. Both must choose the same node.
func preferencesScenario() *scenario {
	kind := func(name, kind string, labels map[string]string, taints ...corev1.Taint) diffNode {
		l := map[string]string{diffKindLabel: kind}
		maps.Copy(l, labels)
		return diffNode{name: name, labels: l, taints: taints}
	}
	sc := &scenario{name: "preferences", nodes: []diffNode{
		kind("tainted", "taint", nil, corev1.Taint{Key: "maint", Effect: corev1.TaintEffectPreferNoSchedule}), kind("clean", "taint", nil),
		kind("ssd", "disk", map[string]string{"disk": "ssd"}), kind("hdd", "disk", map[string]string{"disk": "hdd"}),
		kind("busy", "pods", nil), kind("idle", "pods", nil),
	}}
	prefer := func(weight int32, key, value string) corev1.PreferredSchedulingTerm {
		return corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}}}}
	}
	weighted := func(p *corev1.Pod) {
		affinityOf(p).NodeAffinity = &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{prefer(10, "disk", "hdd"), prefer(50, "disk", "ssd")}}
	}
	near := func(anti bool) podOpt {
		return func(p *corev1.Pod) {
			wt := []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: term(corev1.LabelHostname, "app", "noisy")}}
			if anti {
				affinityOf(p).PodAntiAffinity = &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: wt}
			} else {
				affinityOf(p).PodAffinity = &corev1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: wt}
			}
		}
	}
	sc.pods = []diffPod{
		{pod: dpod("avoids-prefer-no-schedule", onKind("taint")), same: true},
		{pod: dpod("heavier-preference", onKind("disk"), weighted), same: true},
		single(0, "noisy", withLabels("app", "noisy"), withNodeAffinity(corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"busy"}}, true)),
		{pod: dpod("near-noisy", onKind("pods"), near(false)), phase: 1, same: true},
		{pod: dpod("away-from-noisy", onKind("pods"), near(true)), phase: 2, same: true},
	}
	return sc
}

// Pods another scheduler placed (spec.nodeName set at creation), one
// with a hugepages request, and a bound pod resized in place to a larger
// request (issue 40 §1.8): each counts with its full request, so the
// one-cpu pods that come after find one cpu free on each node.
func foreignPodsScenario() *scenario {
	sc := &scenario{name: "foreign-pods", nodes: []diffNode{
		{name: "a", alloc: map[string]string{"hugepages-2Mi": "1Gi"}}, {name: "b"}, {name: "c", labels: map[string]string{diffKindLabel: "c"}}}}
	bound := func(node string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = node } }
	sc.pods = []diffPod{
		single(0, "foreign-hugepages", bound("a"), request("cpu", "3"), request("hugepages-2Mi", "512Mi"), request("memory", "1Gi")),
		single(0, "foreign", bound("b"), request("cpu", "3")),
		single(0, "resized", onKind("c"), request("cpu", "1")),
	}
	sc.pods = append(sc.pods, replicas("one-cpu", 5, 1, request("cpu", "1"))...)
	sc.after = map[int]func(*diffEnv, *diffCopy) error{0: func(d *diffEnv, cp *diffCopy) error {
		// KWOK's kubelet reports no container resources, without which the
		// API server refuses a resize: reported as a kubelet would.
		pods := d.cs.CoreV1().Pods(cp.namespace(""))
		if err := d.waitRunning(pods, "resized"); err != nil {
			return err
		}
		status := []byte(`{"status":{"containerStatuses":[{"name":"c","resources":{"requests":{"cpu":"1","memory":"64Mi"}}}]}}`)
		if _, err := pods.Patch(d.ctx, "resized", types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
			return err
		}
		resize := []byte(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"3"}}}]}}`)
		_, err := pods.Patch(d.ctx, "resized", types.StrategicMergePatchType, resize, metav1.PatchOptions{}, "resize")
		return err
	}}
	return sc
}

// waitRunning waits until KWOK reports the pod's container running.
func (d *diffEnv) waitRunning(pods typedcorev1.PodInterface, name string) error {
	return kubetest.WaitFor(d.ctx, time.Minute, func() (bool, string, error) {
		p, err := pods.Get(d.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Running != nil {
				return true, "", nil
			}
		}
		return false, fmt.Sprint(p.Status.ContainerStatuses), nil
	})
}

// Anti-affinity inside a gang: a gang of three pods (hetsched.io/gang,
// which kube-scheduler does not read) with required anti-affinity by
// hostname among themselves, on three nodes: placed in one pass, its
// members see each other (one per node), as kube-scheduler's one by one.
// A pod outside the gang with the same label waits in either copy.
func gangAntiAffinityScenario() *scenario {
	sc := &scenario{name: "gang-anti-affinity", nodes: []diffNode{kindNode("a"), kindNode("b"), kindNode("c")}}
	gang := func(p *corev1.Pod) {
		p.Annotations = map[string]string{kube.AnnotationGang: "train", kube.AnnotationGangMinMember: "3"}
	}
	sc.pods = append(replicas("train", 3, 0, gang, withLabels("app", "train"), withAnti(term(corev1.LabelHostname, "app", "train"))),
		single(1, "after", withLabels("app", "train")))
	return sc
}
