package kube_test

// The legality of a copy's placements, checked against the final cluster
// state, with the meaning kube-scheduler v1.36's default filters give
// each constraint: NodeResourcesFit, NodePorts, NodeName/NodeAffinity,
// TaintToleration, NodeUnschedulable, InterPodAffinity and
// PodTopologySpread. Only the component-helpers kube-scheduler itself
// uses (the pod's request, the required node affinity) are borrowed; the
// rest is written out here, independently of hetsched.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// world is a copy's final state: its nodes, its bound pods, and every
// namespace's labels.
type world struct {
	nodes    map[string]*corev1.Node
	bound    []*corev1.Pod
	nsLabels map[string]labels.Set
	pvcs     map[string]*corev1.PersistentVolumeClaim // by namespace/name
	pvs      map[string]*corev1.PersistentVolume
	// attachLimits are the nodes' CSINode limits, by node and driver.
	attachLimits map[string]map[string]int64
}

// legality lists the copy's bound pods that break a constraint.
// violation is a broken constraint, on a node.
type violation struct{ node, msg string }

func (d *diffEnv) legality(cp *diffCopy) []violation {
	w := world{nodes: map[string]*corev1.Node{}, nsLabels: map[string]labels.Set{}}
	nl, err := d.cs.CoreV1().Nodes().List(d.ctx, metav1.ListOptions{LabelSelector: diffCopyLabel + "=" + cp.tag})
	if err != nil {
		d.t.Fatal(err)
	}
	for i := range nl.Items {
		w.nodes[nl.Items[i].Name] = &nl.Items[i]
	}
	pl, err := d.cs.CoreV1().Pods(metav1.NamespaceAll).List(d.ctx, metav1.ListOptions{LabelSelector: diffCopyLabel + "=" + cp.tag})
	if err != nil {
		d.t.Fatal(err)
	}
	for i := range pl.Items {
		if p := &pl.Items[i]; p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
			w.bound = append(w.bound, p)
		}
	}
	nsl, err := d.cs.CoreV1().Namespaces().List(d.ctx, metav1.ListOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	for _, ns := range nsl.Items {
		w.nsLabels[ns.Name] = labels.Set(ns.Labels)
	}
	w.pvcs, w.pvs = map[string]*corev1.PersistentVolumeClaim{}, map[string]*corev1.PersistentVolume{}
	cl, err := d.cs.CoreV1().PersistentVolumeClaims(metav1.NamespaceAll).List(d.ctx, metav1.ListOptions{LabelSelector: diffCopyLabel + "=" + cp.tag})
	if err != nil {
		d.t.Fatal(err)
	}
	for i := range cl.Items {
		w.pvcs[cl.Items[i].Namespace+"/"+cl.Items[i].Name] = &cl.Items[i]
	}
	vl, err := d.cs.CoreV1().PersistentVolumes().List(d.ctx, metav1.ListOptions{LabelSelector: diffCopyLabel + "=" + cp.tag})
	if err != nil {
		d.t.Fatal(err)
	}
	for i := range vl.Items {
		w.pvs[vl.Items[i].Name] = &vl.Items[i]
	}
	w.attachLimits = map[string]map[string]int64{}
	csl, err := d.cs.StorageV1().CSINodes().List(d.ctx, metav1.ListOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	for _, cn := range csl.Items {
		if w.nodes[cn.Name] == nil {
			continue
		}
		for _, dr := range cn.Spec.Drivers {
			if dr.Allocatable != nil && dr.Allocatable.Count != nil {
				if w.attachLimits[cn.Name] == nil {
					w.attachLimits[cn.Name] = map[string]int64{}
				}
				w.attachLimits[cn.Name][dr.Name] = int64(*dr.Allocatable.Count)
			}
		}
	}
	return w.violations()
}

func (w *world) violations() []violation {
	out := append(w.checkFit(), w.checkAttachLimits()...)
	users := map[string]string{} // claim -> a pod using it
	for _, p := range w.bound {
		n := w.nodes[p.Spec.NodeName]
		if n == nil {
			out = append(out, violation{p.Spec.NodeName, fmt.Sprintf("%s/%s is on %s, not a node of its copy", p.Namespace, p.Name, p.Spec.NodeName)})
			continue
		}
		for _, v := range append(w.checkPod(p, n), w.checkVolumes(p, n, users)...) {
			out = append(out, violation{n.Name, fmt.Sprintf("%s/%s on %s: %s", p.Namespace, p.Name, n.Name, v)})
		}
	}
	return out
}

// checkFit checks each node's allocatable against its pods' requests
// (and pod count), and their host ports against each other.
func (w *world) checkFit() []violation {
	var out []violation
	used := map[string]corev1.ResourceList{}
	count := map[string]int64{}
	ports := map[string][]hostPort{}
	for _, p := range w.bound {
		n := p.Spec.NodeName
		if used[n] == nil {
			used[n] = corev1.ResourceList{}
		}
		for r, q := range resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{}) {
			sum := used[n][r]
			sum.Add(q)
			used[n][r] = sum
		}
		count[n]++
		for _, hp := range podHostPortList(p) {
			for _, other := range ports[n] {
				if hp.conflicts(other) {
					out = append(out, violation{n, fmt.Sprintf("%s/%s and %s share host port %d/%s on %s", p.Namespace, p.Name, other.pod, hp.port, hp.proto, n)})
				}
			}
			ports[n] = append(ports[n], hp)
		}
	}
	for name, u := range used {
		node := w.nodes[name]
		if node == nil {
			continue
		}
		for r, q := range u {
			if alloc, ok := node.Status.Allocatable[r]; q.Sign() > 0 && (!ok || q.Cmp(alloc) > 0) {
				out = append(out, violation{name, fmt.Sprintf("%s's pods request %s %s, allocatable %s", name, q.String(), r, alloc.String())})
			}
		}
		if alloc := node.Status.Allocatable.Pods(); count[name] > alloc.Value() {
			out = append(out, violation{name, fmt.Sprintf("%s runs %d pods, allocatable %s", name, count[name], alloc.String())})
		}
	}
	return out
}

type hostPort struct {
	pod   string
	ip    string
	proto corev1.Protocol
	port  int32
}

// conflicts is NodePorts' rule: the same port and protocol, on the same
// address or either on every address.
func (a hostPort) conflicts(b hostPort) bool {
	wild := func(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }
	return a.port == b.port && a.proto == b.proto && (a.ip == b.ip || wild(a.ip) || wild(b.ip))
}

// podHostPortList is the host ports of the pod's containers and sidecars.
func podHostPortList(p *corev1.Pod) []hostPort {
	var out []hostPort
	add := func(c corev1.Container) {
		for _, cp := range c.Ports {
			if cp.HostPort > 0 {
				proto := cp.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPort{pod: p.Namespace + "/" + p.Name, ip: cp.HostIP, proto: proto, port: cp.HostPort})
			}
		}
	}
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for _, c := range p.Spec.Containers {
		add(c)
	}
	return out
}

// checkPod checks the pod's own constraints on its node n.
func (w *world) checkPod(p *corev1.Pod, n *corev1.Node) []string {
	var out []string
	if ok, err := nodeaffinity.GetRequiredNodeAffinity(p).Match(n); !ok || err != nil {
		out = append(out, fmt.Sprintf("node selector or required node affinity not met (%v)", err))
	}
	if t, ok := untolerated(p, n); ok {
		out = append(out, fmt.Sprintf("taint %s=%s:%s not tolerated", t.Key, t.Value, t.Effect))
	}
	if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for i, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			if other := w.inDomain(p, n, &term); other != "" {
				out = append(out, fmt.Sprintf("required anti-affinity [%d] (%s) broken by %s", i, term.TopologyKey, other))
			}
		}
	}
	if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil {
		out = append(out, w.checkAffinity(p, n, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution)...)
	}
	for i := range p.Spec.TopologySpreadConstraints {
		if c := &p.Spec.TopologySpreadConstraints[i]; c.WhenUnsatisfiable == corev1.DoNotSchedule {
			if v := w.checkSpread(p, n, c); v != "" {
				out = append(out, fmt.Sprintf("topologySpreadConstraints[%d] (%s): %s", i, c.TopologyKey, v))
			}
		}
	}
	return out
}

// tolerates is TaintToleration's match of one toleration and one taint
// (Lt and Gt are alpha in v1.36, off by default: they match nothing).
func tolerates(tol corev1.Toleration, t corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case "", corev1.TolerationOpEqual:
		return tol.Value == t.Value
	case corev1.TolerationOpExists:
		return true
	}
	return false
}

// untolerated is a NoSchedule or NoExecute taint of n the pod does not
// tolerate; a cordoned node counts as tainted
// node.kubernetes.io/unschedulable:NoSchedule (NodeUnschedulable).
func untolerated(p *corev1.Pod, n *corev1.Node) (corev1.Taint, bool) {
	taints := slices.Clone(n.Spec.Taints)
	if n.Spec.Unschedulable {
		taints = append(taints, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	for _, t := range taints {
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool { return tolerates(tol, t) }) {
			return t, true
		}
	}
	return corev1.Taint{}, false
}

// termMatches reports whether other is a pod the term of p selects: in
// one of its namespaces, matching its selector (with matchLabelKeys and
// mismatchLabelKeys). A null selector selects no pod.
func (w *world) termMatches(p *corev1.Pod, term *corev1.PodAffinityTerm, other *corev1.Pod) bool {
	if term.LabelSelector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
	if err != nil {
		return false
	}
	for _, k := range term.MatchLabelKeys {
		if v, ok := p.Labels[k]; ok {
			r, _ := labels.NewRequirement(k, "in", []string{v})
			sel = sel.Add(*r)
		}
	}
	for _, k := range term.MismatchLabelKeys {
		if v, ok := p.Labels[k]; ok {
			r, _ := labels.NewRequirement(k, "notin", []string{v})
			sel = sel.Add(*r)
		}
	}
	if !sel.Matches(labels.Set(other.Labels)) {
		return false
	}
	if slices.Contains(term.Namespaces, other.Namespace) {
		return true
	}
	if term.NamespaceSelector == nil {
		return len(term.Namespaces) == 0 && other.Namespace == p.Namespace
	}
	nsSel, err := metav1.LabelSelectorAsSelector(term.NamespaceSelector)
	return err == nil && nsSel.Matches(w.nsLabels[other.Namespace])
}

// sameDomain reports whether nodes a and b both have key, with one value.
func sameDomain(a, b *corev1.Node, key string) bool {
	va, oka := a.Labels[key]
	vb, okb := b.Labels[key]
	return oka && okb && va == vb
}

// inDomain names a pod other than p that term selects, bound in n's
// domain of the term's key ("" when there is none).
func (w *world) inDomain(p *corev1.Pod, n *corev1.Node, term *corev1.PodAffinityTerm) string {
	for _, o := range w.bound {
		if o.UID == p.UID || !w.termMatches(p, term, o) {
			continue
		}
		if on := w.nodes[o.Spec.NodeName]; on != nil && sameDomain(n, on, term.TopologyKey) {
			return o.Namespace + "/" + o.Name + " on " + on.Name
		}
	}
	return ""
}

// checkAffinity checks required affinity as InterPodAffinity does: n has
// every term's key, and either each term has, in n's domain of its key,
// a pod that matches every term, or (the first pod of a series) no other
// bound pod matches every term and p matches them all itself.
func (w *world) checkAffinity(p *corev1.Pod, n *corev1.Node, terms []corev1.PodAffinityTerm) []string {
	var out, unmet []string
	all := func(o *corev1.Pod) bool {
		return !slices.ContainsFunc(terms, func(t corev1.PodAffinityTerm) bool { return !w.termMatches(p, &t, o) })
	}
	for i := range terms {
		if _, ok := n.Labels[terms[i].TopologyKey]; !ok {
			out = append(out, fmt.Sprintf("required affinity [%d]: the node has no %s", i, terms[i].TopologyKey))
			continue
		}
		if !slices.ContainsFunc(w.bound, func(o *corev1.Pod) bool {
			on := w.nodes[o.Spec.NodeName]
			return o.UID != p.UID && on != nil && sameDomain(n, on, terms[i].TopologyKey) && all(o)
		}) {
			unmet = append(unmet, fmt.Sprintf("required affinity [%d] (%s): no matching pod in the node's domain (one must match every term)", i, terms[i].TopologyKey))
		}
	}
	if len(unmet) == 0 {
		return out
	}
	if !all(p) || slices.ContainsFunc(w.bound, func(o *corev1.Pod) bool { return o.UID != p.UID && all(o) }) {
		return append(out, unmet...) // not the first of a series
	}
	return out
}

// checkSpread checks one DoNotSchedule constraint of p on n as
// PodTopologySpread counts it: over the domains of the nodes that pass
// p's node affinity (nodeAffinityPolicy Honor, the default) and
// tolerate its taints (nodeTaintsPolicy Honor only) and have every
// constraint's key, the matching pods of p's namespace; n's count less
// the smallest (0 below minDomains domains) at most maxSkew.
func (w *world) checkSpread(p *corev1.Pod, n *corev1.Node, c *corev1.TopologySpreadConstraint) string {
	if _, ok := n.Labels[c.TopologyKey]; !ok {
		return "on a node without the key"
	}
	sel := labels.Nothing()
	if c.LabelSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return err.Error()
		}
		sel = s
	}
	for _, k := range c.MatchLabelKeys {
		if v, ok := p.Labels[k]; ok {
			r, _ := labels.NewRequirement(k, "in", []string{v})
			sel = sel.Add(*r)
		}
	}
	eligible := func(node *corev1.Node) bool {
		for _, cc := range p.Spec.TopologySpreadConstraints {
			if _, ok := node.Labels[cc.TopologyKey]; !ok {
				return false
			}
		}
		if c.NodeAffinityPolicy == nil || *c.NodeAffinityPolicy == corev1.NodeInclusionPolicyHonor {
			if ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(node); !ok {
				return false
			}
		}
		if c.NodeTaintsPolicy != nil && *c.NodeTaintsPolicy == corev1.NodeInclusionPolicyHonor {
			if _, bad := untolerated(p, node); bad {
				return false
			}
		}
		return true
	}
	counts := map[string]int{}
	for _, node := range w.nodes {
		if eligible(node) {
			counts[node.Labels[c.TopologyKey]] += 0
		}
	}
	for _, o := range w.bound {
		if on := w.nodes[o.Spec.NodeName]; on != nil && o.Namespace == p.Namespace && sel.Matches(labels.Set(o.Labels)) && eligible(on) {
			counts[on.Labels[c.TopologyKey]]++
		}
	}
	smallest := -1
	for _, v := range counts {
		if smallest < 0 || v < smallest {
			smallest = v
		}
	}
	if c.MinDomains != nil && len(counts) < int(*c.MinDomains) {
		smallest = 0
	}
	if got := counts[n.Labels[c.TopologyKey]]; got-smallest > int(c.MaxSkew) {
		return fmt.Sprintf("%d pods in %s=%s, the fewest in a domain %d: skew %d past %d (domains %v)", got, c.TopologyKey, n.Labels[c.TopologyKey], smallest, got-smallest, c.MaxSkew, counts)
	}
	return ""
}

// The legality checker finds each kind of violation, and none in a legal
// placement (no API server: a checker that finds nothing would make the
// differential test vacuous).
func TestLegalityCheckerFindsEachViolation(t *testing.T) {
	node := func(name string, cpu string, labels map[string]string, taints ...corev1.Taint) *corev1.Node {
		rl := corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse(cpu), corev1.ResourceMemory: k8sresource.MustParse("1Gi"), corev1.ResourcePods: k8sresource.MustParse("110")}
		l := map[string]string{corev1.LabelHostname: name}
		maps.Copy(l, labels)
		if z, ok := labels["zone"]; ok {
			l[corev1.LabelTopologyZone] = z
		}
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}, Spec: corev1.NodeSpec{Taints: taints}, Status: corev1.NodeStatus{Allocatable: rl}}
	}
	cordoned := node("nc", "4", nil)
	cordoned.Spec.Unschedulable = true
	nodes := map[string]*corev1.Node{"n1": node("n1", "1", map[string]string{"zone": "z1"}), "n2": node("n2", "4", map[string]string{"zone": "z1"}),
		"n3": node("n3", "4", map[string]string{"zone": "z2"}), "nx": node("nx", "4", nil), "nc": cordoned,
		"nt": node("nt", "4", nil, corev1.Taint{Key: "k", Value: "v", Effect: corev1.TaintEffectNoExecute})}
	on := func(n string, p *corev1.Pod) *corev1.Pod {
		p.Namespace, p.UID, p.Spec.NodeName = "ns", types.UID(p.Name), n
		return p
	}
	web := []podOpt{withLabels("app", "web"), withAnti(term(corev1.LabelHostname, "app", "web"))}
	zonal := []podOpt{withLabels("app", "zonal"), withAnti(term("zone", "app", "zonal"))}
	follow := withAffinity(term(corev1.LabelHostname, "app", "db"))
	spread := []podOpt{withLabels("app", "s"), withSpread("zone", 1, nil)}
	useClaim := func(name string) podOpt {
		return func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
		}
	}
	cases := []struct {
		name string
		pods []*corev1.Pod
		want string // "" for none
	}{
		{"cpu", []*corev1.Pod{on("n1", dpod("a", request("cpu", "600m"))), on("n1", dpod("b", request("cpu", "600m")))}, "request 1200m cpu"},
		{"host port", []*corev1.Pod{on("n2", dpod("a", withHostPort(80, "", ""))), on("n2", dpod("b", withHostPort(80, corev1.ProtocolTCP, "10.0.0.1")))}, "share host port 80/TCP"},
		{"host port of two protocols", []*corev1.Pod{on("n2", dpod("a", withHostPort(80, corev1.ProtocolUDP, ""))), on("n2", dpod("b", withHostPort(80, "", "")))}, ""},
		{"node selector", []*corev1.Pod{on("n1", dpod("a", func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{"zone": "z2"} }))}, "node selector"},
		{"taint", []*corev1.Pod{on("nt", dpod("a", tolerate(corev1.Toleration{Key: "k", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})))}, "taint k=v:NoExecute"},
		{"tolerated taint", []*corev1.Pod{on("nt", dpod("a", tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})))}, ""},
		{"cordon", []*corev1.Pod{on("nc", dpod("a"))}, "node.kubernetes.io/unschedulable"},
		{"anti-affinity", []*corev1.Pod{on("n2", dpod("a", web...)), on("n2", dpod("b", withLabels("app", "web")))}, "anti-affinity [0] (kubernetes.io/hostname) broken by ns/b"},
		{"anti-affinity by zone", []*corev1.Pod{on("n1", dpod("a", zonal...)), on("n2", dpod("b", zonal...))}, "anti-affinity [0] (zone)"},
		{"anti-affinity off the key", []*corev1.Pod{on("nx", dpod("a", zonal...)), on("nx", dpod("b", zonal...)), on("n1", dpod("c", zonal...))}, ""},
		{"affinity elsewhere", []*corev1.Pod{on("n2", dpod("a", follow)), on("n3", dpod("db", withLabels("app", "db")))}, "no matching pod in the node's domain"},
		{"affinity met", []*corev1.Pod{on("n3", dpod("a", follow)), on("n3", dpod("db", withLabels("app", "db")))}, ""},
		{"affinity off the key", []*corev1.Pod{on("nx", dpod("a", withAffinity(term("zone", "app", "db")))), on("n3", dpod("db", withLabels("app", "db")))}, "the node has no zone"},
		{"two terms met by two pods", []*corev1.Pod{on("n3", dpod("a", follow, withAffinity(term(corev1.LabelHostname, "tier", "x")))),
			on("n3", dpod("db", withLabels("app", "db"))), on("n3", dpod("t", withLabels("tier", "x")))}, "no matching pod in the node's domain"},
		{"two terms met by one pod", []*corev1.Pod{on("n3", dpod("a", follow, withAffinity(term("zone", "tier", "x")))),
			on("n3", dpod("db", withLabels("app", "db", "tier", "x")))}, ""},
		{"first of a series", []*corev1.Pod{on("n3", dpod("a", withLabels("app", "db"), follow))}, ""},
		{"series apart", []*corev1.Pod{on("n3", dpod("a", withLabels("app", "db"), follow)), on("n2", dpod("b", withLabels("app", "db"), follow))}, "no matching pod"},
		{"spread skew", []*corev1.Pod{on("n2", dpod("a", spread...)), on("n2", dpod("b", spread...)), on("n3", dpod("c", spread...)), on("n1", dpod("d", spread...))}, "skew 2 past 1"},
		{"spread off the key", []*corev1.Pod{on("nx", dpod("a", spread...))}, "on a node without the key"},
		{"spread kept", []*corev1.Pod{on("n2", dpod("a", spread...)), on("n3", dpod("b", spread...)), on("n1", dpod("c", spread...))}, ""},
		{"outside the copy", []*corev1.Pod{on("elsewhere", dpod("a"))}, "not a node of its copy"},
		{"volume elsewhere", []*corev1.Pod{on("n2", dpod("a", useClaim("on-n3")))}, "node affinity does not admit"},
		{"volume of another zone", []*corev1.Pod{on("n2", dpod("a", useClaim("in-z2")))}, "is in topology.kubernetes.io/zone=z2"},
		{"volume kept", []*corev1.Pod{on("n3", dpod("a", useClaim("on-n3"), useClaim("in-z2")))}, ""},
		{"unbound claim", []*corev1.Pod{on("n3", dpod("a", useClaim("unbound")))}, "missing or unbound"},
		{"attach limit", []*corev1.Pod{on("n3", dpod("a", useClaim("csi-1"))), on("n3", dpod("b", useClaim("csi-2")))}, "2 volumes of CSI driver d attached, past the CSINode's 1"},
		{"one volume attached once", []*corev1.Pod{on("n3", dpod("a", useClaim("csi-1"))), on("n3", dpod("b", useClaim("csi-1b")))}, ""},
		{"one pod per ReadWriteOncePod claim", []*corev1.Pod{on("n3", dpod("a", useClaim("rwop"))), on("n3", dpod("b", useClaim("rwop")))}, "used by a too"},
	}
	pv := func(name, host, zone string) *corev1.PersistentVolume {
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if host != "" {
			v.Spec.NodeAffinity = &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{host}}}}}}}
		}
		if zone != "" {
			v.Labels[corev1.LabelTopologyZone] = zone
		}
		return v
	}
	pvc := func(name, volume string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume, AccessModes: modes}}
	}
	csi := func(name string) *corev1.PersistentVolume {
		v := pv(name, "", "")
		v.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: name}
		return v
	}
	pvs := map[string]*corev1.PersistentVolume{"pv-n3": pv("pv-n3", "n3", ""), "pv-z2": pv("pv-z2", "", "z2"), "pv-any": pv("pv-any", "", ""),
		"csi-1": csi("csi-1"), "csi-2": csi("csi-2")}
	pvcs := map[string]*corev1.PersistentVolumeClaim{"ns/on-n3": pvc("on-n3", "pv-n3"), "ns/in-z2": pvc("in-z2", "pv-z2"),
		"ns/unbound": pvc("unbound", ""), "ns/rwop": pvc("rwop", "pv-any", corev1.ReadWriteOncePod),
		"ns/csi-1": pvc("csi-1", "csi-1"), "ns/csi-1b": pvc("csi-1b", "csi-1"), "ns/csi-2": pvc("csi-2", "csi-2")}
	for _, c := range cases {
		w := world{nodes: nodes, bound: c.pods, nsLabels: map[string]labels.Set{"ns": {}}, pvcs: pvcs, pvs: pvs,
			attachLimits: map[string]map[string]int64{"n3": {"d": 1}}}
		var msgs []string
		for _, v := range w.violations() {
			msgs = append(msgs, v.msg)
		}
		got := strings.Join(msgs, "; ")
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: violations %q, want %q", c.name, got, c.want)
		}
	}
}
