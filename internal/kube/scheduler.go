package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/kube/kubewire"
	"k8s.io/client-go/informers/internalinterfaces"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedlisters "k8s.io/client-go/listers/scheduling/v1"
	schedv1a2listers "k8s.io/client-go/listers/scheduling/v1alpha2"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
)

// DefaultSchedulerName is the schedulerName of the pods hetsched places.
const DefaultSchedulerName = "hetsched"

// Config configures a Scheduler.
type Config struct {
	// Client talks to the API server (its QPS and burst are the caller's).
	Client kubernetes.Interface
	// Engine is the engine that decides; the Scheduler is its only front
	// end for writes (it owns the engine's nodes and tasks).
	Engine *engine.Engine
	// SchedulerName selects the pods to place (default "hetsched").
	SchedulerName string
	// Tiers maps pod priorities to tiers (default DefaultPriorityTiers).
	Tiers *PriorityTiers
	// DeviceResources are the extended resources counted as devices
	// (default DefaultDeviceResources).
	DeviceResources []string
	// BindWorkers is how many Bindings are in flight at once (default 128).
	BindWorkers int
	// RequestTimeout bounds every API call (default 10s).
	RequestTimeout time.Duration
	// EvictionTimeout is how long an eviction a PodDisruptionBudget
	// refuses is tried again before the pod is kept (default 1m).
	EvictionTimeout time.Duration
	Logger          *slog.Logger
	// Dynamic, when set, reads PodGroups (scheduling.x-k8s.io), Queues and
	// the ResourceSchedule (hetsched.io) where the cluster serves them.
	Dynamic dynamic.Interface
	// Policy is the engine's scheduling policy, BasePolicy the one that
	// holds without a ResourceSchedule naming one: a ResourceSchedule (or
	// its deletion) asking for another than Policy ends Run with
	// ErrRebuild.
	Policy, BasePolicy string
	// Registerer, when set, gets the front end's metrics (metrics.go).
	Registerer prometheus.Registerer
	// Binder posts the Bindings (kubewire.NewBinder); nil: client-go's
	// Bind through Client.
	Binder kubewire.Binder
	// PodInformer, when set, makes the Pod informer (the lean watch,
	// kubewire.PodInformer); nil: client-go's, through Client.
	PodInformer internalinterfaces.NewInformerFunc
	// NoDefaultSpread leaves out the cluster's default topology spread
	// (defaultspread.go), as kube-scheduler's PodTopologySpread does with
	// defaultingType List and no defaultConstraints; it then watches no
	// Services, ReplicationControllers, ReplicaSets or StatefulSets.
	NoDefaultSpread bool
}

// Scheduler is the Kubernetes front end: it mirrors Nodes and Pods into
// the engine and carries the engine's decisions back to the cluster. See
// the package doc.
type Scheduler struct {
	cfg      Config
	log      *slog.Logger
	eng      *engine.Engine
	client   kubernetes.Interface
	binder   kubewire.Binder
	nodes    nodeTranslator
	pods     podTranslator
	factory  informers.SharedInformerFactory
	podLst   corelisters.PodLister
	podIdx   cache.Indexer // the pod informer's store, podIndexers among its indexes
	nodeLst  corelisters.NodeLister
	classLst schedlisters.PriorityClassLister
	ns       *namespaceWatch // namespaceSelectors resolved (namespaces.go)
	vol      *volumeWatch    // persistent volume claims read (volumes.go)
	csi      *csiLimits      // CSI attach limits (csilimits.go)
	recorder events.EventRecorder
	bcast    events.EventBroadcaster

	m      *kubeMetrics
	groups cache.GenericLister // PodGroups; nil when not served
	// k8sGroupLst lists Kubernetes' PodGroups (nil when not served) and
	// groupConds writes their conditions (workloads.go).
	k8sGroupLst schedv1a2listers.PodGroupLister
	groupConds  latest[metav1.Condition]
	// dra is the DRA allocator (dra.go, dra_claims.go); its listers are
	// nil where the cluster does not serve resource.k8s.io/v1.
	dra  *draAllocator
	crds *crds // hetsched.io's Queues and ResourceSchedule (crds.go); nil where not served
	// rec brings pods and nodes to the engine (reconcile.go); dec carries
	// the engine's decisions back (decisions.go).
	rec reconciler
	dec decisions
	// rebuildCh ends Run with ErrRebuild.
	rebuildCh chan struct{}
	// bg counts the goroutines Run started besides its loops (evictions,
	// placements waiting for evictions, condition writers, retries): Run
	// returns after them.
	bg sync.WaitGroup
	// factories are the custom resources' informer factories (shut down
	// when Run returns).
	factories []dynamicinformer.DynamicSharedInformerFactory
	dirty     dirtySet // pods and nodes to reconcile (its own lock)

	mu    sync.Mutex // guards the fields below
	byUID map[types.UID]*podState
	byKey map[string]types.UID // namespace/name -> uid of the pod tracked under it
	tasks map[string]types.UID // task id -> pod
	gangs map[string]*gangState
	// nsQueues is the ResourceSchedule's queue per namespace (under mu).
	nsQueues map[string]string
}

// podState is what the Scheduler tracks of one pod.
type podState struct {
	uid  types.UID
	key  string // namespace/name
	task string // the task standing for it now ("" while it has none)
	// n counts the tasks the pod has had, for fresh ids.
	n int
	// bound: the pod runs on node (bound by this Scheduler, or adopted).
	bound bool
	node  string
	// binding is the task whose Binding is queued or in flight ("":
	// none). It outlives the task when the task ends meanwhile: the bind
	// worker clears it.
	binding string
	// evicting: the pod was asked to leave its node and is still there
	// (counted in Scheduler.evictions).
	evicting bool
	// keep: a PodDisruptionBudget refused the pod's eviction; it is not
	// preempted again.
	keep bool
	// invalid is why the pod cannot be a task (its spec), reported once.
	invalid string
	// reported is the last unschedulable reason reported, and when.
	reported   string
	reportedAt time.Time
	gang       string
	// dra is how the task stands for the pod's claims (nil: no claims);
	// draHeld the claims its task allocated and holds the devices of.
	dra     *draPlan
	draHeld []draClaimRef
	// nsVersion is the namespaces' version its task was made at, when a
	// namespaceSelector made it (0: none did; namespaces.go).
	nsVersion uint64
	// counted is what a running pod's task was made from (countedAs):
	// when it changes (a resize, new labels) the task is made again.
	counted string
	// volVersion is the volumes' version its task or wait was made at
	// (0: it has no claims), volTerms the node terms its volumes added
	// (volumes.go).
	volVersion uint64
	volTerms   string
}

// gangState collects a gang's pods until min of them wait.
type gangState struct {
	spec    gangSpec    // the latest member's, until the gang forms
	waiting []types.UID // members not submitted yet
	// jobs counts the jobs submitted for the gang (0 again when one ended
	// without starting); started is set once a member was bound.
	jobs    int
	seq     int // jobs made for the gang in all (their ids)
	started bool
	members int // tracked pods in the gang; at 0 the state goes
	// bound counts the members bound; scheduled is set once a Kubernetes
	// PodGroup's condition was set to Scheduled (workloads.go).
	bound     int
	scheduled bool
	// domain is the value of spec.required that the first bound member's
	// node has: later members are kept to it.
	domain string
}

// New makes a Scheduler; Run starts it.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Client == nil || cfg.Engine == nil {
		return nil, errors.New("kube: a client and an engine are required")
	}
	if cfg.SchedulerName == "" {
		cfg.SchedulerName = DefaultSchedulerName
	}
	if cfg.Tiers == nil {
		t := DefaultPriorityTiers
		cfg.Tiers = &t
	}
	if cfg.DeviceResources == nil {
		cfg.DeviceResources = DefaultDeviceResources
	}
	if cfg.BindWorkers <= 0 {
		cfg.BindWorkers = 128
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.EvictionTimeout <= 0 {
		cfg.EvictionTimeout = time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Scheduler{
		cfg: cfg, log: cfg.Logger, eng: cfg.Engine, client: cfg.Client,
		nodes:     newNodeTranslator(cfg.DeviceResources),
		dirty:     newDirtySet(),
		rebuildCh: make(chan struct{}, 1),
		m:         newKubeMetrics(cfg.Registerer),
		byUID:     map[types.UID]*podState{}, byKey: map[string]types.UID{}, tasks: map[string]types.UID{},
		gangs: map[string]*gangState{},
	}
	s.rec = reconciler{s: s, sent: map[string]api.Node{}}
	s.dec = decisions{s: s, binds: make(chan placedPod, 4096), evictions: map[string]int{}, evictChange: make(chan struct{}),
		held: map[string]map[types.UID]placedPod{}}
	s.dra = newDRAAllocator(s)
	if s.binder = cfg.Binder; s.binder == nil {
		s.binder, _ = kubewire.NewBinder(kubewire.BindClientGo, cfg.Client)
	}
	s.dec.starts = newStartBatch(s.dec.reportStarted)
	s.factory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithTransform(trimCached))
	if cfg.PodInformer != nil {
		// Registered before the listers ask the factory for it.
		s.factory.InformerFor(&corev1.Pod{}, cfg.PodInformer)
	}
	s.podLst = s.factory.Core().V1().Pods().Lister()
	podInf := s.factory.Core().V1().Pods().Informer()
	// Either informer indexes by namespace only.
	if err := podInf.AddIndexers(podIndexers()); err != nil {
		return nil, err
	}
	s.podIdx = podInf.GetIndexer()
	s.nodeLst = s.factory.Core().V1().Nodes().Lister()
	s.classLst = s.factory.Scheduling().V1().PriorityClasses().Lister()
	s.ns = newNamespaceWatch(s.factory)
	s.vol = newVolumeWatch(s.factory)
	s.csi = newCSILimits(s.factory)
	s.pods = podTranslator{tiers: *cfg.Tiers, classPriority: s.classPriority, namespaces: s.ns.resolve}
	if !cfg.NoDefaultSpread {
		s.pods.defaults = newSpreadDefaults(s.factory)
	}
	return s, nil
}

// Run mirrors the cluster into the engine and carries decisions back
// until ctx ends. It returns once its goroutines have stopped.
func (s *Scheduler) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.bcast = events.NewBroadcaster(&events.EventSinkImpl{Interface: s.client.EventsV1()})
	s.recorder = s.bcast.NewRecorder(scheme.Scheme, "hetsched")
	s.bcast.StartRecordingToSink(ctx.Done())
	defer s.bcast.Shutdown()

	podInf := s.factory.Core().V1().Pods().Informer()
	nodeInf := s.factory.Core().V1().Nodes().Informer()
	s.factory.Scheduling().V1().PriorityClasses().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { s.dirty.addPod(o) },
		UpdateFunc: func(old, o any) {
			if podChangeMatters(old, o) {
				s.dirty.addPod(o)
			}
		},
		DeleteFunc: func(o any) { s.dirty.addPod(o) },
	}); err != nil {
		return err
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { s.dirty.addNode(o) },
		UpdateFunc: func(_, o any) { s.dirty.addNode(o) },
		DeleteFunc: func(o any) { s.dirty.addNode(o) },
	}); err != nil {
		return err
	}
	if err := s.ns.watch(s.replanNamespaced); err != nil {
		return err
	}
	if err := s.vol.watch(s.replanVolumes); err != nil {
		return err
	}
	if err := s.csi.watch(&s.dirty); err != nil {
		return err
	}
	if err := s.startDRA(ctx); err != nil {
		return err
	}
	if err := s.startK8sPodGroups(ctx); err != nil {
		return err
	}
	s.factory.Start(ctx.Done())
	defer s.factory.Shutdown()
	defer func() {
		for _, f := range s.factories {
			f.Shutdown()
		}
	}()
	for typ, ok := range s.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("kube: the %v informer did not sync", typ)
		}
	}
	if err := s.startPodGroups(ctx); err != nil {
		return err
	}
	if err := s.startCRDs(ctx); err != nil {
		return err
	}
	s.log.Info("informers synced", "podGroups", s.groups != nil, "k8sPodGroups", s.k8sGroupLst != nil, "dra", s.dra.claimLst != nil, "nodes", len(nodeInf.GetStore().ListKeys()), "pods", len(podInf.GetStore().ListKeys()))

	var wg sync.WaitGroup
	// The decision loop reads the engine's events from here: the
	// engine's tasks are all this Scheduler's and none exists before the
	// first reconcile.
	since := s.eng.LatestEvent()
	var err error
	wg.Add(4 + s.cfg.BindWorkers)
	go func() { defer wg.Done(); s.dec.starts.run(ctx) }()
	go func() { defer wg.Done(); s.rec.reconcileLoop(ctx) }()
	go func() { defer wg.Done(); s.crds.statusLoop(ctx) }()
	go func() { defer wg.Done(); s.dec.decisionLoop(ctx, since) }()
	for range s.cfg.BindWorkers {
		go func() { defer wg.Done(); s.dec.bindWorker(ctx) }()
	}
	select {
	case <-ctx.Done():
	case <-s.eng.Done():
		err = s.eng.Err()
	case <-s.rebuildCh:
		err = ErrRebuild
	}
	cancel()
	wg.Wait()
	s.bg.Wait()
	return err
}

// classPriority looks a PriorityClass up in the informer's cache.
func (s *Scheduler) classPriority(name string) (int32, bool) {
	pc, err := s.classLst.Get(name)
	if err != nil {
		return 0, false
	}
	return pc.Value, true
}

// trimCached drops what the Scheduler never reads from cached objects:
// a pod keeps only the lean pod's fields (kubewire.LeanPod), a node loses its
// managed fields and images.
func trimCached(o any) (any, error) {
	if p, ok := o.(*corev1.Pod); ok {
		kubewire.LeanPod(p)
		return p, nil
	}
	if trimSelecting(o) {
		return o, nil
	}
	return stripManagedFields(o)
}

// stripManagedFields drops managed fields (often half an object's size)
// from cached pods and nodes, and nodes' images (often the biggest part
// of a Node): client-go's usual transform, the floor's (WatchOnly).
func stripManagedFields(o any) (any, error) {
	if p, ok := o.(*corev1.Pod); ok {
		p.ManagedFields = nil
	}
	if n, ok := o.(*corev1.Node); ok {
		n.ManagedFields = nil
		n.Status.Images = nil
	}
	return o, nil
}

// podChangeMatters reports whether a pod's update may change what the
// Scheduler does with it. Most updates of a running pod are its kubelet's
// status (conditions, container states, addresses): they are not looked
// at. A pod that stays bound to one node matters again only when it ends
// (planPod keeps what it counted for a bound pod until then, and its
// deletion is the informer's delete): its kubelet's first update (phase
// Pending to Running) is not looked at either. For other pods what is:
// the node, the phase, deletion, labels and annotations, the spec's
// generation (resizes, new tolerations), the scheduling gates and the DRA
// claims' statuses.
func podChangeMatters(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*corev1.Pod)
	n, ok2 := newObj.(*corev1.Pod)
	if !ok1 || !ok2 {
		return true
	}
	if o.UID == n.UID && o.Spec.NodeName != "" && o.Spec.NodeName == n.Spec.NodeName {
		// A running pod matters when it ends, and when what it is counted
		// by changes: a resize, or its labels (others' affinity reads them).
		return podEnded(n) && !podEnded(o) || !maps.Equal(o.Labels, n.Labels) ||
			!reflect.DeepEqual(o.Spec.Containers, n.Spec.Containers) || !reflect.DeepEqual(o.Spec.Resources, n.Spec.Resources) ||
			statusResourcesChanged(&o.Status, &n.Status)
	}
	return o.UID != n.UID || o.Spec.NodeName != n.Spec.NodeName || o.Status.Phase != n.Status.Phase ||
		(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) || o.Generation != n.Generation ||
		!maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
		len(o.Spec.SchedulingGates) != len(n.Spec.SchedulingGates) ||
		!reflect.DeepEqual(o.Status.ResourceClaimStatuses, n.Status.ResourceClaimStatuses) ||
		!reflect.DeepEqual(o.Spec.Tolerations, n.Spec.Tolerations) ||
		!reflect.DeepEqual(o.Spec.Containers, n.Spec.Containers)
}

// statusResourcesChanged reports whether what a resize reads of the
// status changed.
func statusResourcesChanged(o, n *corev1.PodStatus) bool {
	if !reflect.DeepEqual(o.Resources, n.Resources) || !reflect.DeepEqual(o.AllocatedResources, n.AllocatedResources) ||
		!reflect.DeepEqual(kubewire.ResizeConditions(o.Conditions), kubewire.ResizeConditions(n.Conditions)) ||
		len(o.ContainerStatuses) != len(n.ContainerStatuses) {
		return true
	}
	for i := range o.ContainerStatuses {
		a, b := &o.ContainerStatuses[i], &n.ContainerStatuses[i]
		if !reflect.DeepEqual(a.Resources, b.Resources) || !reflect.DeepEqual(a.AllocatedResources, b.AllocatedResources) {
			return true
		}
	}
	return false
}

// podEnded reports whether the pod's phase is a final one.
func podEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}
