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

// bindRequest asks a bind worker to bind a pod where the engine placed
// its task.
type bindRequest struct {
	uid     types.UID
	key     string
	task    string
	node    string
	devices []api.DeviceRef
}

// reportEvery is how often an unchanged reason for waiting is reported
// again (as kube-scheduler does on every failed attempt, but bounded).
const reportEvery = time.Minute

// decisionLoop reads the engine's events and carries its decisions on
// the Scheduler's tasks to the cluster: a placement becomes a Binding, a
// reason for waiting an event and a PodScheduled=False condition, the end
// of a bound pod's task (preempted, its node lost) an eviction.
func (s *Scheduler) decisionLoop(ctx context.Context, since uint64) {
	for {
		evs, next, err := s.eng.Events(ctx, since, 4096)
		if ctx.Err() != nil || errors.Is(err, engine.ErrStopped) {
			return
		}
		if err != nil {
			// Fell behind the engine's event history: look at every task.
			s.log.Warn("decisions fell behind the engine's events; checking every task", "err", err)
			since = s.eng.LatestEvent()
			s.recheckAll(ctx)
			continue
		}
		since = next
		for _, ev := range evs {
			if ev.Kind == "task" {
				s.decide(ctx, ev.ID)
			}
		}
	}
}

// recheckAll decides on every tracked task from its record.
func (s *Scheduler) recheckAll(ctx context.Context) {
	s.mu.Lock()
	ids := make([]string, 0, len(s.tasks))
	for id := range s.tasks {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	for _, id := range ids {
		s.decide(ctx, id)
	}
}

// decide acts on a task's current record (an event says it changed; the
// record, published before the event, is at least as new).
func (s *Scheduler) decide(ctx context.Context, id string) {
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
	case rec.State == "scheduled" && !st.bound && !st.binding:
		st.binding = true
		req := bindRequest{uid: st.uid, key: st.key, task: id, node: rec.Node, devices: rec.Devices}
		s.mu.Unlock()
		select {
		case s.binds <- req:
		case <-ctx.Done():
		}
		return
	case rec.State == "pending" && !st.bound && rec.Reason != "":
		if rec.Reason == st.reported && time.Since(st.reportedAt) < reportEvery {
			break
		}
		st.reported, st.reportedAt = rec.Reason, time.Now()
		key := st.key
		s.mu.Unlock()
		s.reportUnschedulable(ctx, key, st.uid, rec.Reason)
		return
	case isTerminal(rec.State) && st.bound:
		// The engine ended a running pod's task (preempted, say): the pod
		// must go.
		delete(s.tasks, id)
		st.task = ""
		key, uid := st.key, st.uid
		evict := !st.evicting
		st.evicting = true
		s.mu.Unlock()
		if evict {
			go s.evict(ctx, key, uid, rec.Reason)
		}
		return
	case isTerminal(rec.State):
		// A waiting pod's task ended (its gang timed out, say): report
		// why and submit the pod again.
		delete(s.tasks, id)
		st.task = ""
		st.gang = ""
		key := st.key
		s.mu.Unlock()
		s.reportUnschedulable(ctx, key, st.uid, rec.Reason)
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
func (s *Scheduler) bindWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-s.binds:
			s.bindOne(ctx, req)
		}
	}
}

// bindOne binds one pod and records the outcome.
func (s *Scheduler) bindOne(ctx context.Context, req bindRequest) {
	err := s.bind(ctx, req)
	s.mu.Lock()
	st := s.byUID[req.uid]
	if st == nil || st.task != req.task {
		// The pod went away, or its task ended, while it was bound.
		s.mu.Unlock()
		return
	}
	st.binding = false
	switch {
	case err == nil:
		st.bound, st.node = true, req.node
		s.mu.Unlock()
		if err := s.eng.Started(ctx, req.task); err != nil && ctx.Err() == nil {
			s.log.Debug("marking a bound pod's task started", "task", req.task, "err", err)
		}
		return
	case ctx.Err() != nil:
		s.mu.Unlock()
		return
	}
	// Not bound: the pod is gone, bound by someone else (the informer will
	// say where, and it is adopted), or the API server kept failing (it is
	// submitted again).
	delete(s.tasks, req.task)
	st.task = ""
	s.mu.Unlock()
	if cerr := s.eng.Cancel(ctx, req.task); cerr != nil && ctx.Err() == nil {
		s.log.Debug("cancelling an unbound pod's task", "task", req.task, "err", cerr)
	}
	if !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		s.log.Warn("binding failed", "pod", req.key, "node", req.node, "err", err)
		s.reportUnschedulable(ctx, req.key, req.uid, "binding to node "+req.node+" failed: "+err.Error())
	}
	s.dirty.addPodKey(req.key)
}

// bind posts the pod's Binding, with its devices in the annotation;
// transient failures are tried again, up to 5 times.
func (s *Scheduler) bind(ctx context.Context, req bindRequest) error {
	ns, name, _ := cache.SplitMetaNamespaceKey(req.key)
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: req.uid},
		Target:     corev1.ObjectReference{Kind: "Node", Name: req.node},
	}
	if len(req.devices) > 0 {
		b.Annotations = map[string]string{AnnotationDevices: formatDevices(req.devices)}
	}
	return s.retry(ctx, func(ctx context.Context) error {
		return s.client.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{})
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
func (s *Scheduler) reportUnschedulable(ctx context.Context, key string, uid types.UID, why string) {
	ns, name, _ := cache.SplitMetaNamespaceKey(key)
	pod, err := s.podLst.Pods(ns).Get(name)
	if err != nil || pod.UID != uid || pod.Spec.NodeName != "" {
		return
	}
	msg := "hetsched: " + why
	s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%s", msg)
	cond := map[string]any{"status": map[string]any{"conditions": []map[string]any{{
		"type": corev1.PodScheduled, "status": corev1.ConditionFalse, "reason": corev1.PodReasonUnschedulable,
		"message": msg, "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339),
	}}}}
	patch, _ := json.Marshal(cond)
	go func() {
		err := s.retry(ctx, func(ctx context.Context) error {
			_, err := s.client.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			return err
		})
		if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
			s.log.Debug("setting PodScheduled=False", "pod", key, "err", err)
		}
	}()
}

// reportInvalid reports a pod whose spec hetsched cannot place.
func (s *Scheduler) reportInvalid(st *podState) {
	s.mu.Lock()
	why, key, uid := st.invalid, st.key, st.uid
	again := why != st.reported
	st.reported, st.reportedAt = why, time.Now()
	s.mu.Unlock()
	if again && why != "" {
		s.reportUnschedulable(context.Background(), key, uid, why)
	}
}

// evict asks the API server to evict a pod through the Eviction API, so
// that PodDisruptionBudgets hold; a refusal for a budget is tried again
// for up to a minute. A Preempted event says why.
func (s *Scheduler) evict(ctx context.Context, key string, uid types.UID, why string) {
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
	deadline := time.Now().Add(time.Minute)
	for {
		err = s.retry(ctx, func(ctx context.Context) error { return s.client.PolicyV1().Evictions(ns).Evict(ctx, ev) })
		if err == nil || apierrors.IsNotFound(err) || ctx.Err() != nil {
			return
		}
		if !apierrors.IsTooManyRequests(err) || time.Now().After(deadline) {
			s.log.Warn("eviction failed", "pod", key, "err", err)
			s.recorder.Eventf(pod, nil, corev1.EventTypeWarning, "FailedEviction", "Evicting", "hetsched: %v", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}
