package kube

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/api"
)

// PodGroupResource is scheduler-plugins' PodGroup (coscheduling): a gang
// of the pods labelled scheduling.x-k8s.io/pod-group with its name.
var PodGroupResource = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}

// servesResource reports whether the API server serves gvr (asked with a
// deadline: the client has none of its own).
func servesResource(ctx context.Context, d discovery.DiscoveryInterface, gvr schema.GroupVersionResource) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var list metav1.APIResourceList
	err := d.RESTClient().Get().AbsPath("/apis", gvr.Group, gvr.Version).Do(cctx).Into(&list)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range list.APIResources {
		if r.Name == gvr.Resource {
			return true, nil
		}
	}
	return false, nil
}

// podGroupIndex indexes cached pods by "namespace/podgroup", of the
// label LabelPodGroup, or by k8sGangPrefix+"namespace/podgroup", of
// spec.schedulingGroup; pods without either are in no index entry. It is the
// pod informer's only index: the namespace index client-go's informers
// keep was read only to find a PodGroup's pods, and keeping it up to
// date was 2.5 % of hetsched kube's CPU in a bench window (every pod of
// a namespace in one set; BENCHMARKS.md, runs AF).
const podGroupIndex = "podgroup"

// podIndexers are the pod informer's indexers (a new map each time: an
// informer's AddIndexers writes into the one it was made with).
func podIndexers() cache.Indexers { return cache.Indexers{podGroupIndex: podGroupKeys} }

func podGroupKeys(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if sg := p.Spec.SchedulingGroup; sg != nil && sg.PodGroupName != nil {
		return []string{k8sGangPrefix + p.Namespace + "/" + *sg.PodGroupName}, nil
	}
	g, ok := p.Labels[LabelPodGroup]
	if !ok || g == "" {
		return nil, nil
	}
	return []string{p.Namespace + "/" + g}, nil
}

// startPodGroups reads PodGroups when the CRD is installed; a change of
// a PodGroup marks its pods dirty. Without the CRD, pods that name a
// PodGroup wait with that reason.
func (s *Scheduler) startPodGroups(ctx context.Context) error {
	changed := func(o any) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
				u, _ = d.Obj.(*unstructured.Unstructured)
			}
		}
		if u == nil {
			return
		}
		keys, err := s.podIdx.IndexKeys(podGroupIndex, u.GetNamespace()+"/"+u.GetName())
		if err != nil {
			return
		}
		for _, k := range keys {
			s.dirty.addPodKey(k)
		}
	}
	ls, err := s.watchCustom(ctx, "PodGroups (gangs come from annotations only)", []schema.GroupVersionResource{PodGroupResource},
		[]cache.ResourceEventHandler{cache.ResourceEventHandlerFuncs{AddFunc: changed, UpdateFunc: func(_, o any) { changed(o) }, DeleteFunc: changed}})
	if err != nil || ls == nil {
		return err
	}
	s.groups = ls[0]
	return nil
}

// watchCustom starts informers on custom resources when the cluster
// serves the first of them (one group, served together), each with its
// handler, and returns their listers once synced; nil when the resources
// are not served (what names what is then off, for the log).
func (s *Scheduler) watchCustom(ctx context.Context, what string, gvrs []schema.GroupVersionResource, hs []cache.ResourceEventHandler) ([]cache.GenericLister, error) {
	if s.cfg.Dynamic == nil {
		return nil, nil
	}
	ok, err := servesResource(ctx, s.client.Discovery(), gvrs[0])
	if err != nil {
		s.log.Warn("cannot tell whether the cluster serves "+gvrs[0].Resource+"; off: "+what, "err", err)
	}
	if err != nil || !ok {
		return nil, nil
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(s.cfg.Dynamic, 0)
	s.factories = append(s.factories, f)
	var synced []cache.InformerSynced
	var out []cache.GenericLister
	for i, gvr := range gvrs {
		inf := f.ForResource(gvr)
		if _, err := inf.Informer().AddEventHandler(hs[i]); err != nil {
			return nil, err
		}
		synced = append(synced, inf.Informer().HasSynced)
		out = append(out, inf.Lister())
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, ctx.Err()
	}
	return out, nil
}

// podGroup is gangOf's lookup: a PodGroup's minMember and
// scheduleTimeoutSeconds.
func (s *Scheduler) podGroup(ns, name string) (int, time.Duration, bool) {
	if s.groups == nil {
		return 0, 0, false
	}
	o, err := s.groups.ByNamespace(ns).Get(name)
	if err != nil {
		return 0, 0, false
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return 0, 0, false
	}
	minMember, found, err := unstructured.NestedInt64(u.Object, "spec", "minMember")
	if err != nil || !found || minMember < 1 {
		minMember = 1
	}
	minMember = min(minMember, api.MaxShards) // a job holds no more tasks
	var timeout time.Duration
	if secs, found, err := unstructured.NestedInt64(u.Object, "spec", "scheduleTimeoutSeconds"); err == nil && found && secs > 0 {
		timeout = time.Duration(secs) * time.Second
	}
	return int(minMember), timeout, true
}
