package kube_test

// What the differential test says about the copies: the pods either
// scheduler left waiting with both reasons, the counts per group, the
// differences, and a comparison of the reasons' constraint kinds.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// describeSilent names the pods (copy id:key) left without a word, with
// their spec and the events about them (ten at most).
func (d *diffEnv) describeSilent(open []string) string {
	var b strings.Builder
	for i, o := range open {
		if i == 10 {
			fmt.Fprintf(&b, "\n    (%d more)", len(open)-i)
			break
		}
		id, key, _ := strings.Cut(o, ":")
		cp := d.copies[0]
		if id == d.copies[1].id {
			cp = d.copies[1]
		}
		ns, name, _ := strings.Cut(key, "/")
		var evs []string
		if l, err := d.cs.EventsV1().Events(cp.namespace(ns)).List(d.ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + name}); err == nil {
			for _, ev := range l.Items {
				evs = append(evs, ev.Reason+": "+ev.Note)
			}
		}
		spec := ""
		for _, dp := range d.sc.pods {
			if dp.pod.Namespace == ns && dp.pod.Name == name {
				spec = podSummary(dp.pod)
			}
		}
		fmt.Fprintf(&b, "\n    %s (%s): events %q; spec %s", key, cp.who, evs, spec)
	}
	return b.String()
}

// logPending logs every pod left pending by either scheduler, with both
// reasons side by side.
func (d *diffEnv) logPending(states [2]copyStates) {
	var b strings.Builder
	for _, dp := range d.sc.pods {
		key := dp.pod.Namespace + "/" + dp.pod.Name
		k, h := states[0][key], states[1][key]
		if k.node == "" || h.node == "" {
			fmt.Fprintf(&b, "\n  %s\n    kube-scheduler: %s\n    hetsched:       %s", key, k, h)
		}
	}
	if len(d.sc.pods) <= 100 {
		if b.Len() > 0 {
			d.t.Logf("pods pending in either copy:%s", b.String())
		}
		return
	}
	// A big scenario: the counts per group, and a reason of each side
	// per group.
	type row struct {
		n       int
		bound   [2]int
		reasons [2]string
	}
	rows := map[string]*row{}
	for _, dp := range d.sc.pods {
		g := groupOf(dp)
		if rows[g] == nil {
			rows[g] = &row{}
		}
		rows[g].n++
		for c := range d.copies {
			st := states[c][dp.pod.Namespace+"/"+dp.pod.Name]
			if st.node != "" {
				rows[g].bound[c]++
			} else if rows[g].reasons[c] == "" {
				rows[g].reasons[c] = st.String()
			}
		}
	}
	b.Reset()
	for _, g := range sortedKeys(rows) {
		r := rows[g]
		fmt.Fprintf(&b, "\n  %-18s %4d pods: kube-scheduler bound %4d, hetsched %4d", g, r.n, r.bound[0], r.bound[1])
		for c, cp := range d.copies {
			if r.reasons[c] != "" {
				fmt.Fprintf(&b, "\n      %s, e.g.: %s", cp.who, r.reasons[c])
			}
		}
	}
	d.t.Logf("bound per group:%s", b.String())
}

// describeGroup says how the copies differ on a group: the counts, the
// spec, and its pods (those bound in one copy only first, ten at most).
func describeGroup(g string, pods []diffPod, states [2]copyStates, bound [2]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: kube-scheduler bound %d of %d, hetsched %d; spec %s", g, bound[0], len(pods), bound[1], podSummary(pods[0].pod))
	sorted := slices.Clone(pods)
	differs := func(dp diffPod) bool {
		key := dp.pod.Namespace + "/" + dp.pod.Name
		return (states[0][key].node == "") != (states[1][key].node == "")
	}
	slices.SortStableFunc(sorted, func(x, y diffPod) int {
		switch {
		case differs(x) && !differs(y):
			return -1
		case differs(y) && !differs(x):
			return 1
		}
		return 0
	})
	for i, dp := range sorted {
		if i == 10 {
			fmt.Fprintf(&b, "\n    (%d more)", len(sorted)-i)
			break
		}
		key := dp.pod.Namespace + "/" + dp.pod.Name
		fmt.Fprintf(&b, "\n    %s: kube-scheduler %s | hetsched %s", key, states[0][key], states[1][key])
	}
	return b.String()
}

// podSummary is the template's placement fields, as JSON.
func podSummary(p *corev1.Pod) string {
	s := struct {
		Labels       map[string]string                 `json:"labels,omitempty"`
		NodeSelector map[string]string                 `json:"nodeSelector,omitempty"`
		Affinity     *corev1.Affinity                  `json:"affinity,omitempty"`
		Tolerations  []corev1.Toleration               `json:"tolerations,omitempty"`
		Spread       []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
		Requests     []corev1.ResourceList             `json:"requests,omitempty"`
		Ports        [][]corev1.ContainerPort          `json:"ports,omitempty"`
		Priority     string                            `json:"priorityClassName,omitempty"`
		Policy       *corev1.PreemptionPolicy          `json:"preemptionPolicy,omitempty"`
	}{Labels: p.Labels, NodeSelector: p.Spec.NodeSelector, Affinity: p.Spec.Affinity, Tolerations: p.Spec.Tolerations,
		Spread: p.Spec.TopologySpreadConstraints, Priority: p.Spec.PriorityClassName, Policy: p.Spec.PreemptionPolicy}
	for _, c := range p.Spec.Containers {
		s.Requests = append(s.Requests, c.Resources.Requests)
		if len(c.Ports) > 0 {
			s.Ports = append(s.Ports, c.Ports)
		}
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// reasonKinds are the kinds of constraint a reason names, as each
// scheduler words them: those that both check after a pod's node
// selection, taints and resources, so that the other copy's nodes (which
// kube-scheduler counts under taints, hetsched under resources) do not
// blur them. Some of hetsched's words may stand for more than one kind
// (a node without a topology key, for affinity or spread).
var reasonKinds = []struct {
	kind, kube    string
	hetsched, may []string
}{
	{"host ports", "didn't have free ports", []string{"host port "}, nil},
	{"topology spread", "didn't match pod topology spread constraints", []string{"spread of "}, []string{"lacks topology key"}},
	{"pod affinity", "didn't match pod affinity rules", []string{"no affinity with", "null selects no pod"}, []string{"lacks topology key"}},
	{"pod anti-affinity", "anti-affinity rules", []string{"anti-affinity"}, nil},
}

// kinds lists the kinds of constraint a reason names: for hetsched's,
// those its words surely name, and those they may.
func kinds(reason string, kube bool) (sure, may []string) {
	reason, _, _ = strings.Cut(reason, "preemption:") // kube-scheduler's second part: its preemption attempt
	has := func(words []string) bool {
		return slices.ContainsFunc(words, func(w string) bool { return strings.Contains(reason, w) })
	}
	for _, k := range reasonKinds {
		switch {
		case kube && strings.Contains(reason, k.kube), !kube && has(k.hetsched):
			sure = append(sure, k.kind)
			may = append(may, k.kind)
		case !kube && has(k.may):
			may = append(may, k.kind)
		}
	}
	return sure, may
}

// compareReasons checks, for each pod both copies left waiting, that
// both reasons name the same kinds of constraint (reasonKinds).
func (d *diffEnv) compareReasons(states [2]copyStates, phase int) {
	var diffs []string
	for _, dp := range d.sc.pods {
		key := dp.pod.Namespace + "/" + dp.pod.Name
		k, h := states[0][key], states[1][key]
		if dp.phase > phase || k.node != "" || h.node != "" || k.gone || h.gone || k.reason == "" || h.reason == "" {
			continue
		}
		kk, _ := kinds(k.reason, true)
		hs, hm := kinds(h.reason, false)
		subset := func(a, b []string) bool {
			return !slices.ContainsFunc(a, func(x string) bool { return !slices.Contains(b, x) })
		}
		if !subset(kk, hm) || !subset(hs, kk) {
			diffs = append(diffs, fmt.Sprintf("%s: kube-scheduler names %v, hetsched %v\n      kube-scheduler: %s\n      hetsched: %s", key, kk, hm, k.reason, h.reason))
		}
	}
	if len(diffs) > 0 {
		d.divergence("reasons", fmt.Sprintf("after phase %d the reasons of %d pods name different constraints:\n    %s", phase, len(diffs), strings.Join(diffs[:min(len(diffs), 10)], "\n    ")))
	}
}
