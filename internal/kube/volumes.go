package kube

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/api"
)

// Volumes, as kube-scheduler's VolumeBinding, VolumeZone and
// VolumeRestrictions (ReadWriteOncePod) read a pod's persistent volume
// claims (its own, and its ephemeral volumes' claims):
//   - a claim that does not exist, or is being deleted, keeps the pod
//     waiting, saying so;
//   - a bound claim's volume constrains the nodes: its node affinity,
//     and its zone and region labels, join the pod's required node
//     affinity;
//   - an unbound claim of an Immediate class keeps the pod waiting (the
//     volume controller binds it);
//   - an unbound claim of a WaitForFirstConsumer class takes a matching
//     available volume (its class, capacity, access modes, volume mode,
//     selector) on the chosen node, its claimRef written before the
//     Binding; without one, a class that provisions gets the node in the
//     claim's volume.kubernetes.io/selected-node annotation (the nodes
//     its allowedTopologies admit);
//   - a ReadWriteOncePod claim another pod uses keeps the pod waiting.
//
// CSI attach limits per node (NodeVolumeLimits) are a resource
// (csilimits.go).

// AnnotationSelectedNode is where a provisioner learns the node of a
// WaitForFirstConsumer claim.
const AnnotationSelectedNode = "volume.kubernetes.io/selected-node"

// volumeWatch is the claims, volumes and classes the pods' volumes read.
// A waiting pod whose task was made from them is made again when they
// change (version, as namespaceWatch's).
type volumeWatch struct {
	pvcs    corelisters.PersistentVolumeClaimLister
	pvs     corelisters.PersistentVolumeLister
	classes storagelisters.StorageClassLister
	infs    []cache.SharedIndexInformer
	version atomic.Uint64
	// assumed are the volumes chosen for a claim but not yet seen bound:
	// volume name -> claim key.
	mu      sync.Mutex
	assumed map[string]string
}

func newVolumeWatch(f informers.SharedInformerFactory) *volumeWatch {
	w := &volumeWatch{pvcs: f.Core().V1().PersistentVolumeClaims().Lister(), pvs: f.Core().V1().PersistentVolumes().Lister(),
		classes: f.Storage().V1().StorageClasses().Lister(), assumed: map[string]string{}}
	w.infs = []cache.SharedIndexInformer{f.Core().V1().PersistentVolumeClaims().Informer(),
		f.Core().V1().PersistentVolumes().Informer(), f.Storage().V1().StorageClasses().Informer()}
	w.version.Store(1)
	return w
}

// watch calls changed after every change of a claim, volume or class.
func (w *volumeWatch) watch(changed func()) error {
	bump := func(o any) {
		if pv, ok := o.(*corev1.PersistentVolume); ok && pv.Spec.ClaimRef != nil {
			w.forget(pv.Name) // seen claimed: no longer only assumed
		}
		w.version.Add(1)
		changed()
	}
	for _, inf := range w.infs {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: bump, UpdateFunc: func(_, o any) { bump(o) }, DeleteFunc: bump}); err != nil {
			return err
		}
	}
	return nil
}

// volumePlan is what binding a pod's volumes takes once it is placed.
type volumePlan struct {
	static    []staticClaim // claims to bind to an available volume
	provision []string      // claim keys to annotate with the node
}

// staticClaim is an unbound claim and the volumes that may take it.
type staticClaim struct {
	claim      *corev1.PersistentVolumeClaim
	candidates []*corev1.PersistentVolume
}

// podClaims lists the pod's claim names (its persistentVolumeClaim
// volumes and its ephemeral volumes' claims, <pod>-<volume>).
func podClaims(pod *corev1.Pod) []string {
	var out []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out = append(out, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			out = append(out, pod.Name+"-"+v.Name)
		}
	}
	return out
}

// plan reads the pod's claims: what it waits for (wait), the node
// affinity its volumes add (terms: one of each must hold, nil for none),
// and what binding them takes.
func (w *volumeWatch) plan(pod *corev1.Pod, podsUsing func(ns, claim string) []string) (terms [][]string, plan *volumePlan, wait string, err error) {
	plan = &volumePlan{}
	for _, name := range podClaims(pod) {
		key := pod.Namespace + "/" + name
		pvc, gerr := w.pvcs.PersistentVolumeClaims(pod.Namespace).Get(name)
		switch {
		case gerr != nil:
			return nil, nil, "persistentvolumeclaim " + key + " not found", nil
		case pvc.DeletionTimestamp != nil:
			return nil, nil, "persistentvolumeclaim " + key + " is being deleted", nil
		}
		if slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteOncePod) {
			for _, other := range podsUsing(pod.Namespace, name) {
				if other != pod.Name {
					return nil, nil, "persistentvolumeclaim " + key + " is ReadWriteOncePod and pod " + other + " uses it", nil
				}
			}
		}
		t, w2, err := w.claimTerms(pvc, plan)
		if err != nil || w2 != "" {
			return nil, nil, w2, err
		}
		if t != nil {
			terms = append(terms, t)
		}
	}
	return terms, plan, "", nil
}

// claimTerms is one claim's node terms (nil: any node).
func (w *volumeWatch) claimTerms(pvc *corev1.PersistentVolumeClaim, plan *volumePlan) ([]string, string, error) {
	key := pvc.Namespace + "/" + pvc.Name
	if pvc.Spec.VolumeName != "" {
		pv, err := w.pvs.Get(pvc.Spec.VolumeName)
		if err != nil {
			return nil, "persistentvolume " + pvc.Spec.VolumeName + " of claim " + key + " not found", nil
		}
		t, err := pvTerms(pv)
		return t, "", err
	}
	class := ""
	if pvc.Spec.StorageClassName != nil {
		class = *pvc.Spec.StorageClassName
	}
	var sc *storagev1.StorageClass
	if class != "" {
		var err error
		if sc, err = w.classes.Get(class); err != nil {
			return nil, "storageclass " + class + " of claim " + key + " not found", nil
		}
	}
	if sc == nil || sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
		return nil, "unbound immediate persistentvolumeclaim " + key + " (the volume controller binds it)", nil
	}
	cands, err := w.candidates(pvc, class)
	if err != nil {
		return nil, "", err
	}
	if len(cands) > 0 {
		plan.static = append(plan.static, staticClaim{claim: pvc, candidates: cands})
		var terms []string
		for _, pv := range cands {
			t, err := pvTerms(pv)
			if err != nil {
				return nil, "", err
			}
			if t == nil {
				return nil, "", nil // one may go anywhere
			}
			terms = append(terms, t...)
		}
		return terms, "", nil
	}
	if sc.Provisioner == "kubernetes.io/no-provisioner" {
		return nil, "no available persistentvolume matches claim " + key + ", and class " + class + " provisions none", nil
	}
	plan.provision = append(plan.provision, key)
	return topologyTerms(sc.AllowedTopologies), "", nil
}

// candidates are the available volumes that may take pvc: unclaimed (or
// claimed for it), of its class and volume mode, as large as it asks,
// with its access modes, matching its selector, not chosen for another.
func (w *volumeWatch) candidates(pvc *corev1.PersistentVolumeClaim, class string) ([]*corev1.PersistentVolume, error) {
	all, err := w.pvs.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	want := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	key := pvc.Namespace + "/" + pvc.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*corev1.PersistentVolume
	for _, pv := range all {
		if ref := pv.Spec.ClaimRef; ref != nil && (ref.Namespace != pvc.Namespace || ref.Name != pvc.Name) {
			continue
		}
		if by, ok := w.assumed[pv.Name]; ok && by != key {
			continue
		}
		mode := func(m *corev1.PersistentVolumeMode) corev1.PersistentVolumeMode {
			if m == nil {
				return corev1.PersistentVolumeFilesystem
			}
			return *m
		}
		capa := pv.Spec.Capacity[corev1.ResourceStorage]
		if pv.Spec.StorageClassName != class || mode(pv.Spec.VolumeMode) != mode(pvc.Spec.VolumeMode) || capa.Cmp(want) < 0 ||
			pv.Status.Phase != corev1.VolumeAvailable || pv.DeletionTimestamp != nil {
			continue
		}
		if !slices.ContainsFunc(pvc.Spec.AccessModes, func(m corev1.PersistentVolumeAccessMode) bool { return !slices.Contains(pv.Spec.AccessModes, m) }) &&
			selectorMatches(pvc.Spec.Selector, pv.Labels) {
			out = append(out, pv)
		}
	}
	// The smallest first, as the volume binder takes them.
	slices.SortFunc(out, func(a, b *corev1.PersistentVolume) int {
		ca, cb := a.Spec.Capacity[corev1.ResourceStorage], b.Spec.Capacity[corev1.ResourceStorage]
		if c := ca.Cmp(cb); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}

// pvTerms is a volume's node terms: its required node affinity, and its
// zone and region labels (VolumeZone; a value may list zones joined by
// "__"), nil when it has neither.
func pvTerms(pv *corev1.PersistentVolume) ([]string, error) {
	var zone []string
	for _, k := range []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion} {
		if v, ok := pv.Labels[k]; ok {
			r, err := affinityRequirement(k, corev1.NodeSelectorOpIn, strings.Split(v, "__"))
			if err != nil {
				return nil, fmt.Errorf("persistentvolume %s: label %s: %v", pv.Name, k, err)
			}
			zone = append(zone, r)
		}
	}
	var terms []string
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		for i, term := range na.Required.NodeSelectorTerms {
			reqs, err := nodeTermRequirements(fmt.Sprintf("persistentvolume %s: nodeAffinity.required.nodeSelectorTerms[%d]", pv.Name, i), term)
			if err != nil {
				return nil, err
			}
			if len(reqs) > 0 {
				terms = append(terms, strings.Join(append(reqs, zone...), ","))
			}
		}
	}
	if len(terms) == 0 && len(zone) > 0 {
		terms = []string{strings.Join(zone, ",")}
	}
	return terms, nil
}

// topologyTerms is a class's allowedTopologies as node terms.
func topologyTerms(topos []corev1.TopologySelectorTerm) []string {
	var out []string
	for _, t := range topos {
		var reqs []string
		for _, e := range t.MatchLabelExpressions {
			if r, err := affinityRequirement(e.Key, corev1.NodeSelectorOpIn, e.Values); err == nil {
				reqs = append(reqs, r)
			}
		}
		if len(reqs) > 0 {
			out = append(out, strings.Join(reqs, ","))
		}
	}
	return out
}

// joinTerms is the node affinity of a pod whose own terms are own and
// whose volumes add vols: every combination of one of each.
func joinTerms(own []string, vols [][]string) ([]string, error) {
	out := own
	for _, v := range vols {
		if len(out) == 0 {
			out = slices.Clone(v)
			continue
		}
		var next []string
		for _, a := range out {
			for _, b := range v {
				next = append(next, a+","+b)
			}
		}
		out = next
		if len(out) > api.MaxAffinityTerms {
			return nil, fmt.Errorf("volumes: their node affinity with the pod's makes more than %d terms", api.MaxAffinityTerms)
		}
	}
	return out, nil
}

// bind binds the planned claims for a pod placed on node (labels): a
// static claim gets the smallest candidate whose node terms admit the
// node (its claimRef written), a provisioned one the node's annotation.
func (w *volumeWatch) bind(ctx context.Context, client kubernetes.Interface, node string, labels map[string]string, plan *volumePlan) error {
	for _, sc := range plan.static {
		pv, err := w.pick(sc, node, labels)
		if err != nil {
			return err
		}
		pv = pv.DeepCopy()
		pv.Spec.ClaimRef = &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
			Namespace: sc.claim.Namespace, Name: sc.claim.Name, UID: sc.claim.UID, ResourceVersion: sc.claim.ResourceVersion}
		if _, err := client.CoreV1().PersistentVolumes().Update(ctx, pv, metav1.UpdateOptions{}); err != nil {
			w.forget(pv.Name)
			return fmt.Errorf("binding persistentvolume %s to claim %s/%s: %w", pv.Name, sc.claim.Namespace, sc.claim.Name, err)
		}
	}
	for _, key := range plan.provision {
		ns, name, _ := cache.SplitMetaNamespaceKey(key)
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, AnnotationSelectedNode, node)
		if _, err := client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("selecting node %s for claim %s: %w", node, key, err)
		}
	}
	return nil
}

// pick chooses and assumes the candidate of sc for node.
func (w *volumeWatch) pick(sc staticClaim, node string, labels map[string]string) (*corev1.PersistentVolume, error) {
	with := map[string]string{api.NodeNameLabel: node}
	for k, v := range labels {
		with[k] = v
	}
	key := sc.claim.Namespace + "/" + sc.claim.Name
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, pv := range sc.candidates {
		if by, ok := w.assumed[pv.Name]; ok && by != key {
			continue
		}
		terms, err := pvTerms(pv)
		if err != nil {
			continue
		}
		if len(terms) == 0 || slices.ContainsFunc(terms, func(t string) bool {
			sel, err := api.ParseSelector(t)
			return err == nil && sel.MatchesMap(with)
		}) {
			w.assumed[pv.Name] = key
			return pv, nil
		}
	}
	return nil, fmt.Errorf("no available persistentvolume for claim %s on node %s", key, node)
}

// forget drops an assumed volume (its claimRef was not written, or the
// volume is seen bound).
func (w *volumeWatch) forget(pv string) {
	w.mu.Lock()
	delete(w.assumed, pv)
	w.mu.Unlock()
}

// selectorMatches reports whether a claim's volume selector admits a
// volume's labels (no selector: every volume).
func selectorMatches(sel *metav1.LabelSelector, l map[string]string) bool {
	if sel == nil {
		return true
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(l))
}

// volumeTerms adds the node affinity of pod's volumes to t, or says what
// it waits for; the pod's podState remembers what they were made at.
func (s *Scheduler) volumeTerms(pod *corev1.Pod, t *api.Task) (wait string, err error) {
	if len(podClaims(pod)) == 0 {
		return "", nil
	}
	terms, _, wait, err := s.vol.plan(pod, s.podsUsing)
	if err != nil || wait != "" {
		return wait, err
	}
	t.NodeAffinity, err = joinTerms(t.NodeAffinity, terms)
	return "", err
}

// podsUsing lists the pods of ns (not ended) whose volumes use claim. It
// walks the pod cache (which has no namespace index): only a
// ReadWriteOncePod claim asks.
func (s *Scheduler) podsUsing(ns, claim string) []string {
	var out []string
	for _, o := range s.podIdx.List() {
		if p, ok := o.(*corev1.Pod); ok && p.Namespace == ns && !podEnded(p) && slices.Contains(podClaims(p), claim) {
			out = append(out, p.Name)
		}
	}
	return out
}

// bindVolumes binds the claims of the pod req places, before its Binding.
func (s *Scheduler) bindVolumes(ctx context.Context, pp placedPod) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(pp.key)
	pod, err := s.podLst.Pods(ns).Get(name)
	if err != nil || pod.UID != pp.uid || len(podClaims(pod)) == 0 {
		return nil
	}
	_, plan, wait, err := s.vol.plan(pod, s.podsUsing)
	if err != nil {
		return err
	}
	if wait != "" {
		return fmt.Errorf("volumes: %s", wait)
	}
	if len(plan.static) == 0 && len(plan.provision) == 0 {
		return nil
	}
	node, err := s.nodeLst.Get(pp.node)
	if err != nil {
		return fmt.Errorf("node %s: %w", pp.node, err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	return s.vol.bind(cctx, s.client, pp.node, node.Labels, plan)
}

// replanVolumes marks the pods whose tasks or waits were made from
// claims, volumes and classes at an older version, to be looked at again.
func (s *Scheduler) replanVolumes() {
	v := s.vol.version.Load()
	s.mu.Lock()
	var keys []string
	for _, st := range s.byUID {
		if st.volVersion != 0 && st.volVersion != v && !st.bound && st.binding == "" {
			keys = append(keys, st.key)
		}
	}
	s.mu.Unlock()
	for _, k := range keys {
		s.dirty.addPodKey(k)
	}
}
