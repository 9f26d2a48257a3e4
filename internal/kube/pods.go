package kube

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

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
}

// task translates a pod into the task that stands for it. id is the
// task's id. The request is what kube-scheduler's fit check uses
// (component-helpers' PodRequests: containers, init containers and
// sidecars, overhead, pod-level resources) plus one PodsResource. An
// error names the pod field that hetsched cannot express; the pod then
// waits with that reason.
func (pt podTranslator) task(pod *corev1.Pod, id string) (api.Task, error) {
	t := api.Task{
		ID:       id,
		Lease:    api.NoExpiry,
		Requeue:  boolPtr(false), // a pod runs once; its controller makes another
		Metadata: map[string]string{metaNamespace: pod.Namespace, metaPod: pod.Name},
	}
	if len(pod.Namespace)+len(pod.Name)+1 <= 253 {
		t.Name = pod.Namespace + "/" + pod.Name
	}
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
	if t.Tolerations, err = podTolerations(pod.Spec.Tolerations); err != nil {
		return api.Task{}, err
	}
	return t, nil
}

// podRequest is the pod's request in hetsched's terms.
func podRequest(pod *corev1.Pod) (resource.List, error) {
	out := resource.List{PodsResource: 1000}
	for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
		rn, v, ok := resourceQuantity(name, q)
		if !ok {
			return nil, fmt.Errorf("resources: hetsched cannot hold %q", name)
		}
		if v < 0 {
			return nil, fmt.Errorf("resources.%s: negative request", name)
		}
		if v > 0 {
			out[rn] = v
		}
	}
	return out, nil
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

// podNodeSelector merges spec.nodeSelector and the required node affinity
// into hetsched's selector, where a key's value may list alternatives
// ("a|b"). Affinity is carried when it is one term of In (and
// single-value) expressions on labels; other forms are refused with the
// reason, so that the pod waits rather than lands where it must not.
func podNodeSelector(pod *corev1.Pod) (map[string]string, error) {
	sel := map[string]string{}
	for k, v := range pod.Spec.NodeSelector {
		if err := checkSelector(k, v); err != nil {
			return nil, fmt.Errorf("nodeSelector: %v", err)
		}
		sel[k] = v
	}
	aff := pod.Spec.Affinity
	if aff == nil || aff.NodeAffinity == nil || aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nilIfEmpty(sel), nil
	}
	terms := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	const field = "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
	if len(terms) != 1 {
		return nil, fmt.Errorf("%s: hetsched kube supports one nodeSelectorTerm, got %d", field, len(terms))
	}
	if len(terms[0].MatchFields) > 0 {
		return nil, fmt.Errorf("%s: matchFields is not supported", field)
	}
	for i, e := range terms[0].MatchExpressions {
		f := fmt.Sprintf("%s.nodeSelectorTerms[0].matchExpressions[%d]", field, i)
		if e.Operator != corev1.NodeSelectorOpIn {
			return nil, fmt.Errorf("%s: operator %s is not supported yet (only In)", f, e.Operator)
		}
		if len(e.Values) == 0 {
			return nil, fmt.Errorf("%s: In needs values", f)
		}
		vals := append([]string(nil), e.Values...)
		sort.Strings(vals)
		v := strings.Join(vals, "|")
		if old, ok := sel[e.Key]; ok {
			v = intersect(old, vals)
			if v == "" {
				return nil, fmt.Errorf("%s: no value of %s satisfies both nodeSelector and affinity", f, e.Key)
			}
		}
		for _, x := range vals {
			if err := checkSelector(e.Key, x); err != nil {
				return nil, fmt.Errorf("%s: %v", f, err)
			}
		}
		sel[e.Key] = v
	}
	return nilIfEmpty(sel), nil
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

// intersect keeps the values of a|b|c that are among vals.
func intersect(alts string, vals []string) string {
	var keep []string
	for _, a := range strings.Split(alts, "|") {
		for _, v := range vals {
			if a == v {
				keep = append(keep, a)
				break
			}
		}
	}
	return strings.Join(keep, "|")
}

func nilIfEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// podTolerations writes Kubernetes tolerations in hetsched's form: "*"
// (an empty key with Exists), "key" (Exists), "key=value" (Equal), each
// with ":Effect" when it names one. A NoExecute toleration also tolerates
// the NoSchedule taint a NoExecute taint becomes (nodeTranslator.node).
func podTolerations(tols []corev1.Toleration) ([]string, error) {
	var out []string
	for i, tol := range tols {
		var s string
		switch {
		case tol.Key == "" && tol.Operator == corev1.TolerationOpExists:
			s = "*"
		case tol.Operator == corev1.TolerationOpExists:
			s = tol.Key
		default:
			s = tol.Key + "=" + tol.Value
		}
		effects := []string{""}
		switch tol.Effect {
		case corev1.TaintEffectNoExecute:
			effects = []string{api.NoExecute, api.NoSchedule}
		case "":
		default:
			effects = []string{string(tol.Effect)}
		}
		if s == "*" {
			// An empty key with Exists tolerates every taint (of one effect,
			// when it names one: hetsched's "*" has no effect, so it is a
			// little wider then).
			effects = []string{""}
		}
		for _, e := range effects {
			w := s
			if e != "" {
				w += ":" + e
			}
			if _, err := api.ParseToleration(w); err != nil {
				return nil, fmt.Errorf("tolerations[%d]: %v", i, err)
			}
			if !contains(out, w) {
				out = append(out, w)
			}
		}
		if len(out) > api.MaxTolerations {
			return nil, fmt.Errorf("tolerations: more than %d", api.MaxTolerations)
		}
	}
	return out, nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

func boolPtr(b bool) *bool { return &b }

// gangOf returns the pod's gang: its name (namespace/name), min members
// and timeout; "" when the pod is in none. A PodGroup's spec, when the
// label names one that exists, wins over the annotations.
func gangOf(pod *corev1.Pod, podGroup func(ns, name string) (min int, timeout time.Duration, ok bool)) (name string, minMember int, timeout time.Duration, err error) {
	if g := pod.Labels[LabelPodGroup]; g != "" && podGroup != nil {
		if m, to, ok := podGroup(pod.Namespace, g); ok {
			return pod.Namespace + "/" + g, m, to, nil
		}
		return "", 0, 0, fmt.Errorf("label %s: no PodGroup %s/%s", LabelPodGroup, pod.Namespace, g)
	}
	g := pod.Annotations[AnnotationGang]
	if g == "" {
		return "", 0, 0, nil
	}
	minMember = 1
	if v, ok := pod.Annotations[AnnotationGangMinMember]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxShards {
			return "", 0, 0, fmt.Errorf("annotation %s: %q is not a count from 1 to %d", AnnotationGangMinMember, v, api.MaxShards)
		}
		minMember = n
	}
	if v, ok := pod.Annotations[AnnotationGangTimeout]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return "", 0, 0, fmt.Errorf("annotation %s: %q is not a positive number of seconds", AnnotationGangTimeout, v)
		}
		timeout = time.Duration(n) * time.Second
	}
	return pod.Namespace + "/" + g, minMember, timeout, nil
}
