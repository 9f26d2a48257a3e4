package kube

// Kubernetes' own gangs: the PodGroup of scheduling.k8s.io/v1alpha2
// (1.36, feature gates GenericWorkload and GangScheduling; its topology
// constraint TopologyAwareWorkloadScheduling, its priority and
// disruption mode WorkloadAwarePreemption). A pod names its group with
// spec.schedulingGroup.podGroupName. kube-scheduler's GangScheduling and
// TopologyPlacementGenerator plugins define what the fields mean; here
// they become a gangSpec, and from it a job with a gang (§1 of the
// core's gang rules):
//
//	schedulingPolicy.gang.minCount        Gang.MinMember
//	schedulingPolicy.basic                no gang: each pod on its own
//	schedulingConstraints.topology[0].key Gang.RequiredTopology; pods of
//	                                      a group placed earlier pin the
//	                                      domain of later ones
//	disruptionMode Pod | PodGroup         Gang.Disruption member | gang
//	                                      (Pod when unset, as upstream)
//	priority, else priorityClassName      every member's tier and value
//	resourceClaims                        a pod's claim of the same name
//	                                      and claim (or template) is the
//	                                      group's: allocated once, by the
//	                                      gang's first member, reserved
//	                                      for the PodGroup; while it is not
//	                                      allocated, the gang goes to one
//	                                      node (a node-local allocation
//	                                      is where every consumer runs)
//
// Status: PodGroupScheduled is written as kube-scheduler writes it: True
// (reason Scheduled) once minCount members are bound (one, under the
// basic policy), False
// (Unschedulable, the engine's reason) while a formed gang waits, and
// never back from True to False.

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedv1a2 "k8s.io/api/scheduling/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/api"
)

// WorkloadPodGroupResource is Kubernetes' own PodGroup.
var WorkloadPodGroupResource = schedv1a2.SchemeGroupVersion.WithResource("podgroups")

// k8sGangPrefix starts the gang key (and the pod index key) of a
// Kubernetes PodGroup, so that it never meets a scheduler-plugins
// PodGroup or an annotation gang of the same name.
const k8sGangPrefix = "k8s:"

// gangSpec is what a pod's gang is made of: a PodGroup of either API or
// the hetsched.io/gang annotations. name is "" for no gang.
type gangSpec struct {
	name    string // the gang's key: namespace/name, k8sGangPrefix first for Kubernetes' PodGroup
	min     int
	timeout time.Duration
	// Kubernetes' PodGroup only.
	upstream   bool
	group      string // namespace/name of the PodGroup
	required   string // the label key all members share
	disruption string // api.DisruptGang or api.DisruptMember ("": the core's default)
	priority   *int32 // the group's priority value
}

// display names the gang in messages.
func (g *gangSpec) display() string {
	if g.upstream {
		return "PodGroup " + g.group
	}
	return g.name
}

// gang is the job's gang for g.
func (g *gangSpec) gang() *api.Gang {
	return &api.Gang{MinMember: g.min, Timeout: api.Duration(g.timeout), RequiredTopology: g.required, Disruption: g.disruption}
}

// applyPriority gives t the group's priority, when it has one.
func (g *gangSpec) applyPriority(t *api.Task, tiers PriorityTiers) {
	if g.priority != nil {
		tier := tiers.Tier(*g.priority)
		t.Priority, t.PriorityValue = &tier, *g.priority
	}
}

// gangOf returns the pod's gang; wait says why it cannot be known yet
// (its PodGroup does not exist yet). Kubernetes' PodGroup, when the pod
// names one, is its only gang; else a scheduler-plugins PodGroup that the
// label names wins over the annotations.
func (s *Scheduler) gangOf(pod *corev1.Pod) (g gangSpec, wait string, err error) {
	if sg := pod.Spec.SchedulingGroup; sg != nil {
		if pod.Labels[LabelPodGroup] != "" {
			return g, "", fmt.Errorf("schedulingGroup: the pod also names a scheduler-plugins PodGroup (label %s); a pod is in one gang", LabelPodGroup)
		}
		if _, ok := pod.Annotations[AnnotationGang]; ok {
			return g, "", fmt.Errorf("schedulingGroup: the pod also names a gang by annotation %s; a pod is in one gang", AnnotationGang)
		}
		return s.k8sGangOf(pod.Namespace, sg)
	}
	if name := pod.Labels[LabelPodGroup]; name != "" {
		m, to, ok := s.podGroup(pod.Namespace, name)
		if !ok {
			return g, "", fmt.Errorf("label %s: no PodGroup %s/%s", LabelPodGroup, pod.Namespace, name)
		}
		return gangSpec{name: pod.Namespace + "/" + name, min: m, timeout: to}, "", nil
	}
	name := pod.Annotations[AnnotationGang]
	if name == "" {
		return g, "", nil
	}
	g = gangSpec{name: pod.Namespace + "/" + name, min: 1}
	if v, ok := pod.Annotations[AnnotationGangMinMember]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxShards {
			return g, "", fmt.Errorf("annotation %s: %q is not a count from 1 to %d", AnnotationGangMinMember, v, api.MaxShards)
		}
		g.min = n
	}
	if v, ok := pod.Annotations[AnnotationGangTimeout]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return g, "", fmt.Errorf("annotation %s: %q is not a positive number of seconds", AnnotationGangTimeout, v)
		}
		g.timeout = time.Duration(n) * time.Second
	}
	return g, "", nil
}

// k8sGangOf is the gang of a pod naming a Kubernetes PodGroup.
func (s *Scheduler) k8sGangOf(ns string, sg *corev1.PodSchedulingGroup) (gangSpec, string, error) {
	if sg.PodGroupName == nil || *sg.PodGroupName == "" {
		return gangSpec{}, "", fmt.Errorf("schedulingGroup: names no podGroupName")
	}
	name := *sg.PodGroupName
	if s.k8sGroupLst == nil {
		return gangSpec{}, "", fmt.Errorf("schedulingGroup.podGroupName: the cluster does not serve scheduling.k8s.io/v1alpha2 PodGroups (the API server's GenericWorkload and GangScheduling feature gates, --runtime-config=scheduling.k8s.io/v1alpha2=true)")
	}
	pg, err := s.k8sGroupLst.PodGroups(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return gangSpec{}, "waiting for PodGroup " + ns + "/" + name + " (schedulingGroup.podGroupName) to exist", nil
	}
	if err != nil {
		return gangSpec{}, "", fmt.Errorf("schedulingGroup.podGroupName: PodGroup %s/%s: %v", ns, name, err)
	}
	g, err := podGroupGang(pg, s.classPriority)
	return g, "", err
}

// podGroupGang translates a Kubernetes PodGroup (classPriority looks a
// PriorityClass up; nil: none is known). An error names the field.
func podGroupGang(pg *schedv1a2.PodGroup, classPriority func(string) (int32, bool)) (gangSpec, error) {
	key := pg.Namespace + "/" + pg.Name
	g := gangSpec{name: k8sGangPrefix + key, group: key, upstream: true, min: 1, disruption: api.DisruptMember}
	bad := func(field, format string, a ...any) (gangSpec, error) {
		return gangSpec{}, fmt.Errorf("PodGroup %s: spec.%s: %s", key, field, fmt.Sprintf(format, a...))
	}
	sp := pg.Spec.SchedulingPolicy
	switch {
	case sp.Gang != nil && sp.Basic != nil:
		return bad("schedulingPolicy", "names both basic and gang")
	case sp.Gang != nil:
		if sp.Gang.MinCount < 1 {
			return bad("schedulingPolicy.gang.minCount", "%d is not a count of pods", sp.Gang.MinCount)
		}
		g.min = int(min(sp.Gang.MinCount, api.MaxShards)) // a job holds no more tasks
	case sp.Basic == nil:
		return bad("schedulingPolicy", "names neither basic nor gang")
	}
	if c := pg.Spec.SchedulingConstraints; c != nil && len(c.Topology) > 0 {
		if len(c.Topology) > 1 {
			return bad("schedulingConstraints.topology", "%d constraints; one is allowed", len(c.Topology))
		}
		if err := api.ValidateLabelKey(c.Topology[0].Key); err != nil {
			return bad("schedulingConstraints.topology[0].key", "%v", err)
		}
		if sp.Gang == nil {
			return bad("schedulingConstraints.topology", "hetsched keeps a group in one domain only under the gang policy, not basic")
		}
		g.required = c.Topology[0].Key
	}
	if m := pg.Spec.DisruptionMode; m != nil {
		switch *m {
		case schedv1a2.DisruptionModePod:
		case schedv1a2.DisruptionModePodGroup:
			if sp.Gang == nil {
				return bad("disruptionMode", "PodGroup needs the gang policy in hetsched (basic pods are placed and evicted one by one)")
			}
			g.disruption = api.DisruptGang
		default:
			return bad("disruptionMode", "%q is not Pod or PodGroup", *m)
		}
	}
	switch {
	case pg.Spec.Priority != nil:
		v := *pg.Spec.Priority
		g.priority = &v
	case pg.Spec.PriorityClassName != "":
		v, ok := int32(0), false
		if classPriority != nil {
			v, ok = classPriority(pg.Spec.PriorityClassName)
		}
		if !ok {
			return bad("priorityClassName", "no PriorityClass %q", pg.Spec.PriorityClassName)
		}
		g.priority = &v
	}
	for i, c := range pg.Spec.ResourceClaims {
		if (c.ResourceClaimName == nil) == (c.ResourceClaimTemplateName == nil) {
			return bad(fmt.Sprintf("resourceClaims[%d]", i), "names %s: exactly one of resourceClaimName and resourceClaimTemplateName", c.Name)
		}
	}
	return g, nil
}

// groupRef is a Kubernetes PodGroup as a claim's consumer.
type groupRef struct {
	name string
	uid  types.UID
}

// consumer is the reference a claim's status.reservedFor holds for g.
func (g *groupRef) consumer() resourcev1.ResourceClaimConsumerReference {
	return resourcev1.ResourceClaimConsumerReference{APIGroup: schedv1a2.GroupName, Resource: "podgroups", Name: g.name, UID: g.uid}
}

// groupClaim finds pod claim pc among the claims of the pod's Kubernetes
// PodGroup: the same name and the same claim or template, as upstream
// matches them. It returns the claim's name (from the group's status for
// a template: wait says why it is not known yet) and the group; a nil
// group when pc is the pod's own.
func (s *Scheduler) groupClaim(pod *corev1.Pod, pc *corev1.PodResourceClaim) (name string, g *groupRef, wait string) {
	sg := pod.Spec.SchedulingGroup
	if sg == nil || sg.PodGroupName == nil || s.k8sGroupLst == nil {
		return "", nil, ""
	}
	pg, err := s.k8sGroupLst.PodGroups(pod.Namespace).Get(*sg.PodGroupName)
	if err != nil {
		return "", nil, ""
	}
	for _, c := range pg.Spec.ResourceClaims {
		if c.Name != pc.Name || !sameString(c.ResourceClaimName, pc.ResourceClaimName) || !sameString(c.ResourceClaimTemplateName, pc.ResourceClaimTemplateName) {
			continue
		}
		g = &groupRef{name: pg.Name, uid: pg.UID}
		if c.ResourceClaimName != nil {
			return *c.ResourceClaimName, g, ""
		}
		for _, st := range pg.Status.ResourceClaimStatuses {
			if st.Name == c.Name && st.ResourceClaimName != nil {
				return *st.ResourceClaimName, g, ""
			}
		}
		return "", g, "waiting for the ResourceClaim of PodGroup " + pod.Namespace + "/" + pg.Name + "'s claim " + c.Name + " (kube-controller-manager makes it from template " + *c.ResourceClaimTemplateName + ")"
	}
	return "", nil, ""
}

// startK8sPodGroups reads Kubernetes' PodGroups when the cluster serves
// them (before the factory starts): a change of one marks its pods
// dirty. Without them, pods naming one are refused with that reason.
func (s *Scheduler) startK8sPodGroups(ctx context.Context) error {
	ok, err := servesResource(ctx, s.client.Discovery(), WorkloadPodGroupResource)
	if err != nil {
		s.log.Warn("cannot tell whether the cluster serves scheduling.k8s.io/v1alpha2 PodGroups; pods naming one are refused", "err", err)
	}
	if err != nil || !ok {
		return nil
	}
	inf := s.factory.Scheduling().V1alpha2().PodGroups()
	changed := func(o any) {
		if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if pg, ok := o.(*schedv1a2.PodGroup); ok {
			s.markGroupPods(k8sGangPrefix + pg.Namespace + "/" + pg.Name)
		}
	}
	update := func(old, o any) {
		// Only what the pods are made from: the spec, and the claims'
		// names in the status; not the conditions hetsched writes.
		a, ok1 := old.(*schedv1a2.PodGroup)
		b, ok2 := o.(*schedv1a2.PodGroup)
		if !ok1 || !ok2 || a.Generation != b.Generation || !reflect.DeepEqual(a.Status.ResourceClaimStatuses, b.Status.ResourceClaimStatuses) {
			changed(o)
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: changed, UpdateFunc: update, DeleteFunc: changed,
	}); err != nil {
		return err
	}
	s.k8sGroupLst = inf.Lister()
	return nil
}

// markGroupPods marks dirty the pods of the gang of key (an index key).
func (s *Scheduler) markGroupPods(key string) {
	keys, err := s.podIdx.IndexKeys(podGroupIndex, key)
	if err != nil {
		return
	}
	for _, k := range keys {
		s.dirty.addPodKey(k)
	}
}

// groupScheduled records that a member of g was bound: with minCount of
// them bound, the group is Scheduled. Called with s.mu held.
func (s *Scheduler) groupScheduled(ctx context.Context, g *gangState) {
	g.bound++
	if !g.spec.upstream || g.bound < g.spec.min || g.scheduled {
		return
	}
	g.scheduled = true
	msg := fmt.Sprintf("hetsched bound %d of its pods", g.bound)
	if g.spec.min > 1 {
		msg += fmt.Sprintf(" (minCount %d)", g.spec.min)
	}
	s.setGroupCondition(ctx, g.spec.group, metav1.Condition{Type: schedv1a2.PodGroupScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled", Message: msg})
}

// gangBound records that a member of g was bound to node: the gang's
// domain is set from the first, and a Kubernetes PodGroup is Scheduled
// once minCount are. Called with s.mu held.
func (s *Scheduler) gangBound(ctx context.Context, key string, g *gangState, node string) {
	g.started = true
	if g.spec.required != "" && g.domain == "" {
		if n, err := s.nodeLst.Get(node); err == nil && n.Labels[g.spec.required] != "" {
			g.domain = n.Labels[g.spec.required]
			s.markGroupPods(key) // members waiting for it
		}
	}
	s.groupScheduled(ctx, g)
}

// groupUnschedulable records why a formed gang of a Kubernetes PodGroup
// (or a pod of one of the basic policy) waits. Called with s.mu held.
func (s *Scheduler) groupUnschedulable(ctx context.Context, g *gangState, why string) {
	if !g.spec.upstream || g.scheduled || g.jobs == 0 && g.spec.min > 1 {
		return
	}
	s.setGroupCondition(ctx, g.spec.group, metav1.Condition{Type: schedv1a2.PodGroupScheduled, Status: metav1.ConditionFalse,
		Reason: schedv1a2.PodGroupReasonUnschedulable, Message: "hetsched: " + why})
}

// setGroupCondition writes c on the PodGroup key (namespace/name) in the
// background, the latest per group (coalesce.go).
func (s *Scheduler) setGroupCondition(ctx context.Context, key string, c metav1.Condition) {
	s.groupConds.set(ctx, &s.bg, key, c, func(ctx context.Context, key string, c metav1.Condition) {
		if err := s.writeGroupCondition(ctx, key, c); err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
			s.log.Warn("writing PodGroupScheduled", "podGroup", key, "err", err)
		}
	})
}

// writeGroupCondition sets c on the PodGroup's status unless it is already
// so or would go from True back to False; a conflict (someone wrote
// meanwhile, or the informer's copy was behind) reads it fresh, three
// tries at most.
func (s *Scheduler) writeGroupCondition(ctx context.Context, key string, c metav1.Condition) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pgs := s.client.SchedulingV1alpha2().PodGroups(ns)
	var err error
	for try := range 3 {
		// The informer's copy first: most writes find the condition
		// already so and cost no request; after a conflict, read fresh.
		pg, gerr := s.k8sGroupLst.PodGroups(ns).Get(name)
		if gerr == nil {
			pg = pg.DeepCopy()
		}
		if gerr != nil || try > 0 {
			err = s.retry(ctx, func(ctx context.Context) error {
				pg, gerr = pgs.Get(ctx, name, metav1.GetOptions{})
				return gerr
			})
			if err != nil {
				return err
			}
		}
		if old := apimeta.FindStatusCondition(pg.Status.Conditions, c.Type); old != nil && old.Status == metav1.ConditionTrue && c.Status != metav1.ConditionTrue {
			return nil
		}
		c.ObservedGeneration = pg.Generation
		if !apimeta.SetStatusCondition(&pg.Status.Conditions, c) {
			return nil
		}
		err = s.retry(ctx, func(ctx context.Context) error {
			_, uerr := pgs.UpdateStatus(ctx, pg, metav1.UpdateOptions{})
			return uerr
		})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return err
}

// sameString reports whether a and b are both unset or both the same.
func sameString(a, b *string) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }
