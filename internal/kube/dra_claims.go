package kube

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/resource"
)

// AnnotationDRASpeeds gives the expected speed of a pod's firstAvailable
// subrequests (or whole requests) relative to each other:
// "gpu=1,tpu=1.4,cpu=0.2", keyed by subrequest name or request/subrequest.
// Unnamed ones are 1. The core picks the alternative expected to finish
// first among those that fit now (learned per-model speeds included);
// equal speeds go to the earlier subrequest, as Kubernetes orders them.
const AnnotationDRASpeeds = "hetsched.io/dra-speeds"

// claimFinalizer is what kube-scheduler puts on a claim it allocates: the
// claim is not deleted while allocated.
const claimFinalizer = "resource.kubernetes.io/delete-protection"

// maxReservedFor is the API's bound on a claim's consumers.
const maxReservedFor = 256

// draUse is one request's share of an option: count devices of type and
// class for the request (or "request/subrequest") of claim.
type draUse struct {
	claim   int
	request string
	typ     string
	class   string
	count   int
	dcName  string // the DeviceClass (its config goes into the allocation)
	reqName string // the request the claim's config names
}

// draClaimRef is one of a pod's claims.
type draClaimRef struct {
	key       string // namespace/name
	uid       types.UID
	allocated bool      // already allocated when the task was made
	group     *groupRef // the Kubernetes PodGroup it is reserved for (a group's claim), or nil: the pod
	// written is the claim as this scheduler's allocation left it (nil:
	// the allocation was not its write), for when the informer has not
	// caught up with its own write (claimsAfterPod).
	written *resourcev1.ResourceClaim
}

// draPlan is how a pod's task stands for its claims: the claims, and per
// option (0: the task's resources, i: alternative i-1) what each request
// takes. version is the DRA state the options were made from.
type draPlan struct {
	claims  []draClaimRef
	options [][]draUse
	version uint64
	key     string // the options, for telling a changed plan
}

// draChoice is one way to satisfy one request.
type draChoice struct {
	use   draUse
	speed float64
}

// withClaims extends a pod's task by its ResourceClaims (under mu): claims
// already allocated pin it to their node; the others' requests become
// device requests of a class, their alternatives (firstAvailable, several
// drivers) the task's alternatives. wait is why the pod cannot be a task
// yet (a claim not created yet, say); err why it never can as it is.
//
// A claim of the pod's Kubernetes PodGroup (groupClaim) is reserved for
// the group; left unallocated, it is allocated by the member whose task
// carries its requests: with sharer set, the pod is not that member, and
// its task leaves the group's unallocated claims out (its gang keeps it
// on the carrier's node).
func (da *draAllocator) withClaims(pod *corev1.Pod, t api.Task, sharer bool) (_ api.Task, _ *draPlan, wait string, err error) {
	if len(pod.Spec.ResourceClaims) == 0 {
		return t, nil, "", nil
	}
	if da.claimLst == nil {
		return t, nil, "", fmt.Errorf("resourceClaims: the cluster does not serve resource.k8s.io/v1 ResourceClaims")
	}
	speeds, err := parseDRASpeeds(pod.Annotations[AnnotationDRASpeeds])
	if err != nil {
		return t, nil, "", err
	}
	plan := &draPlan{version: da.devices.currentVersion()}
	pinned := ""
	var perRequest [][]draChoice
	for i, pc := range pod.Spec.ResourceClaims {
		name, group, w := da.pods.groupClaim(pod, &pc)
		if group == nil {
			name, w = claimName(pod, &pc)
		}
		if w != "" || name == "" {
			if w != "" {
				return t, nil, w, nil
			}
			continue // the template made no claim for this pod
		}
		key := pod.Namespace + "/" + name
		claim, gerr := da.claimLst.ResourceClaims(pod.Namespace).Get(name)
		if gerr != nil || claim.DeletionTimestamp != nil {
			da.waitForClaim(key, pod)
			if gerr != nil {
				return t, nil, "waiting for ResourceClaim " + key + " to exist", nil
			}
			return t, nil, "ResourceClaim " + key + " is being deleted", nil
		}
		ref := draClaimRef{key: key, uid: claim.UID, group: group}
		consumer := pod.UID
		if group != nil {
			consumer = group.uid
		}
		if a := claim.Status.Allocation; a != nil {
			node, nerr := allocationNode(a)
			if nerr != nil {
				return t, nil, "", fmt.Errorf("resourceClaims[%d]: claim %s: %v", i, key, nerr)
			}
			if pinned != "" && node != pinned {
				return t, nil, "", fmt.Errorf("resourceClaims[%d]: claim %s is allocated on node %s, another of the pod's on %s", i, key, node, pinned)
			}
			if len(claim.Status.ReservedFor) >= maxReservedFor && !reservedFor(claim, consumer) {
				da.waitForClaim(key, pod)
				return t, nil, "ResourceClaim " + key + " is in use by the most pods it may have", nil
			}
			pinned = node
			ref.allocated = true
			plan.claims = append(plan.claims, ref)
			continue
		}
		if group != nil && sharer {
			continue // allocated by the gang's carrier, on the node this pod shares
		}
		plan.claims = append(plan.claims, ref)
		choices, w, cerr := da.claimChoices(claim, len(plan.claims)-1, speeds)
		if cerr != nil {
			return t, nil, "", fmt.Errorf("resourceClaims[%d]: claim %s: %v", i, key, cerr)
		}
		if w != "" {
			da.markDRAWaiting(pod)
			return t, nil, "ResourceClaim " + key + ": " + w, nil
		}
		perRequest = append(perRequest, choices...)
	}
	if pinned != "" {
		if api.ValidateLabelValue(pinned) != nil || len(pinned) > 63 {
			return t, nil, "", fmt.Errorf("resourceClaims: node name %q cannot be selected by label", clip(pinned, 80))
		}
		sel := make(map[string]string, len(t.NodeSelector)+1)
		for k, v := range t.NodeSelector {
			sel[k] = v
		}
		sel[api.NodeNameLabel] = pinned
		t.NodeSelector = sel
	}
	if len(perRequest) == 0 {
		plan.options = [][]draUse{nil}
		return t, plan, "", nil
	}
	// Its claims' devices are free only once kube-controller-manager
	// deallocates them, after the pod is gone: preempting it would not
	// make room in time, so it is not preempted (yet).
	t.Preemptible = boolPtr(false)
	combos := combine(perRequest)
	if len(combos) == 0 {
		return t, nil, "", fmt.Errorf("resourceClaims: the pod's requests ask for devices of one driver with different selectors; hetsched places one device class per driver and pod")
	}
	if len(combos) > maxDRAOptions {
		combos = combos[:maxDRAOptions]
	}
	base := t.Resources
	mainSpeed := combos[0].speed
	for i, c := range combos {
		res := resource.List{}
		for k, v := range base {
			res[k] = v
		}
		dc := map[string]string{}
		for _, u := range c.uses {
			res[resource.Name(u.typ)] += int64(u.count) * 1000
			dc[u.typ] = u.class
		}
		if i == 0 {
			t.Resources, t.DeviceClasses = res, dc
		} else {
			t.Alternatives = append(t.Alternatives, api.Alternative{Resources: res, DeviceClasses: dc, Speed: c.speed / mainSpeed})
		}
		plan.options = append(plan.options, c.uses)
	}
	plan.key = fmt.Sprint(plan.options)
	return t, plan, "", nil
}

// combo is one option: a choice for every request.
type combo struct {
	uses  []draUse
	speed float64
}

// combine is the options of a pod's requests: every way to pick one
// choice per request (in order: the first choices first), leaving out
// those that would ask one driver for two classes; capped.
func combine(perRequest [][]draChoice) []combo {
	out := []combo{{speed: 1e18}}
	for _, choices := range perRequest {
		var next []combo
		for _, c := range out {
			for _, ch := range choices {
				if conflicts(c.uses, ch.use) {
					continue
				}
				uses := append(slices.Clone(c.uses), ch.use)
				next = append(next, combo{uses: uses, speed: min(c.speed, ch.speed)})
				if len(next) >= 4*maxDRAOptions {
					break
				}
			}
		}
		out = next
	}
	return out
}

func conflicts(uses []draUse, u draUse) bool {
	for _, v := range uses {
		if v.typ == u.typ && v.class != u.class {
			return true
		}
	}
	return false
}

// claimChoices lists, per request of an unallocated claim, its choices.
func (da *draAllocator) claimChoices(claim *resourcev1.ResourceClaim, ci int, speeds map[string]float64) ([][]draChoice, string, error) {
	spec := &claim.Spec.Devices
	if len(spec.Constraints) > 0 {
		return nil, "", fmt.Errorf("constraints (matchAttribute, distinctAttribute) are not supported by hetsched yet")
	}
	var out [][]draChoice
	for ri, r := range spec.Requests {
		var subs []resourcev1.DeviceSubRequest
		names := []string{r.Name}
		switch {
		case r.Exactly != nil:
			e := r.Exactly
			if e.AdminAccess != nil && *e.AdminAccess {
				return nil, "", fmt.Errorf("requests[%d]: adminAccess is not supported by hetsched", ri)
			}
			subs = []resourcev1.DeviceSubRequest{{Name: r.Name, DeviceClassName: e.DeviceClassName, Selectors: e.Selectors, AllocationMode: e.AllocationMode, Count: e.Count, Capacity: e.Capacity}}
		case len(r.FirstAvailable) > 0:
			subs = r.FirstAvailable
			names = nil
			for _, sr := range subs {
				names = append(names, r.Name+"/"+sr.Name)
			}
		default:
			return nil, "", fmt.Errorf("requests[%d]: neither exactly nor firstAvailable", ri)
		}
		var choices []draChoice
		var missing []string
		for si, sr := range subs {
			if sr.AllocationMode == resourcev1.DeviceAllocationModeAll {
				return nil, "", fmt.Errorf("requests[%d]: allocationMode All is not supported by hetsched", ri)
			}
			if sr.Capacity != nil && len(sr.Capacity.Requests) > 0 {
				return nil, "", fmt.Errorf("requests[%d]: capacity requests are not supported by hetsched", ri)
			}
			count := sr.Count
			if count <= 0 {
				count = 1
			}
			if count > api.MaxNodeDevices {
				return nil, "", fmt.Errorf("requests[%d]: count %d is more than a node may hold", ri, count)
			}
			dc, err := da.classLst.Get(sr.DeviceClassName)
			if err != nil {
				missing = append(missing, "DeviceClass "+sr.DeviceClassName+" does not exist")
				continue
			}
			sel, err := da.devices.selector(dc, sr.Selectors)
			if err != nil {
				return nil, "", fmt.Errorf("requests[%d]: %v", ri, err)
			}
			drivers := da.devices.driversOf(sel)
			if len(drivers) == 0 {
				missing = append(missing, "no device matches request "+names[si])
				continue
			}
			speed := 1.0
			if v, ok := speeds[names[si]]; ok {
				speed = v
			} else if v, ok := speeds[sr.Name]; ok {
				speed = v
			}
			for _, dr := range drivers {
				choices = append(choices, draChoice{speed: speed, use: draUse{
					claim: ci, request: names[si], typ: draType(dr), class: sel.name, count: int(count),
					dcName: sr.DeviceClassName, reqName: r.Name,
				}})
			}
		}
		if len(choices) == 0 {
			return nil, strings.Join(missing, "; "), nil
		}
		out = append(out, choices)
	}
	return out, "", nil
}

// parseDRASpeeds reads AnnotationDRASpeeds.
func parseDRASpeeds(s string) (map[string]float64, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]float64{}
	for i, part := range strings.Split(s, ",") {
		if i >= 64 {
			return nil, fmt.Errorf("%s: at most 64 entries", AnnotationDRASpeeds)
		}
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		f, err := strconv.ParseFloat(v, 64)
		if !ok || k == "" || err != nil || !(f > 0 && f <= 1e6) {
			return nil, fmt.Errorf("%s: %q is not name=speed (a positive number)", AnnotationDRASpeeds, clip(part, 60))
		}
		out[k] = f
	}
	return out, nil
}

// claimName is the name of a pod's claim: its own, or the one made from
// its template (pod status); wait says why it is not known yet.
func claimName(pod *corev1.Pod, pc *corev1.PodResourceClaim) (string, string) {
	if pc.ResourceClaimName != nil {
		return *pc.ResourceClaimName, ""
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == pc.Name {
			if st.ResourceClaimName == nil {
				return "", ""
			}
			return *st.ResourceClaimName, ""
		}
	}
	tmpl := ""
	if pc.ResourceClaimTemplateName != nil {
		tmpl = *pc.ResourceClaimTemplateName
	}
	return "", "waiting for the ResourceClaim of template " + tmpl + " (kube-controller-manager makes it)"
}

// allocationNode is the node of a node-local allocation.
func allocationNode(a *resourcev1.AllocationResult) (string, error) {
	if a.NodeSelector == nil {
		return "", fmt.Errorf("its allocation names no node (network-attached devices are not supported by hetsched)")
	}
	for _, term := range a.NodeSelector.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0], nil
			}
		}
	}
	return "", fmt.Errorf("its allocation's node selector names no single node (network-attached devices are not supported by hetsched)")
}

func reservedFor(claim *resourcev1.ResourceClaim, uid types.UID) bool {
	for _, r := range claim.Status.ReservedFor {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// waitForClaim notes that the pod waits for the claim to change (under mu).
func (da *draAllocator) waitForClaim(key string, pod *corev1.Pod) {
	m := da.waiting[key]
	if m == nil {
		if len(da.waiting) >= 1<<16 {
			return // bounded; the pod is looked at again on its own changes
		}
		m = map[string]bool{}
		da.waiting[key] = m
	}
	m[pod.Namespace+"/"+pod.Name] = true
}

// markDRAWaiting notes that the pod waits for devices to appear (under mu).
func (da *draAllocator) markDRAWaiting(pod *corev1.Pod) {
	if len(da.noDevice) < 1<<16 {
		da.noDevice[pod.Namespace+"/"+pod.Name] = true
	}
}

// writtenClaim is a claim whose status this Scheduler changed for a pod.
type writtenClaim struct {
	ref       draClaimRef
	allocated bool // the allocation is this write's
}

// writeClaims allocates the pod's unallocated claims on the devices the
// engine placed it on and reserves every claim for the pod, as
// kube-scheduler's DynamicResources plugin does before the Binding. On an
// error the claims written so far are released.
func (da *draAllocator) writeClaims(ctx context.Context, pp placedPod, plan *draPlan) ([]writtenClaim, error) {
	ns, podName, _ := strings.Cut(pp.key, "/")
	oi := pp.chosen + 1
	if oi < 0 || oi >= len(plan.options) {
		return nil, fmt.Errorf("the placement's option %d is not the plan's", pp.chosen)
	}
	taken := map[api.DeviceRef]bool{}
	var written []writtenClaim
	for ci, ref := range plan.claims {
		_, name, _ := strings.Cut(ref.key, "/")
		claim, err := da.claimLst.ResourceClaims(ns).Get(name)
		if err != nil || claim.UID != ref.uid {
			da.releaseClaims(ctx, pp, written)
			return nil, apierrors.NewConflict(resourcev1.Resource("resourceclaims"), name, fmt.Errorf("claim changed"))
		}
		claim = claim.DeepCopy()
		w := writtenClaim{ref: ref}
		if claim.Status.Allocation == nil {
			if ref.allocated {
				da.releaseClaims(ctx, pp, written)
				return nil, apierrors.NewConflict(resourcev1.Resource("resourceclaims"), name, fmt.Errorf("claim deallocated"))
			}
			a, err := da.allocation(pp, claim, plan.options[oi], ci, taken)
			if err != nil {
				da.releaseClaims(ctx, pp, written)
				return nil, err
			}
			claim.Status.Allocation = a
			w.allocated = true
		} else if node, err := allocationNode(claim.Status.Allocation); err != nil || node != pp.node {
			da.releaseClaims(ctx, pp, written)
			return nil, apierrors.NewConflict(resourcev1.Resource("resourceclaims"), name, fmt.Errorf("claim allocated elsewhere"))
		}
		switch {
		case ref.group != nil && !reservedFor(claim, ref.group.uid):
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, ref.group.consumer())
		case ref.group == nil && !reservedFor(claim, pp.uid):
			claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourcev1.ResourceClaimConsumerReference{Resource: "pods", Name: podName, UID: pp.uid})
		}
		updated, err := da.updateClaim(ctx, claim, w.allocated)
		if err != nil {
			da.releaseClaims(ctx, pp, written)
			return nil, err
		}
		if w.allocated {
			w.ref.written = updated
		}
		written = append(written, w)
	}
	return written, nil
}

// updateClaim writes a claim's status (its finalizer first, when it gets
// an allocation) and returns the claim as written.
func (da *draAllocator) updateClaim(ctx context.Context, claim *resourcev1.ResourceClaim, allocating bool) (*resourcev1.ResourceClaim, error) {
	api := da.client.ResourceV1().ResourceClaims(claim.Namespace)
	if allocating && !slices.Contains(claim.Finalizers, claimFinalizer) {
		status := claim.Status
		claim.Finalizers = append(claim.Finalizers, claimFinalizer)
		var updated *resourcev1.ResourceClaim
		err := da.pods.retry(ctx, func(ctx context.Context) error {
			var err error
			updated, err = api.Update(ctx, claim, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return nil, err
		}
		claim = updated
		claim.Status = status
	}
	var out *resourcev1.ResourceClaim
	err := da.pods.retry(ctx, func(ctx context.Context) error {
		var err error
		out, err = api.UpdateStatus(ctx, claim, metav1.UpdateOptions{})
		return err
	})
	return out, err
}

// allocation builds a claim's allocation from the placement's devices.
func (da *draAllocator) allocation(pp placedPod, claim *resourcev1.ResourceClaim, uses []draUse, ci int, taken map[api.DeviceRef]bool) (*resourcev1.AllocationResult, error) {
	a := &resourcev1.AllocationResult{NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{pp.node}}},
	}}}}
	classes := map[string][]string{} // DeviceClass -> the requests that used it
	var classOrder []string
	for _, u := range uses {
		if u.claim != ci {
			continue
		}
		need := u.count
		for _, d := range pp.devices {
			if need == 0 {
				break
			}
			if d.Type != u.typ || taken[d] {
				continue
			}
			ref, devClasses, ok := da.devices.lookup(pp.node, d.Type, d.ID)
			if !ok || !slices.Contains(devClasses, u.class) {
				continue
			}
			if other := da.claimUsing(ref, claim.UID); other != "" {
				return nil, &deviceBusyError{device: ref, claim: other}
			}
			taken[d] = true
			need--
			a.Devices.Results = append(a.Devices.Results, resourcev1.DeviceRequestAllocationResult{Request: u.request, Driver: ref.driver, Pool: ref.pool, Device: ref.name})
		}
		if need > 0 {
			return nil, fmt.Errorf("request %s: the placement on %s lacks %d of its devices", u.request, pp.node, need)
		}
		if _, ok := classes[u.dcName]; !ok {
			classOrder = append(classOrder, u.dcName)
		}
		classes[u.dcName] = append(classes[u.dcName], u.request)
	}
	for _, name := range classOrder {
		dc, err := da.classLst.Get(name)
		if err != nil {
			return nil, fmt.Errorf("DeviceClass %s: %v", name, err)
		}
		for _, c := range dc.Spec.Config {
			a.Devices.Config = append(a.Devices.Config, resourcev1.DeviceAllocationConfiguration{Source: resourcev1.AllocationConfigSourceClass, Requests: classes[name], DeviceConfiguration: c.DeviceConfiguration})
		}
	}
	for _, c := range claim.Spec.Devices.Config {
		a.Devices.Config = append(a.Devices.Config, resourcev1.DeviceAllocationConfiguration{Source: resourcev1.AllocationConfigSourceClaim, Requests: c.Requests, DeviceConfiguration: c.DeviceConfiguration})
	}
	return a, nil
}

// releaseClaims undoes writeClaims for a pod that was not bound: it leaves
// the claims' consumers, and an allocation this Scheduler made for it goes
// when no one else uses the claim. Failures are logged: a claim left
// allocated is counted where it is (a claim task).
func (da *draAllocator) releaseClaims(ctx context.Context, pp placedPod, written []writtenClaim) {
	ns, _, _ := strings.Cut(pp.key, "/")
	for _, w := range written {
		_, name, _ := strings.Cut(w.ref.key, "/")
		err := da.pods.retry(ctx, func(ctx context.Context) error {
			claim, err := da.client.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if claim.UID != w.ref.uid {
				return nil
			}
			claim.Status.ReservedFor = slices.DeleteFunc(claim.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool {
				// The pod's own; a group's only when this bind allocated
				// the claim for it.
				return r.UID == pp.uid || w.allocated && w.ref.group != nil && r.UID == w.ref.group.uid
			})
			if w.allocated && len(claim.Status.ReservedFor) == 0 {
				claim.Status.Allocation = nil
			}
			_, err = da.client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			da.log.Warn("could not release a claim of a pod that was not bound", "claim", w.ref.key, "pod", pp.key, "err", err)
		}
	}
}

// claimTask is the task that holds an allocated claim's devices while no
// pod's task does.
func (da *draAllocator) claimTask(claim *resourcev1.ResourceClaim) (engine.Adoption, error) {
	node, err := allocationNode(claim.Status.Allocation)
	if err != nil {
		return engine.Adoption{}, err
	}
	var devs []api.DeviceRef
	res := resource.List{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		d, ok := da.devices.hetschedDevice(node, draDevice{driver: r.Driver, pool: r.Pool, name: r.Device})
		if !ok {
			return engine.Adoption{}, fmt.Errorf("device %s/%s/%s is not in node %s's ResourceSlices", r.Driver, r.Pool, r.Device, node)
		}
		devs = append(devs, d)
		res[resource.Name(d.Type)] += 1000
	}
	da.seq++
	t := api.Task{
		ID:          "claim-" + string(claim.UID) + "-" + strconv.Itoa(da.seq),
		Lease:       api.NoExpiry,
		Resources:   res,
		Tolerations: []string{"*"},
		Preemptible: boolPtr(false),
		Requeue:     boolPtr(false),
		Metadata:    map[string]string{metaNamespace: claim.Namespace, "resourceClaim": claim.Name},
	}
	if len(claim.Namespace)+len(claim.Name)+1 <= 253 {
		t.Name = claim.Namespace + "/" + claim.Name
	}
	if api.ValidateLabelValue(node) == nil && len(node) <= 63 {
		t.NodeSelector = map[string]string{api.NodeNameLabel: node}
	}
	return engine.Adoption{Task: t, Node: node, Devices: devs}, nil
}

// claimsAfterPod hands the claims a pod's task held to claim tasks when
// the task ends (under mu): in the same engine step (the adoption
// displaces the task), so that nothing takes the devices in between. It
// reports whether it did, and so ended the task.
func (da *draAllocator) claimsAfterPod(st *podState, b *podBatch) bool {
	if len(st.draHeld) == 0 {
		return false
	}
	displaced := false
	for _, ref := range st.draHeld {
		if da.holders[ref.uid] == st.task {
			delete(da.holders, ref.uid)
		}
		ns, name, _ := strings.Cut(ref.key, "/")
		claim, err := da.claimLst.ResourceClaims(ns).Get(name)
		if err != nil || claim.UID != ref.uid || da.pseudo[ref.uid] != "" {
			continue
		}
		if claim.Status.Allocation == nil && olderThan(claim, ref.written) {
			claim = ref.written // the informer has not seen this scheduler's own allocation yet
		}
		if claim.Status.Allocation == nil {
			continue
		}
		a, err := da.claimTask(claim)
		if err != nil {
			da.log.Warn("an allocated claim's devices are not counted", "claim", ref.key, "err", err)
			continue
		}
		a.Displace = []string{st.task}
		b.adopt = append(b.adopt, a)
		da.pseudo[ref.uid] = a.Task.ID
		da.claimUID[ref.key] = ref.uid
		displaced = true
	}
	st.draHeld = nil
	return displaced
}

// olderThan reports whether seen is a version of the claim from before
// written (nil: false). Resource versions are opaque to clients, but the
// API server's, from etcd, are increasing integers; when either is not
// one, nothing is assumed.
func olderThan(seen, written *resourcev1.ResourceClaim) bool {
	if written == nil || written.UID != seen.UID {
		return false
	}
	a, err1 := strconv.ParseUint(seen.ResourceVersion, 10, 64)
	b, err2 := strconv.ParseUint(written.ResourceVersion, 10, 64)
	return err1 == nil && err2 == nil && a < b
}

// reconcileClaims brings claim tasks in line with changed claims: an
// allocated claim no pod's task holds gets one, a deallocated or deleted
// claim's goes; pods waiting for a claim are looked at again.
func (da *draAllocator) reconcileClaims(ctx context.Context, keys []string) {
	if len(keys) == 0 {
		return
	}
	var b podBatch
	da.mu.Lock()
	for _, key := range keys {
		for p := range da.waiting[key] {
			da.dirty.addPodKey(p)
		}
		delete(da.waiting, key)
		ns, name, _ := strings.Cut(key, "/")
		claim, err := da.claimLst.ResourceClaims(ns).Get(name)
		if err != nil {
			da.noteAllocation(key, nil)
		} else {
			da.noteAllocation(key, claim)
		}
		if old, ok := da.claimUID[key]; ok && (err != nil || claim.UID != old || claim.Status.Allocation == nil) {
			if id := da.pseudo[old]; id != "" {
				b.end = append(b.end, endTask{id: id})
				delete(da.pseudo, old)
			}
			delete(da.claimUID, key)
		}
		if err != nil || claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.ReservedFor {
			da.dirty.addPodKey(ns + "/" + r.Name)
		}
		if da.holders[claim.UID] != "" || da.pseudo[claim.UID] != "" {
			continue
		}
		a, err := da.claimTask(claim)
		if err != nil {
			da.log.Warn("an allocated claim's devices are not counted yet", "claim", key, "err", err)
			da.unmapped[key] = true
			continue
		}
		delete(da.unmapped, key)
		b.adopt = append(b.adopt, a)
		da.pseudo[claim.UID] = a.Task.ID
		da.claimUID[key] = claim.UID
	}
	da.mu.Unlock()
	da.pods.apply(ctx, &b)
}

// deviceBusyError says a device the engine chose is still allocated to
// another claim (one whose pod ended and that kube-controller-manager has
// not deallocated yet, or one another scheduler allocated meanwhile).
type deviceBusyError struct {
	device draDevice
	claim  string // its key
}

func (e *deviceBusyError) Error() string {
	return "device " + e.device.driver + "/" + e.device.pool + "/" + e.device.name + " is still allocated to ResourceClaim " + e.claim
}

// claimUsing is the key of the claim other than self whose allocation
// holds the device ("" when none).
func (da *draAllocator) claimUsing(d draDevice, self types.UID) string {
	da.mu.Lock()
	defer da.mu.Unlock()
	if u, ok := da.inUse[d]; ok && u.uid != self {
		return u.key
	}
	return ""
}

// claimUse is the claim an allocated device is for.
type claimUse struct {
	key string
	uid types.UID
}

// noteAllocation records which devices an allocated claim holds (under
// mu); a nil claim forgets the key's.
func (da *draAllocator) noteAllocation(key string, claim *resourcev1.ResourceClaim) {
	for _, d := range da.allocs[key] {
		if da.inUse[d].key == key {
			delete(da.inUse, d)
		}
	}
	delete(da.allocs, key)
	if claim == nil || claim.Status.Allocation == nil {
		return
	}
	var devs []draDevice
	for _, r := range claim.Status.Allocation.Devices.Results {
		d := draDevice{driver: r.Driver, pool: r.Pool, name: r.Device}
		devs = append(devs, d)
		da.inUse[d] = claimUse{key: key, uid: claim.UID}
	}
	da.allocs[key] = devs
}

// waitForBusyDevice unplaces a placement whose device another claim still
// holds: the pod waits for that claim to change (under mu; releases it).
func (s *Scheduler) waitForBusyDevice(ctx context.Context, st *podState, pp placedPod, busy *deviceBusyError) {
	ns, name, _ := strings.Cut(pp.key, "/")
	_, stillBusy := s.dra.inUse[busy.device]
	if pod, err := s.podLst.Pods(ns).Get(name); err == nil && stillBusy {
		s.dra.waitForClaim(busy.claim, pod)
	}
	if st.binding == pp.task {
		st.binding = ""
	}
	delete(s.tasks, pp.task)
	st.task = ""
	s.dra.setPlan(st, nil)
	s.mu.Unlock()
	if err := s.eng.Cancel(ctx, pp.task); err != nil && ctx.Err() == nil {
		s.log.Debug("cancelling a placement on a busy device", "task", pp.task, "err", err)
	}
	s.dec.reportUnschedulable(ctx, pp.key, pp.uid, busy.Error())
	if !stillBusy {
		s.dirty.addPodKey(pp.key)
	}
}

// retryUnmapped marks the allocated claims whose devices were not known
// changed again (a node's slices may have brought them).
func (da *draAllocator) retryUnmapped() {
	da.mu.Lock()
	defer da.mu.Unlock()
	for k := range da.unmapped {
		da.dirty.add(&da.dirty.claims, k)
	}
}

// setPlan sets the claims plan of st's task (under mu), keeping the set
// of pods with one (draPods: what draRecheck looks at, not every pod).
func (da *draAllocator) setPlan(st *podState, plan *draPlan) {
	st.dra = plan
	if plan == nil {
		delete(da.planned, st.uid)
	} else {
		da.planned[st.uid] = st
	}
}
