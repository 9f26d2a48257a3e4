package kube

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
)

// placedPod is a pod whose task the engine placed, for a bind worker to
// bind there (a Binding, after its claims and volumes).
type placedPod struct {
	uid     types.UID
	key     string
	task    string
	node    string
	devices []api.DeviceRef
	chosen  int // the option placed: -1 the task's resources, else the alternative
}

// reportEvery is how often an unchanged reason for waiting is reported
// again (as kube-scheduler does on every failed attempt, but bounded).
const reportEvery = time.Minute

// decisions carries the engine's decisions back to the cluster: it
// watches the engine's events, binds placed pods (after the claims and
// the evictions they wait for), evicts preempted pods within their
// disruption budgets, and writes why a pod waits. Its state is the bind
// path's; the pod state it reads and changes is the Scheduler's, under
// its lock, as are evictions and held.
type decisions struct {
	s      *Scheduler
	binds  chan placedPod
	starts *startBatch // bound pods' tasks to report started
	// evictions counts, per node, the pods asked to leave it that are
	// still there (under Scheduler.mu). A pod placed on such a node is
	// bound once its node's evictions are done (bindAfterEvictions), and
	// not at all when a PodDisruptionBudget kept one (keepPod displaces
	// it).
	evictions   map[string]int
	evictChange chan struct{} // closed and replaced when it changes
	// held are the placements waiting for their node's evictions, by
	// node and pod (under Scheduler.mu).
	held map[string]map[types.UID]placedPod
	// conds writes the pods' PodScheduled=False conditions, the latest
	// per pod (coalesce.go).
	conds latest[condition]
}

// decisionLoop reads the engine's events and carries its decisions on
// the Scheduler's tasks to the cluster: a placement becomes a Binding, a
// reason for waiting an event and a PodScheduled=False condition, the end
// of a bound pod's task (preempted, its node lost) an eviction.
func (dn *decisions) decisionLoop(ctx context.Context, since uint64) {
	s := dn.s
	for {
		evs, next, err := s.eng.Events(ctx, since, 4096)
		if ctx.Err() != nil || errors.Is(err, engine.ErrStopped) {
			return
		}
		if err != nil {
			// Fell behind the engine's event history: look at every task.
			s.log.Warn("decisions fell behind the engine's events; checking every task", "err", err)
			since = s.eng.LatestEvent()
			dn.recheckAll(ctx)
			continue
		}
		since = next
		// Ends first: a preemption's victims and its preemptor change in
		// one commit, and the preemptor must find its node's evictions
		// counted (bindAfterEvictions).
		for _, ev := range evs {
			if ev.Kind == "task" && ev.State != "scheduled" {
				dn.decide(ctx, ev.ID)
			}
		}
		for _, ev := range evs {
			if ev.Kind == "task" && ev.State == "scheduled" {
				dn.decide(ctx, ev.ID)
			}
		}
	}
}

// recheckAll decides on every tracked task from its record.
func (dn *decisions) recheckAll(ctx context.Context) {
	s := dn.s
	s.mu.Lock()
	ids := make([]string, 0, len(s.tasks))
	for id := range s.tasks {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		dn.decide(ctx, id)
	}
}

// decide acts on a task's current record (an event says it changed; the
// record, published before the event, is at least as new).
func (dn *decisions) decide(ctx context.Context, id string) {
	s := dn.s
	rec, ok := s.eng.Task(id)
	if !ok {
		return
	}
	s.mu.Lock()
	st := s.byUID[s.tasks[id]]
	if st == nil || st.task != id {
		s.mu.Unlock()
		return
	}
	switch {
	case rec.State == "scheduled" && !st.bound && st.binding == "":
		st.binding = id
		pp := placedPod{uid: st.uid, key: st.key, task: id, node: rec.Node, devices: rec.Devices, chosen: rec.Chosen}
		if dn.evictions[rec.Node] > 0 {
			// Placed where pods still leave (preempted for it, say): held
			// (under mu, so that a refused eviction finds and displaces
			// it, keepPod) until they left.
			if dn.held[rec.Node] == nil {
				dn.held[rec.Node] = map[types.UID]placedPod{}
			}
			dn.held[rec.Node][pp.uid] = pp
			s.mu.Unlock()
			s.bg.Add(1)
			go func() { defer s.bg.Done(); dn.bindAfterEvictions(ctx, pp) }()
			return
		}
		s.mu.Unlock()
		select {
		case dn.binds <- pp:
		case <-ctx.Done():
		}
		return
	case rec.State == "pending" && !st.bound && rec.Reason != "":
		if rec.Reason == st.reported && time.Since(st.reportedAt) < reportEvery {
			break
		}
		st.reported, st.reportedAt = rec.Reason, time.Now()
		if g := s.gangs[st.gang]; g != nil {
			s.groupUnschedulable(ctx, g, rec.Reason)
		}
		key := st.key
		s.mu.Unlock()
		dn.reportUnschedulable(ctx, key, st.uid, rec.Reason)
		return
	case st.bound && (isTerminal(rec.State) || rec.State == "pending" && len(rec.Attempts) > 0):
		// The engine ended a running pod's task (preempted, say), or sent
		// an adopted one back to waiting after it was placed (an earlier
		// attempt): the pod must go. (An adopted pod that never fitted
		// where it runs has no earlier attempt: it waits to be counted,
		// and stays.)
		if !isTerminal(rec.State) {
			s.bg.Add(1)
			go func() { defer s.bg.Done(); s.eng.Cancel(ctx, id) }()
		}
		delete(s.tasks, id)
		st.task = ""
		// Claims it allocated stay allocated until deallocated: counted
		// by claim tasks from now on.
		for _, ref := range st.draHeld {
			if s.dra.holders[ref.uid] == id {
				delete(s.dra.holders, ref.uid)
			}
			s.dirty.add(&s.dirty.claims, ref.key)
		}
		st.draHeld = nil
		key, uid := st.key, st.uid
		evict := !st.evicting
		if evict {
			st.evicting = true
			dn.evictions[st.node]++
		}
		s.mu.Unlock()
		if evict {
			s.bg.Add(1)
			go func() { defer s.bg.Done(); dn.evict(ctx, key, uid, rec.Reason) }()
		}
		return
	case isTerminal(rec.State):
		// A waiting pod's task ended (its gang timed out, say): report
		// why and submit the pod again.
		delete(s.tasks, id)
		st.task = ""
		if g := s.gangs[st.gang]; g != nil && !g.started {
			// Its gang never started (it timed out, say): it gathers again,
			// all or nothing.
			g.jobs = 0
		}
		key := st.key
		s.mu.Unlock()
		dn.reportUnschedulable(ctx, key, st.uid, rec.Reason)
		s.dirty.addPodKey(key)
		return
	}
	s.mu.Unlock()
}

func isTerminal(state string) bool {
	switch state {
	case "succeeded", "failed", "cancelled", "skipped", "preempted":
		return true
	}
	return false
}

// bindWorker binds pods until ctx ends.
func (dn *decisions) bindWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case pp := <-dn.binds:
			dn.bindOne(ctx, pp)
		}
	}
}

// bindOne binds one pod and records the outcome. The Binding is posted
// only while the request is still its pod's (its task has not ended
// meanwhile); the request's mark (podState.binding) is cleared whatever
// happens.
func (dn *decisions) bindOne(ctx context.Context, pp placedPod) {
	s := dn.s
	s.mu.Lock()
	st := s.byUID[pp.uid]
	if st == nil || st.binding != pp.task || st.task != pp.task {
		if st != nil && st.binding == pp.task {
			st.binding = "" // its task ended before the Binding: it waits again
			s.mu.Unlock()
			s.dirty.addPodKey(pp.key)
			return
		}
		s.mu.Unlock()
		return
	}
	plan := st.dra
	if plan != nil {
		// The claims it allocates are its task's from now on (a claim's
		// informer update must not count their devices again).
		for _, c := range plan.claims {
			if !c.allocated {
				s.dra.holders[c.uid] = pp.task
			}
		}
	}
	s.mu.Unlock()
	t0 := time.Now()
	var written []writtenClaim
	var err error
	if plan != nil && len(plan.claims) > 0 {
		written, err = s.dra.writeClaims(ctx, pp, plan)
	}
	if err == nil {
		// Its volumes' claims are bound for the node before the pod is.
		err = s.bindVolumes(ctx, pp)
	}
	if err == nil {
		if err = dn.bind(ctx, pp); err != nil && len(written) > 0 {
			s.dra.releaseClaims(ctx, pp, written)
			written = nil
		}
	}
	s.m.bindTime.Observe(time.Since(t0).Seconds())
	switch {
	case err == nil:
		s.m.bindings.WithLabelValues("bound").Inc()
	case apierrors.IsNotFound(err):
		s.m.bindings.WithLabelValues("gone").Inc()
	case apierrors.IsConflict(err):
		s.m.bindings.WithLabelValues("conflict").Inc()
	case ctx.Err() == nil:
		s.m.bindings.WithLabelValues("failed").Inc()
	}
	s.mu.Lock()
	st = s.byUID[pp.uid]
	if plan != nil && (err != nil || st == nil || st.task != pp.task) {
		// Not the task's after all: a claim left allocated is counted by a
		// claim task.
		for _, c := range plan.claims {
			if s.dra.holders[c.uid] == pp.task {
				delete(s.dra.holders, c.uid)
				s.dirty.add(&s.dirty.claims, c.key)
			}
		}
	}
	if st == nil {
		s.mu.Unlock() // the pod went away meanwhile
		return
	}
	if st.binding == pp.task {
		st.binding = ""
	}
	if st.task != pp.task {
		// Its task ended while the Binding was in flight: a bound pod is
		// adopted where it went (the informer's update), a waiting one is
		// submitted again.
		s.mu.Unlock()
		s.dirty.addPodKey(pp.key)
		return
	}
	switch {
	case err == nil:
		st.bound, st.node = true, pp.node
		for _, w := range written {
			if w.allocated {
				st.draHeld = append(st.draHeld, w.ref)
			}
		}
		if g := s.gangs[st.gang]; g != nil {
			s.gangBound(ctx, st.gang, g, pp.node)
		}
		s.mu.Unlock()
		dn.starts.add(pp.task)
		dn.reportScheduled(pp)
		return
	case ctx.Err() != nil:
		s.mu.Unlock()
		return
	}
	var busy *deviceBusyError
	if errors.As(err, &busy) {
		s.waitForBusyDevice(ctx, st, pp, busy)
		return
	}
	// Not bound: the pod is gone, bound by someone else (the informer will
	// say where, and it is adopted), or the API server kept failing (it is
	// submitted again).
	why := ""
	if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		s.log.Warn("binding failed", "pod", pp.key, "node", pp.node, "err", err)
		why = "binding to node " + pp.node + " failed: " + err.Error()
	}
	dn.unplace(ctx, st, pp, why)
}

// reportScheduled records the Scheduled event of a bound pod, as
// kube-scheduler's binder does.
func (dn *decisions) reportScheduled(pp placedPod) {
	s := dn.s
	ns, name, _ := cache.SplitMetaNamespaceKey(pp.key)
	pod, err := s.podLst.Pods(ns).Get(name)
	if err != nil || pod.UID != pp.uid {
		return // gone meanwhile: no pod to tell
	}
	s.recorder.Eventf(pod, nil, corev1.EventTypeNormal, "Scheduled", "Binding", "Successfully assigned %s to %s", pp.key, pp.node)
}

// reportStarted tells the engine that bound pods' tasks started (one
// command for the batch, startBatch).
func (dn *decisions) reportStarted(ctx context.Context, ids []string) {
	s := dn.s
	errs, err := s.eng.StartedMany(ctx, ids)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		s.log.Debug("marking bound pods' tasks started", "tasks", len(ids), "err", err)
		return
	}
	for i, err := range errs {
		if err != nil {
			// Ended meanwhile (preempted, say): nothing to start.
			s.log.Debug("marking a bound pod's task started", "task", ids[i], "err", err)
		}
	}
}

// unplace gives up a placement that was not bound: the task is cancelled
// and the pod, when it still waits, submitted again. Called with mu held;
// releases it.
func (dn *decisions) unplace(ctx context.Context, st *podState, pp placedPod, why string) {
	s := dn.s
	if st.binding == pp.task {
		st.binding = ""
	}
	delete(s.tasks, pp.task)
	st.task = ""
	s.mu.Unlock()
	if cerr := s.eng.Cancel(ctx, pp.task); cerr != nil && ctx.Err() == nil {
		s.log.Debug("cancelling an unbound pod's task", "task", pp.task, "err", cerr)
	}
	if why != "" {
		dn.reportUnschedulable(ctx, pp.key, pp.uid, why)
	}
	s.dirty.addPodKey(pp.key)
}

// bindAfterEvictions binds a pod placed on a node that pods still leave,
// once they left. If a PodDisruptionBudget keeps one of them, keepPod
// displaces this placement (its task ends) and the pod waits again.
// Meanwhile the pod says what it waits for, at once (as kube-scheduler
// reports a preemptor).
func (dn *decisions) bindAfterEvictions(ctx context.Context, pp placedPod) {
	s := dn.s
	dn.reportUnschedulable(ctx, pp.key, pp.uid, "placed on node "+pp.node+", waiting for the pods evicted there to leave")
	defer func() {
		s.mu.Lock()
		if h := dn.held[pp.node]; h[pp.uid].task == pp.task {
			delete(h, pp.uid)
			if len(h) == 0 {
				delete(dn.held, pp.node)
			}
		}
		s.mu.Unlock()
	}()
	for {
		s.mu.Lock()
		st := s.byUID[pp.uid]
		if st == nil || st.task != pp.task {
			if st != nil && st.binding == pp.task {
				st.binding = ""
			}
			s.mu.Unlock() // gone, or displaced by keepPod
			return
		}
		if dn.evictions[pp.node] == 0 {
			s.mu.Unlock()
			break
		}
		ch := dn.evictChange
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
	select {
	case dn.binds <- pp:
	case <-ctx.Done():
	}
}

// evictionDone counts an eviction on node as over (under mu): the pod
// left, or stays (refused).
func (dn *decisions) evictionDone(node string) {
	if dn.evictions[node]--; dn.evictions[node] <= 0 {
		delete(dn.evictions, node)
	}
	close(dn.evictChange)
	dn.evictChange = make(chan struct{})
}

// bind posts the pod's Binding, with its devices in the annotation,
// through the binder; transient failures are tried again, up to 5 times.
func (dn *decisions) bind(ctx context.Context, pp placedPod) error {
	s := dn.s
	ns, name, _ := cache.SplitMetaNamespaceKey(pp.key)
	var ann map[string]string
	if len(pp.devices) > 0 {
		ann = map[string]string{AnnotationDevices: formatDevices(pp.devices)}
	}
	return s.retry(ctx, func(ctx context.Context) error {
		return s.binder.Bind(ctx, ns, name, pp.uid, pp.node, ann)
	})
}

// retry runs call with the request timeout until it succeeds, fails for
// good, or 5 attempts failed transiently (100 ms, doubled, between them).
func (s *Scheduler) retry(ctx context.Context, call func(context.Context) error) error {
	pause := 100 * time.Millisecond
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		err = call(cctx)
		cancel()
		if err == nil || !transient(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause *= 2
	}
	return err
}

// transient reports whether an API error may go away by itself.
func transient(err error) bool {
	return apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || errors.Is(err, context.DeadlineExceeded) ||
		strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "connection reset")
}

// reportUnschedulable tells the pod's readers why it waits: a
// FailedScheduling event (what `kubectl describe pod` shows) and the
// PodScheduled=False condition with reason Unschedulable.
func (dn *decisions) reportUnschedulable(ctx context.Context, key string, uid types.UID, why string) {
	s := dn.s
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := s.podLst.Pods(ns).Get(name)
	if err != nil || pod.UID != uid || pod.Spec.NodeName != "" {
		return
	}
	msg := "hetsched: " + why
	s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", msg)
	dn.setUnschedulable(ctx, key, uid, msg)
}

// setUnschedulable writes the pod's PodScheduled=False condition with
// msg. Writes for one pod go one at a time, in order, and a newer message
// replaces one not written yet: the condition ends with the latest. Each
// write is for the pod of uid, still unbound (checked before it, and the
// uid is the patch's precondition).
func (dn *decisions) setUnschedulable(ctx context.Context, key string, uid types.UID, msg string) {
	s := dn.s
	dn.conds.set(ctx, &s.bg, key, condition{uid: uid, msg: msg}, dn.writeUnschedulable)
}

// writeUnschedulable patches the PodScheduled=False condition of want
// on the pod of key, still unbound.
func (dn *decisions) writeUnschedulable(ctx context.Context, key string, want condition) {
	s := dn.s
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	if p, err := s.podLst.Pods(ns).Get(name); err != nil || p.UID != want.uid || p.Spec.NodeName != "" {
		return
	}
	cond := map[string]any{
		"metadata": map[string]any{"uid": string(want.uid)},
		"status": map[string]any{"conditions": []map[string]any{{
			"type": corev1.PodScheduled, "status": corev1.ConditionFalse, "reason": corev1.PodReasonUnschedulable,
			"message": want.msg, "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
		}}},
	}
	patch, _ := json.Marshal(cond)
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		return err
	})
	if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		s.log.Debug("setting PodScheduled=False", "pod", key, "err", err)
	}
}

// condition is a PodScheduled=False message for the pod of uid.
type condition struct {
	uid types.UID
	msg string
}

// reportInvalid reports a pod whose spec hetsched cannot place.
func (dn *decisions) reportInvalid(ctx context.Context, st *podState) {
	s := dn.s
	s.mu.Lock()
	why, key, uid := st.invalid, st.key, st.uid
	again := why != st.reported
	st.reported, st.reportedAt = why, time.Now()
	s.mu.Unlock()
	if again && why != "" {
		dn.reportUnschedulable(ctx, key, uid, why)
	}
}

// evict asks the API server to evict a pod through the Eviction API, so
// that PodDisruptionBudgets hold; a refusal for a budget (429) is tried
// again until Config.EvictionTimeout, then the pod is kept (keepPod). A
// Preempted event says why it must go.
func (dn *decisions) evict(ctx context.Context, key string, uid types.UID, why string) {
	s := dn.s
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := s.podLst.Pods(ns).Get(name)
	if err != nil || pod.UID != uid || pod.DeletionTimestamp != nil {
		return
	}
	reason := "Evicted"
	if strings.Contains(why, "preempt") {
		reason = "Preempted"
	}
	s.recorder.Eventf(pod, nil, corev1.EventTypeNormal, reason, "Evicting", "hetsched: %s", why)
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: ns, Name: name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}},
	}
	deadline := time.Now().Add(s.cfg.EvictionTimeout)
	pause := 500 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
		err = s.client.PolicyV1().Evictions(ns).Evict(cctx, ev)
		cancel()
		if err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil {
			switch {
			case err == nil:
				s.m.evictions.WithLabelValues("evicted").Inc()
			case ctx.Err() == nil:
				s.m.evictions.WithLabelValues("gone").Inc()
			}
			return
		}
		if !transient(err) || time.Now().Add(pause).After(deadline) {
			s.m.evictions.WithLabelValues("refused").Inc()
			s.log.Warn("eviction failed", "pod", key, "err", err)
			s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedEviction", "Evicting", "hetsched: %v", err)
			dn.keepPod(ctx, pod)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// keepPod counts again, where it runs and no longer preemptible, a pod
// whose eviction was refused for good. The placements waiting for it to
// leave its node are given up, in the same engine step (Displace), and
// their pods wait again.
func (dn *decisions) keepPod(ctx context.Context, pod *corev1.Pod) {
	s := dn.s
	s.mu.Lock()
	st := s.byUID[pod.UID]
	if st == nil || !st.evicting {
		s.mu.Unlock()
		return
	}
	st.evicting, st.keep = false, true
	dn.evictionDone(st.node)
	var displaced []placedPod
	var ids []string
	for uid, pp := range dn.held[st.node] {
		if w := s.byUID[uid]; w != nil && w.task == pp.task {
			if w.binding == pp.task {
				w.binding = ""
			}
			w.task = ""
			delete(s.tasks, pp.task)
			displaced = append(displaced, pp)
			ids = append(ids, pp.task)
		}
	}
	delete(dn.held, st.node)
	id := s.newTaskID(st)
	a := engine.Adoption{Task: s.rec.adoptedTask(pod, id), Node: st.node, Devices: adoptedDevices(pod, s.cfg.SchedulerName), Displace: ids}
	s.mu.Unlock()
	if errs, err := s.eng.Adopt(ctx, "", []engine.Adoption{a}); err == nil && errs[0] != nil {
		s.log.Warn("could not count a kept pod again", "pod", a.Task.Name, "err", errs[0])
	}
	for _, pp := range displaced {
		dn.reportUnschedulable(ctx, pp.key, pp.uid, "a PodDisruptionBudget kept "+pod.Namespace+"/"+pod.Name+", which had to leave node "+pp.node+" for it")
		s.dirty.addPodKey(pp.key)
	}
}
