package kube

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/resource"
)

// hetsched's own resources (deploy/kubernetes/05-crds.yaml).
var (
	QueueResource            = schema.GroupVersionResource{Group: "hetsched.io", Version: "v1alpha1", Resource: "queues"}
	ResourceScheduleResource = schema.GroupVersionResource{Group: "hetsched.io", Version: "v1alpha1", Resource: "resourceschedules"}
)

// ResourceScheduleName is the one ResourceSchedule's name.
const ResourceScheduleName = "default"

// SchedulePolicy reads the ResourceSchedule's policy ("" when there is
// none, it names none, or hetsched.io is not served): what the engine of
// the next Scheduler is built with.
func SchedulePolicy(ctx context.Context, dyn dynamic.Interface) string {
	if dyn == nil {
		return ""
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, err := dyn.Resource(ResourceScheduleResource).Get(cctx, ResourceScheduleName, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	p, _, _ := unstructured.NestedString(u.Object, "spec", "policy")
	return p
}

// ErrRebuild ends Scheduler.Run when a change needs a new engine (a
// Queue deleted, another policy): the caller builds one and runs again,
// rebuilding from the cluster.
var ErrRebuild = errors.New("kube: the configuration changed; rebuilding the engine from the cluster")

// statusEvery is how often Queue statuses are brought up to date.
const statusEvery = 5 * time.Second

// crds reads hetsched's Queues and ResourceSchedule.
type crds struct {
	s                 *Scheduler
	queues, schedules cache.GenericLister
}

// startCRDs reads hetsched's resources when the cluster serves them:
// Queues become the engine's queues, the ResourceSchedule sets tiers,
// namespaces' queues and the policy.
func (s *Scheduler) startCRDs(ctx context.Context) error {
	queueChanged := func(o any) {
		if k, ok := objectKey(o); ok {
			s.dirty.add(&s.dirty.queues, k)
		}
	}
	scheduleChanged := func(any) { s.dirty.add(&s.dirty.queues, "") } // "": the ResourceSchedule
	ls, err := s.watchCustom(ctx, "Queues and the ResourceSchedule",
		[]schema.GroupVersionResource{QueueResource, ResourceScheduleResource},
		[]cache.ResourceEventHandler{
			cache.ResourceEventHandlerFuncs{AddFunc: queueChanged, UpdateFunc: func(_, o any) { queueChanged(o) },
				DeleteFunc: func(any) { s.rebuild("queue deleted") }},
			cache.ResourceEventHandlerFuncs{AddFunc: scheduleChanged, UpdateFunc: func(_, o any) { scheduleChanged(o) }, DeleteFunc: scheduleChanged},
		})
	if err != nil || ls == nil {
		return err
	}
	s.crds = &crds{s: s, queues: ls[0], schedules: ls[1]}
	return nil
}

// rebuild asks Run to stop with ErrRebuild.
func (s *Scheduler) rebuild(why string) {
	s.log.Info("rebuilding the engine", "why", why)
	select {
	case s.rebuildCh <- struct{}{}:
	default:
	}
}

// reconcileCRDs applies changed Queues (parents before children) and the
// ResourceSchedule.
func (cr *crds) reconcileCRDs(ctx context.Context, keys []string) {
	if cr == nil || len(keys) == 0 {
		return
	}
	s := cr.s
	var queues []*unstructured.Unstructured
	for _, k := range keys {
		if k == "" {
			cr.applySchedule(ctx)
			continue
		}
		o, err := cr.queues.Get(k)
		if err != nil {
			continue
		}
		if u, ok := o.(*unstructured.Unstructured); ok {
			queues = append(queues, u)
		}
	}
	// A child whose parent is not there yet waits for a later round.
	applied := false
	for len(queues) > 0 {
		var next []*unstructured.Unstructured
		errs := map[string]error{}
		for _, u := range queues {
			q, err := queueOf(u)
			if err == nil {
				err = s.eng.PutQueue(ctx, "", q)
			}
			if err != nil {
				next, errs[u.GetName()] = append(next, u), err
				continue
			}
			applied = true
			cr.setQueueCondition(ctx, u, nil)
		}
		if len(next) == len(queues) {
			for _, u := range next {
				cr.setQueueCondition(ctx, u, errs[u.GetName()])
			}
			break
		}
		queues = next
	}
	if applied {
		cr.replanInvalid()
	}
}

// replanInvalid marks dirty the pods that could not be tasks (a queue
// they name may exist now).
func (cr *crds) replanInvalid() {
	s := cr.s
	s.mu.Lock()
	var keys []string
	for _, st := range s.byUID {
		if st.invalid != "" {
			keys = append(keys, st.key)
		}
	}
	s.mu.Unlock()
	for _, k := range keys {
		s.dirty.addPodKey(k)
	}
}

// queueOf translates a Queue.
func queueOf(u *unstructured.Unstructured) (api.Queue, error) {
	q := api.Queue{Name: u.GetName()}
	q.Parent, _, _ = unstructured.NestedString(u.Object, "spec", "parent")
	if w, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "weight"); found && err == nil {
		switch v := w.(type) {
		case int64:
			q.Weight = float64(v)
		case float64:
			q.Weight = v
		default:
			return api.Queue{}, fmt.Errorf("spec.weight: not a number")
		}
	}
	var err error
	if q.Guaranteed, err = quantities(u, "guaranteed"); err != nil {
		return api.Queue{}, err
	}
	if q.Max, err = quantities(u, "max"); err != nil {
		return api.Queue{}, err
	}
	return q, q.Validate()
}

// quantities reads spec.FIELD, a map of Kubernetes quantities.
func quantities(u *unstructured.Unstructured, field string) (resource.List, error) {
	m, found, err := unstructured.NestedMap(u.Object, "spec", field)
	if err != nil || !found {
		return nil, err
	}
	out := resource.List{}
	for name, v := range m {
		q, err := k8sresource.ParseQuantity(fmt.Sprint(v))
		if err != nil {
			return nil, fmt.Errorf("spec.%s.%s: %v", field, name, err)
		}
		rn, val, ok := resourceQuantity(corev1.ResourceName(name), q)
		if !ok {
			return nil, fmt.Errorf("spec.%s.%s: not a resource hetsched holds", field, name)
		}
		out[rn] = val
	}
	return out, nil
}

// setQueueCondition writes the Queue's Accepted condition (err: why not).
func (cr *crds) setQueueCondition(ctx context.Context, u *unstructured.Unstructured, err error) {
	cond := map[string]any{"type": "Accepted", "status": "True", "reason": "Applied", "message": "in the engine's queue tree"}
	if err != nil {
		cond = map[string]any{"type": "Accepted", "status": "False", "reason": "Invalid", "message": err.Error()}
	}
	cr.writeQueueStatus(ctx, u.GetName(), func(st map[string]any) { st["conditions"] = []any{withTime(cond, st)} })
}

// withTime keeps the condition's transition time when its status holds.
func withTime(cond map[string]any, st map[string]any) map[string]any {
	now := metav1.Now().UTC().Format(time.RFC3339)
	cond["lastTransitionTime"] = now
	if old, ok := st["conditions"].([]any); ok {
		for _, c := range old {
			if m, ok := c.(map[string]any); ok && m["type"] == cond["type"] && m["status"] == cond["status"] {
				cond["lastTransitionTime"] = m["lastTransitionTime"]
			}
		}
	}
	return cond
}

// writeQueueStatus changes a Queue's status with edit and writes it when
// it differs from what it was.
func (cr *crds) writeQueueStatus(ctx context.Context, name string, edit func(map[string]any)) {
	o, err := cr.queues.Get(name)
	if err != nil {
		return
	}
	cr.writeStatus(ctx, QueueResource, o.(*unstructured.Unstructured), edit)
}

// writeStatus changes a copy of u's status with edit and writes it
// through the status subresource when it differs (a conflict is left to
// the next round: the informer brings the newer object).
func (cr *crds) writeStatus(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, edit func(map[string]any)) {
	s := cr.s
	u = u.DeepCopy()
	st, _, _ := unstructured.NestedMap(u.Object, "status")
	if st == nil {
		st = map[string]any{}
	}
	before := deepCopyMap(st)
	edit(st)
	if reflect.DeepEqual(before, st) {
		return
	}
	if err := unstructured.SetNestedMap(u.Object, st, "status"); err != nil {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	if _, err := s.cfg.Dynamic.Resource(gvr).UpdateStatus(cctx, u, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
		s.log.Debug("writing a status", "resource", gvr.Resource, "name", u.GetName(), "err", err)
	}
}

func deepCopyMap(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: map[string]any{"m": m}}).DeepCopy().Object["m"].(map[string]any)
}

// statusLoop brings every Queue's usage, fair share and waiting counts up
// to date every statusEvery.
func (cr *crds) statusLoop(ctx context.Context) {
	if cr == nil {
		return
	}
	s := cr.s
	t := time.NewTicker(statusEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		views, err := s.eng.QueueViews(ctx, "")
		if err != nil {
			continue
		}
		for _, v := range views {
			if _, err := cr.queues.Get(v.Name); err != nil {
				continue // a queue of the --queues file
			}
			usage, share := quantityMap(v.Usage), quantityMap(v.FairShare)
			pending := map[string]any{}
			for k, n := range v.Pending {
				pending[k] = int64(n)
			}
			cr.writeQueueStatus(ctx, v.Name, func(st map[string]any) {
				st["usage"], st["fairShare"], st["pending"] = usage, share, pending
			})
		}
	}
}

// quantityMap writes a resource list as Kubernetes quantities.
func quantityMap(l resource.List) map[string]any {
	out := make(map[string]any, len(l))
	for rn, v := range l {
		var q *k8sresource.Quantity
		if rn.Scale() == resource.Units {
			q = k8sresource.NewQuantity(v, k8sresource.BinarySI)
		} else {
			q = k8sresource.NewMilliQuantity(v, k8sresource.DecimalSI)
		}
		name := string(rn)
		if rn == PodsResource {
			name = "pods"
		}
		out[name] = q.String()
	}
	return out
}

// schedulePolicy is what a ResourceSchedule asks for.
type schedulePolicy struct {
	tiers      *PriorityTiers
	policy     string
	nsQueues   map[string]string
	generation int64
}

// readSchedule reads the ResourceSchedule's spec (nil when there is none).
func readSchedule(u *unstructured.Unstructured) (*schedulePolicy, error) {
	p := &schedulePolicy{generation: u.GetGeneration()}
	if t, found, _ := unstructured.NestedMap(u.Object, "spec", "priorityTiers"); found {
		get := func(k string) (int32, error) {
			v, ok := t[k].(int64)
			if !ok {
				return 0, fmt.Errorf("spec.priorityTiers.%s: not an integer", k)
			}
			return int32(v), nil
		}
		var tiers PriorityTiers
		var err error
		if tiers.Urgent, err = get("urgent"); err != nil {
			return nil, err
		}
		if tiers.High, err = get("high"); err != nil {
			return nil, err
		}
		if tiers.Medium, err = get("medium"); err != nil {
			return nil, err
		}
		if tiers.Urgent < tiers.High || tiers.High < tiers.Medium {
			return nil, fmt.Errorf("spec.priorityTiers: thresholds must not increase (urgent >= high >= medium)")
		}
		p.tiers = &tiers
	}
	p.policy, _, _ = unstructured.NestedString(u.Object, "spec", "policy")
	p.nsQueues, _, _ = unstructured.NestedStringMap(u.Object, "spec", "namespaceQueues")
	return p, nil
}

// applySchedule takes the ResourceSchedule's tiers and namespaces' queues
// (for pods submitted from now on), and rebuilds for another policy.
func (cr *crds) applySchedule(ctx context.Context) {
	s := cr.s
	o, err := cr.schedules.Get(ResourceScheduleName)
	var p *schedulePolicy
	if err == nil {
		if p, err = readSchedule(o.(*unstructured.Unstructured)); err != nil {
			cr.writeScheduleStatus(ctx, o.(*unstructured.Unstructured), err)
			return
		}
	}
	s.mu.Lock()
	tiers := *s.cfg.Tiers
	var ns map[string]string
	policy := ""
	if p != nil {
		if p.tiers != nil {
			tiers = *p.tiers
		}
		ns, policy = p.nsQueues, p.policy
	}
	s.pods.tiers, s.nsQueues = tiers, ns
	s.mu.Unlock()
	cr.replanInvalid()
	if policy != "" {
		c := engine.DefaultCoreConfig()
		c.Policy = policy
		if err := c.Validate(); err != nil {
			// An unknown policy is refused where it is written, and the
			// engine keeps the base one (no rebuild loop on it).
			cr.writeScheduleStatus(ctx, o.(*unstructured.Unstructured), err)
			return
		}
	}
	if policy == "" {
		policy = s.cfg.BasePolicy
	}
	if policy != "" && s.cfg.Policy != "" && policy != s.cfg.Policy {
		s.rebuild("policy " + policy)
		return
	}
	if o != nil {
		cr.writeScheduleStatus(ctx, o.(*unstructured.Unstructured), nil)
	}
}

// writeScheduleStatus writes the ResourceSchedule's observed generation
// and Accepted condition.
func (cr *crds) writeScheduleStatus(ctx context.Context, u *unstructured.Unstructured, err error) {
	cond := map[string]any{"type": "Accepted", "status": "True", "reason": "Applied", "message": "applied to pods submitted from now on"}
	if err != nil {
		cond = map[string]any{"type": "Accepted", "status": "False", "reason": "Invalid", "message": err.Error()}
	}
	cr.writeStatus(ctx, ResourceScheduleResource, u, func(st map[string]any) {
		st["observedGeneration"] = u.GetGeneration()
		st["conditions"] = []any{withTime(cond, st)}
	})
}
