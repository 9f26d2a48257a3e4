package kube

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// The annotations and labels hetsched reads on pods and writes on them.
const (
	// AnnotationDevices is written with the Binding: the devices the pod
	// holds, "nvidia.com/gpu=0,1;google.com/tpu=3" (formatDevices).
	AnnotationDevices = "hetsched.io/devices"
	// AnnotationPriority, 0 (urgent) to 3 (low), overrides the tier the
	// pod's priority maps to.
	AnnotationPriority = "hetsched.io/priority"
	// AnnotationPreemptible "false" keeps the pod from being preempted.
	AnnotationPreemptible = "hetsched.io/preemptible"
	// AnnotationGang names the pod's gang (within its namespace);
	// AnnotationGangMinMember how many of its pods must be placed
	// together (default: 1, which is no gang).
	AnnotationGang          = "hetsched.io/gang"
	AnnotationGangMinMember = "hetsched.io/gang-min-member"
	// AnnotationGangTimeout is how long a gang may wait for all its
	// members' placement, in seconds (PodGroup's scheduleTimeoutSeconds).
	AnnotationGangTimeout = "hetsched.io/gang-timeout-seconds"
	// LabelQueue puts the pod into a hetsched queue.
	LabelQueue = "hetsched.io/queue"
	// LabelPodGroup is scheduler-plugins' label naming a pod's PodGroup.
	LabelPodGroup = "scheduling.x-k8s.io/pod-group"
)

// Metadata keys of a pod's task.
const (
	metaNamespace = "kubernetes.io/namespace"
	metaPod       = "kubernetes.io/pod"
)

// PriorityTiers maps Kubernetes pod priorities to hetsched's four tiers:
// a priority of at least Urgent is tier 0, at least High tier 1, at least
// Medium tier 2, below it tier 3.
type PriorityTiers struct {
	Urgent, High, Medium int32
}

// DefaultPriorityTiers puts the system classes (system-cluster-critical is
// 2000000000) in tier 0, priorities from a million in tier 1, pods with no
// class (priority 0) in tier 2 and negative priorities in tier 3.
var DefaultPriorityTiers = PriorityTiers{Urgent: 1_000_000_000, High: 1_000_000, Medium: 0}

// ParsePriorityTiers reads "URGENT,HIGH,MEDIUM" (--priority-tiers).
func ParsePriorityTiers(s string) (PriorityTiers, error) {
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return PriorityTiers{}, fmt.Errorf("priority tiers %q: want three thresholds URGENT,HIGH,MEDIUM", s)
	}
	var v [3]int32
	for i, p := range parts {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
		if err != nil {
			return PriorityTiers{}, fmt.Errorf("priority tiers %q: %q is not a 32-bit integer", s, p)
		}
		v[i] = int32(n)
	}
	if v[0] < v[1] || v[1] < v[2] {
		return PriorityTiers{}, fmt.Errorf("priority tiers %q: thresholds must not increase (urgent >= high >= medium)", s)
	}
	return PriorityTiers{Urgent: v[0], High: v[1], Medium: v[2]}, nil
}

// Tier is the tier of a pod priority.
func (p PriorityTiers) Tier(prio int32) int {
	switch {
	case prio >= p.Urgent:
		return api.PriorityUrgent
	case prio >= p.High:
		return api.PriorityHigh
	case prio >= p.Medium:
		return api.PriorityMedium
	}
	return api.PriorityLow
}

// podTranslator turns pods into hetsched tasks.
type podTranslator struct {
	tiers PriorityTiers
	// classPriority looks a PriorityClass's value up, for a pod whose
	// spec.priority the API server did not fill in.
	classPriority func(name string) (int32, bool)
	// namespaces resolves namespaceSelectors (nil: refused).
	namespaces namespaceResolver
	// defaults gives pods the cluster's default topology spread (nil:
	// none, as kube-scheduler with defaultingType List and no
	// defaultConstraints).
	defaults *spreadDefaults
}

// task translates a pod into the task that stands for it. id is the
// task's id. The request is what kube-scheduler's fit check uses
// (component-helpers' PodRequests: containers, init containers and
// sidecars, overhead, pod-level resources) plus one PodsResource. An
// error names the pod field that hetsched cannot express; the pod then
// waits with that reason.
func (pt podTranslator) task(pod *corev1.Pod, id string) (api.Task, error) {
	if err := refusedFields(pod); err != nil {
		return api.Task{}, err
	}
	t := podTask(pod, id)
	t.Requeue = boolPtr(false) // a pod runs once; its controller makes another
	req, err := podRequest(pod)
	if err != nil {
		return api.Task{}, err
	}
	t.Resources = req
	prio, err := pt.priority(pod)
	if err != nil {
		return api.Task{}, err
	}
	t.Priority = &prio
	t.PriorityValue = pt.value(pod)
	if p := pod.Spec.PreemptionPolicy; p != nil {
		switch *p {
		case corev1.PreemptNever:
			t.PreemptionPolicy = api.PreemptNever
		case corev1.PreemptLowerPriority:
		default:
			return api.Task{}, fmt.Errorf("preemptionPolicy: %q is not Never or PreemptLowerPriority", *p)
		}
	}
	if v, ok := pod.Annotations[AnnotationPreemptible]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return api.Task{}, fmt.Errorf("annotation %s: %q is not true or false", AnnotationPreemptible, v)
		}
		t.Preemptible = &b
	}
	t.Queue = pod.Labels[LabelQueue]
	if t.NodeSelector, err = podNodeSelector(pod); err != nil {
		return api.Task{}, err
	}
	if t.NodeAffinity, err = podNodeAffinity(pod); err != nil {
		return api.Task{}, err
	}
	if t.Tolerations, err = podTolerations(pod.Spec.Tolerations); err != nil {
		return api.Task{}, err
	}
	if err := pt.podConstraints(pod, &t); err != nil {
		return api.Task{}, err
	}
	return t, nil
}

// podTask is what every pod's task has: its id, a lease that never
// expires (the pod's life is its end), and as its labels the pod's, its
// namespace and its name (the placement constraints' selectors match
// them).
func podTask(pod *corev1.Pod, id string) api.Task {
	md := make(map[string]string, len(pod.Labels)+2)
	for k, v := range pod.Labels {
		md[k] = v
	}
	md[metaNamespace], md[metaPod] = pod.Namespace, pod.Name
	t := api.Task{
		ID:       id,
		Lease:    api.NoExpiry,
		Metadata: md,
	}
	if len(pod.Namespace)+len(pod.Name)+1 <= 253 {
		t.Name = pod.Namespace + "/" + pod.Name
	}
	return t
}

// podRequest is the pod's request in hetsched's terms. A resource
// hetsched cannot hold is an error, and the list still has the rest (a
// pod another scheduler bound is counted by what can be held). A pod
// resized in place counts the larger of its spec's and its status's
// resources (allocated and actuated), as kube-scheduler v1.36's
// NodeResourcesFit counts it (InPlacePodVerticalScaling, and its
// pod-level sibling, on by default).
func podRequest(pod *corev1.Pod) (resource.List, error) {
	out := resource.List{PodsResource: 1000}
	var bad error
	opts := resourcehelper.PodResourcesOptions{UseStatusResources: true, InPlacePodLevelResourcesVerticalScalingEnabled: true}
	for name, q := range resourcehelper.PodRequests(pod, opts) {
		rn, v, ok := resourceQuantity(name, q)
		switch {
		case !ok:
			bad = fmt.Errorf("resources: hetsched cannot hold %q", name)
		case v < 0:
			bad = fmt.Errorf("resources.%s: negative request", name)
		case v > 0:
			out[rn] = v
		}
	}
	return out, bad
}

// priority is the pod's tier: the annotation, else its priority.
func (pt podTranslator) priority(pod *corev1.Pod) (int, error) {
	if v, ok := pod.Annotations[AnnotationPriority]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < api.PriorityUrgent || n > api.PriorityLow {
			return 0, fmt.Errorf("annotation %s: %q is not a tier 0 (urgent) to 3 (low)", AnnotationPriority, v)
		}
		return n, nil
	}
	if pod.Spec.Priority != nil {
		return pt.tiers.Tier(*pod.Spec.Priority), nil
	}
	if pod.Spec.PriorityClassName != "" && pt.classPriority != nil {
		if v, ok := pt.classPriority(pod.Spec.PriorityClassName); ok {
			return pt.tiers.Tier(v), nil
		}
	}
	return pt.tiers.Tier(0), nil
}

// value is the pod's priority (spec.priority, else its PriorityClass's,
// else 0): it orders pods for preemption inside their tier, as
// kube-scheduler orders them.
func (pt podTranslator) value(pod *corev1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	if pod.Spec.PriorityClassName != "" && pt.classPriority != nil {
		if v, ok := pt.classPriority(pod.Spec.PriorityClassName); ok {
			return v
		}
	}
	return 0
}

// podNodeSelector is spec.nodeSelector as hetsched's selector.
func podNodeSelector(pod *corev1.Pod) (map[string]string, error) {
	if len(pod.Spec.NodeSelector) == 0 {
		return nil, nil
	}
	sel := make(map[string]string, len(pod.Spec.NodeSelector))
	for k, v := range pod.Spec.NodeSelector {
		if err := checkSelector(k, v); err != nil {
			return nil, fmt.Errorf("nodeSelector: %v", err)
		}
		sel[k] = v
	}
	return nilIfEmpty(sel), nil
}

// podNodeAffinity is the required node affinity as hetsched's terms (one
// must match): each nodeSelectorTerm's expressions on labels (In, NotIn,
// Exists, DoesNotExist, Gt, Lt) and on the field metadata.name (In,
// NotIn, as hetsched's node-name label) joined into one selector.
func podNodeAffinity(pod *corev1.Pod) ([]string, error) {
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil, nil
	}
	const field = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) == 0 {
		return nil, fmt.Errorf("%s: an empty list matches no node", field)
	}
	if len(terms) > api.MaxAffinityTerms {
		return nil, fmt.Errorf("%s: hetsched holds at most %d terms, got %d", field, api.MaxAffinityTerms, len(terms))
	}
	var out []string
	for i, term := range terms {
		f := fmt.Sprintf("%s[%d]", field, i)
		reqs, err := nodeTermRequirements(f, term)
		if err != nil {
			return nil, err
		}
		if len(reqs) == 0 {
			return nil, fmt.Errorf("%s: an empty term matches no node", f)
		}
		text := strings.Join(reqs, ",")
		if _, err := api.ParseSelector(text); err != nil {
			return nil, fmt.Errorf("%s: %v", f, err)
		}
		out = append(out, text)
	}
	return out, nil
}

// nodeTermRequirements are a node selector term's expressions on labels
// (In, NotIn, Exists, DoesNotExist, Gt, Lt) and on the field metadata.name
// (In, NotIn, as hetsched's node-name label), in selector syntax.
func nodeTermRequirements(f string, term corev1.NodeSelectorTerm) ([]string, error) {
	var reqs []string
	for j, e := range term.MatchExpressions {
		r, err := affinityRequirement(e.Key, e.Operator, e.Values)
		if err != nil {
			return nil, fmt.Errorf("%s.matchExpressions[%d]: %v", f, j, err)
		}
		reqs = append(reqs, r)
	}
	for j, e := range term.MatchFields {
		if e.Key != "metadata.name" || e.Operator != corev1.NodeSelectorOpIn && e.Operator != corev1.NodeSelectorOpNotIn {
			return nil, fmt.Errorf("%s.matchFields[%d]: only metadata.name with In or NotIn is a node field, got %s %s", f, j, e.Key, e.Operator)
		}
		r, err := affinityRequirement(api.NodeNameLabel, e.Operator, e.Values)
		if err != nil {
			return nil, fmt.Errorf("%s.matchFields[%d]: %v", f, j, err)
		}
		reqs = append(reqs, r)
	}
	return reqs, nil
}

// affinityRequirement writes one expression in selector syntax.
func affinityRequirement(key string, op corev1.NodeSelectorOperator, values []string) (string, error) {
	for _, v := range values {
		if strings.ContainsAny(v, ",()") {
			return "", fmt.Errorf("value %q of %s holds a character a selector cannot carry", v, key)
		}
	}
	switch op {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		if len(values) == 0 {
			return "", fmt.Errorf("%s needs values", op)
		}
		word := "in"
		if op == corev1.NodeSelectorOpNotIn {
			word = "notin"
		}
		return key + " " + word + " (" + strings.Join(values, ",") + ")", nil
	case corev1.NodeSelectorOpExists:
		return key, nil
	case corev1.NodeSelectorOpDoesNotExist:
		return "!" + key, nil
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(values) != 1 {
			return "", fmt.Errorf("%s needs one integer value, got %d", op, len(values))
		}
		if _, err := strconv.ParseInt(values[0], 10, 64); err != nil {
			return "", fmt.Errorf("%s needs an integer, got %q", op, values[0])
		}
		sym := ">"
		if op == corev1.NodeSelectorOpLt {
			sym = "<"
		}
		return key + sym + values[0], nil
	}
	return "", fmt.Errorf("operator %q is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt", op)
}

func checkSelector(k, v string) error {
	if k == api.NodeNameLabel {
		return fmt.Errorf("%s is hetsched's own label", k)
	}
	if err := api.ValidateLabelKey(k); err != nil {
		return err
	}
	if strings.Contains(v, "|") {
		return fmt.Errorf("label %s: value %q holds '|'", k, v)
	}
	return api.ValidateLabelValue(v)
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// podTolerations writes Kubernetes tolerations in hetsched's form: "*"
// (an empty key with Exists), "key" (Exists), "key=value" (Equal, or no
// operator), each with ":Effect" when it names one, so that it tolerates
// taints of that effect only, as kube-scheduler's TaintToleration reads
// it. tolerationSeconds matters only to the taint manager's evictions.
// Another operator is refused, naming it.
func podTolerations(tols []corev1.Toleration) ([]string, error) {
	var out []string
	for i, tol := range tols {
		var s string
		switch {
		case tol.Operator == corev1.TolerationOpExists && tol.Key == "":
			s = "*"
		case tol.Operator == corev1.TolerationOpExists:
			s = tol.Key
		case tol.Operator == corev1.TolerationOpEqual || tol.Operator == "":
			s = tol.Key + "=" + tol.Value
		default:
			return nil, fmt.Errorf("tolerations[%d].operator: %q is not one of Exists, Equal", i, tol.Operator)
		}
		if tol.Effect != "" {
			s += ":" + string(tol.Effect)
		}
		if _, err := api.ParseToleration(s); err != nil {
			return nil, fmt.Errorf("tolerations[%d]: %v", i, err)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
		if len(out) > api.MaxTolerations {
			return nil, fmt.Errorf("tolerations: more than %d", api.MaxTolerations)
		}
	}
	return out, nil
}

func boolPtr(b bool) *bool { return &b }
