package kube

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/api"
)

// A pod's placement constraints as the task's (api.Task's HostPorts,
// Affinity, AntiAffinity, Spread, PreferredNodeAffinity), with the
// meaning kube-scheduler v1.36's NodePorts, InterPodAffinity,
// PodTopologySpread and NodeAffinity plugins give them. A task's labels
// are its pod's labels and its namespace (metaNamespace), so that a
// term's namespaces become one more requirement of its selector. What
// cannot be expressed is refused with the field's path.

// namespaceResolver lists the namespaces a namespaceSelector selects
// (nil: none is known, and a non-empty selector is refused).
type namespaceResolver func(sel *metav1.LabelSelector) ([]string, error)

// podConstraints sets t's placement constraints from pod's.
func (pt podTranslator) podConstraints(pod *corev1.Pod, t *api.Task) error {
	t.HostPorts = podHostPorts(pod)
	aff := pod.Spec.Affinity
	if aff != nil && aff.PodAffinity != nil {
		var err error
		if t.Affinity, err = pt.affinityTerms(pod, "affinity.podAffinity", aff.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			aff.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution, false); err != nil {
			return err
		}
	}
	if aff != nil && aff.PodAntiAffinity != nil {
		var err error
		if t.AntiAffinity, err = pt.affinityTerms(pod, "affinity.podAntiAffinity", aff.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
			aff.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution, true); err != nil {
			return err
		}
	}
	if aff != nil && aff.NodeAffinity != nil {
		var err error
		if t.PreferredNodeAffinity, err = preferredNodeAffinity(aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return err
		}
	}
	spread, err := podSpread(pod, "topologySpreadConstraints", pod.Spec.TopologySpreadConstraints)
	if err != nil {
		return err
	}
	if d := pt.defaults.constraints(pod); len(d) > 0 {
		// The path names what the selector came from.
		if spread, err = podSpread(pod, "the cluster's default topology spread (the pod's Services and controller)", d); err != nil {
			return err
		}
	}
	t.Spread = spread
	return nil
}

// podHostPorts are the host ports of the pod's containers and of its
// sidecars (restartable init containers), as kube-scheduler's NodePorts
// reads them.
func podHostPorts(pod *corev1.Pod) []api.HostPort {
	var out []api.HostPort
	add := func(c *corev1.Container) {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				out = append(out, api.HostPort{Port: p.HostPort, Protocol: string(p.Protocol), HostIP: p.HostIP})
			}
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i])
	}
	return out
}

// affinityTerms translates a pod (anti-)affinity's required and preferred
// terms. A term whose labelSelector is null selects no pod: an
// anti-affinity one constrains nothing and is left out; a required
// affinity one can never be satisfied, and is refused saying so.
func (pt podTranslator) affinityTerms(pod *corev1.Pod, field string, req []corev1.PodAffinityTerm, pref []corev1.WeightedPodAffinityTerm, anti bool) ([]api.AffinityTerm, error) {
	var out []api.AffinityTerm
	add := func(f string, term *corev1.PodAffinityTerm, required bool, weight int32) error {
		if term.LabelSelector == nil {
			if required && !anti {
				return fmt.Errorf("%s.labelSelector: null selects no pod, so no node satisfies the term (kube-scheduler leaves such a pod pending too)", f)
			}
			return nil
		}
		sel, err := pt.termSelector(pod, f, term)
		if err != nil {
			return err
		}
		out = append(out, api.AffinityTerm{TaskSelector: sel, TopologyKey: term.TopologyKey, Required: required, Weight: weight})
		return nil
	}
	for i := range req {
		if err := add(fmt.Sprintf("%s.requiredDuringSchedulingIgnoredDuringExecution[%d]", field, i), &req[i], true, 0); err != nil {
			return nil, err
		}
	}
	if !anti && len(out) > 1 {
		if err := allTermsSelector(field, out); err != nil {
			return nil, err
		}
	}
	for i := range pref {
		if err := add(fmt.Sprintf("%s.preferredDuringSchedulingIgnoredDuringExecution[%d].podAffinityTerm", field, i), &pref[i].PodAffinityTerm, false, pref[i].Weight); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// allTermsSelector gives each of a pod's required affinity terms the
// conjunction of all their selectors: kube-scheduler's InterPodAffinity
// counts, for every required term in its own topology domain, only the
// pods that match every term (a task's terms otherwise count their own
// matches each).
func allTermsSelector(field string, terms []api.AffinityTerm) error {
	var reqs []string
	for _, t := range terms {
		for _, k := range slices.Sorted(maps.Keys(t.Selector)) {
			reqs = append(reqs, k+" in ("+t.Selector[k]+")")
		}
		reqs = append(reqs, splitRequirements(t.Match)...)
	}
	slices.Sort(reqs)
	all := api.TaskSelector{Match: strings.Join(slices.Compact(reqs), ", ")}
	if _, err := api.ParseSelector(all.Match); err != nil {
		return fmt.Errorf("%s.requiredDuringSchedulingIgnoredDuringExecution: the terms together: %v", field, err)
	}
	for i := range terms {
		terms[i].TaskSelector = all
	}
	return nil
}

// splitRequirements splits a selector at its top-level commas (those
// outside a value list's parentheses) into its requirements.
func splitRequirements(sel string) []string {
	var out []string
	depth, start := 0, 0
	for i := 0; i < len(sel); i++ {
		switch sel[i] {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, strings.TrimSpace(sel[start:i]))
				start = i + 1
			}
		}
	}
	if r := strings.TrimSpace(sel[start:]); r != "" {
		out = append(out, r)
	}
	return out
}

// termSelector is a pod affinity term's selector over tasks: its label
// selector, matchLabelKeys (key in the pod's own value) and
// mismatchLabelKeys (key notin it), and its namespaces (namespaces and
// namespaceSelector, the pod's own when neither is given; an empty
// namespaceSelector is every namespace).
func (pt podTranslator) termSelector(pod *corev1.Pod, f string, term *corev1.PodAffinityTerm) (api.TaskSelector, error) {
	sel, err := taskSelector(f+".labelSelector", term.LabelSelector)
	if err != nil {
		return sel, err
	}
	var reqs []string
	if sel.Match != "" {
		reqs = append(reqs, sel.Match)
	}
	for _, k := range term.MatchLabelKeys {
		if v, ok := pod.Labels[k]; ok {
			reqs = append(reqs, k+" in ("+v+")")
		}
	}
	for _, k := range term.MismatchLabelKeys {
		if v, ok := pod.Labels[k]; ok {
			reqs = append(reqs, k+" notin ("+v+")")
		}
	}
	namespaces := slices.Clone(term.Namespaces)
	all := false
	switch ns := term.NamespaceSelector; {
	case ns == nil:
		if len(namespaces) == 0 {
			namespaces = []string{pod.Namespace}
		}
	case len(ns.MatchLabels) == 0 && len(ns.MatchExpressions) == 0:
		all = true
	case pt.namespaces == nil:
		return sel, fmt.Errorf("%s.namespaceSelector: namespaces are not watched", f)
	default:
		more, err := pt.namespaces(ns)
		if err != nil {
			return sel, fmt.Errorf("%s.namespaceSelector: %v", f, err)
		}
		namespaces = append(namespaces, more...)
		if len(namespaces) == 0 {
			namespaces = []string{""} // no namespace is selected: no pod matches
		}
	}
	if !all {
		slices.Sort(namespaces)
		reqs = append(reqs, metaNamespace+" in ("+strings.Join(slices.Compact(namespaces), ",")+")")
	}
	sel.Match = strings.Join(reqs, ", ")
	if _, err := api.ParseSelector(sel.Match); err != nil {
		return sel, fmt.Errorf("%s: %v", f, err)
	}
	return sel, nil
}

// taskSelector is a label selector as a task selector: matchLabels as
// equalities, matchExpressions in selector syntax.
func taskSelector(f string, ls *metav1.LabelSelector) (api.TaskSelector, error) {
	out := api.TaskSelector{Selector: ls.MatchLabels}
	var reqs []string
	for i, e := range ls.MatchExpressions {
		for _, v := range e.Values {
			if strings.ContainsAny(v, ",()") {
				return out, fmt.Errorf("%s.matchExpressions[%d]: value %q holds a character a selector cannot carry", f, i, v)
			}
		}
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			reqs = append(reqs, e.Key+" in ("+strings.Join(e.Values, ",")+")")
		case metav1.LabelSelectorOpNotIn:
			reqs = append(reqs, e.Key+" notin ("+strings.Join(e.Values, ",")+")")
		case metav1.LabelSelectorOpExists:
			reqs = append(reqs, e.Key)
		case metav1.LabelSelectorOpDoesNotExist:
			reqs = append(reqs, "!"+e.Key)
		default:
			return out, fmt.Errorf("%s.matchExpressions[%d].operator: %q is not In, NotIn, Exists or DoesNotExist", f, i, e.Operator)
		}
	}
	out.Match = strings.Join(reqs, ", ")
	return out, nil
}

// podSpread translates topologySpreadConstraints cs (the pod's, at path,
// or the cluster's defaults). A constraint counts the pods of the pod's
// namespace its selector (and matchLabelKeys, with the pod's values)
// matches; a null selector matches none.
func podSpread(pod *corev1.Pod, path string, cs []corev1.TopologySpreadConstraint) ([]api.Spread, error) {
	var out []api.Spread
	for i := range cs {
		c := &cs[i]
		f := fmt.Sprintf("%s[%d]", path, i)
		s := api.Spread{TopologyKey: c.TopologyKey, MaxSkew: c.MaxSkew}
		var reqs []string
		if c.LabelSelector == nil {
			reqs = append(reqs, "!"+metaNamespace) // every pod's task has one: none matches
		} else {
			sel, err := taskSelector(f+".labelSelector", c.LabelSelector)
			if err != nil {
				return nil, err
			}
			s.Selector = sel.Selector
			if sel.Match != "" {
				reqs = append(reqs, sel.Match)
			}
		}
		for _, k := range c.MatchLabelKeys {
			if v, ok := pod.Labels[k]; ok {
				reqs = append(reqs, k+" in ("+v+")")
			}
		}
		reqs = append(reqs, metaNamespace+" in ("+pod.Namespace+")")
		s.Match = strings.Join(reqs, ", ")
		switch c.WhenUnsatisfiable {
		case corev1.DoNotSchedule, "":
			s.WhenUnsatisfiable = api.SpreadWait
		case corev1.ScheduleAnyway:
			s.WhenUnsatisfiable = api.SpreadPlace
		default:
			return nil, fmt.Errorf("%s.whenUnsatisfiable: %q is not DoNotSchedule or ScheduleAnyway", f, c.WhenUnsatisfiable)
		}
		if c.MinDomains != nil && s.WhenUnsatisfiable == api.SpreadWait {
			s.MinDomains = *c.MinDomains
		}
		var err error
		if s.NodeAffinityPolicy, err = inclusionPolicy(f+".nodeAffinityPolicy", c.NodeAffinityPolicy, api.PolicyHonor); err != nil {
			return nil, err
		}
		if s.NodeTaintsPolicy, err = inclusionPolicy(f+".nodeTaintsPolicy", c.NodeTaintsPolicy, api.PolicyIgnore); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func inclusionPolicy(f string, p *corev1.NodeInclusionPolicy, def string) (string, error) {
	if p == nil {
		return def, nil
	}
	switch *p {
	case corev1.NodeInclusionPolicyHonor:
		return api.PolicyHonor, nil
	case corev1.NodeInclusionPolicyIgnore:
		return api.PolicyIgnore, nil
	}
	return "", fmt.Errorf("%s: %q is not Honor or Ignore", f, *p)
}

// preferredNodeAffinity translates preferred node affinity terms; a term
// with no requirement matches no node and is left out, as kube-scheduler
// scores it.
func preferredNodeAffinity(terms []corev1.PreferredSchedulingTerm) ([]api.NodePreference, error) {
	var out []api.NodePreference
	for i, term := range terms {
		f := fmt.Sprintf("affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d].preference", i)
		reqs, err := nodeTermRequirements(f, term.Preference)
		if err != nil {
			return nil, err
		}
		if len(reqs) == 0 || term.Weight == 0 {
			continue
		}
		out = append(out, api.NodePreference{Weight: term.Weight, Selector: strings.Join(reqs, ",")})
	}
	return out, nil
}
