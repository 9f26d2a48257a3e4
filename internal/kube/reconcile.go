package kube

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
)

// reconciler brings the cluster to the engine: the changed nodes become
// the engine's nodes, the changed pods its tasks (planned in batches, a
// gang's members together), and hetsched's resources its queues. The pod
// state it changes is the Scheduler's, under its lock.
type reconciler struct {
	s *Scheduler
	// sent is the node as last sent to the engine (the reconcile loop's
	// alone: not under the lock).
	sent map[string]api.Node
}

// reconcileLoop brings the engine in line with the informers' view of the
// cluster, one batch of changed keys at a time: nodes first (pods need
// them), then pods: ended ones leave, running ones are adopted, waiting
// ones are submitted, each kind in one engine command.
func (rn *reconciler) reconcileLoop(ctx context.Context) {
	s := rn.s
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.dirty.notify:
		}
		pods, nodes, queues, claims := s.dirty.take()
		s.crds.reconcileCRDs(ctx, queues)
		if err := rn.reconcileNodes(ctx, nodes); err != nil && ctx.Err() == nil {
			s.log.Warn("could not update nodes; trying again", "err", err)
			rn.retryNodesLater(ctx, nodes)
		}
		if len(nodes) > 0 && s.dra.slices != nil {
			s.dra.retryUnmapped()
			claims = append(claims, s.dirty.takeClaims()...)
		}
		s.dra.reconcileClaims(ctx, claims)
		if v := s.dra.devices.currentVersion(); v != s.dra.seen {
			// Which devices DRA selectors match changed: pods waiting on
			// devices, claims whose devices were unknown and pending pods
			// whose options may differ are looked at again.
			s.dra.seen = v
			pods = append(pods, s.dra.draRecheck()...)
		}
		rn.reconcilePods(ctx, pods)
	}
}

// retryNodesLater marks nodes dirty again after a pause.
func (rn *reconciler) retryNodesLater(ctx context.Context, nodes []string) {
	s := rn.s
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		for _, n := range nodes {
			s.dirty.add(&s.dirty.nodes, n)
		}
	}()
}

// reconcileNodes sends the changed nodes to the engine and removes the
// deleted ones.
func (rn *reconciler) reconcileNodes(ctx context.Context, names []string) error {
	s := rn.s
	var up []api.Node
	var gone []string
	for _, name := range names {
		n, err := s.nodeLst.Get(name)
		if apierrors.IsNotFound(err) {
			if _, ok := rn.sent[name]; ok {
				gone = append(gone, name)
			}
			continue
		}
		if err != nil {
			return err
		}
		hn, dropped := s.nodes.node(n)
		s.csi.offer(&hn)
		if len(dropped) > 0 {
			s.log.Debug("node: not carried over", "node", name, "what", dropped)
		}
		if s.dra.slices != nil {
			hn.Devices = append(hn.Devices, s.dra.devices.translate(name, s.dra.nodeSlices(name), api.MaxNodeDevices-len(hn.Devices), s.log.Warn)...)
		}
		if err := hn.Validate(); err != nil {
			s.log.Warn("node cannot be scheduled onto", "node", name, "err", err)
			continue
		}
		if old, ok := rn.sent[name]; ok && reflect.DeepEqual(old, hn) {
			continue
		}
		up = append(up, hn)
	}
	for len(up) > 0 {
		batch := up[:min(len(up), 1000)]
		up = up[len(batch):]
		if _, err := s.eng.UpsertNodes(ctx, batch); err != nil {
			return err
		}
		for _, n := range batch {
			rn.sent[n.Name] = n
		}
	}
	for _, name := range gone {
		if _, err := s.eng.ReleaseNode(ctx, name); err != nil {
			return err
		}
		delete(rn.sent, name)
		s.dra.devices.drop(name)
	}
	return nil
}

// podBatch is what one pass over changed pods asks of the engine.
type podBatch struct {
	end     []endTask // tasks to end (pods finished or deleted)
	adopt   []engine.Adoption
	submit  []api.Task
	jobs    []api.Job
	invalid []*podState // pods whose spec cannot be a task now
	// gathering are pods waiting for the rest of their gang, and why.
	gathering []gathering
}

type gathering struct {
	st  *podState
	why string
}

// endTask ends a task whose pod finished (exit code) or went away.
type endTask struct {
	id       string
	finished bool
	code     int
}

// reconcilePods brings changed pods' tasks up to date.
func (rn *reconciler) reconcilePods(ctx context.Context, keys []string) {
	s := rn.s
	var b podBatch
	s.mu.Lock()
	for _, key := range keys {
		rn.planPod(key, &b)
	}
	s.mu.Unlock()
	if s.csi.takeResync() {
		// A pod asked for a CSI driver's attach resource no node offered
		// yet: every node offers it before its task arrives.
		names := slices.Collect(maps.Keys(rn.sent))
		if err := rn.reconcileNodes(ctx, names); err != nil && ctx.Err() == nil {
			s.log.Warn("could not update nodes; trying again", "err", err)
			rn.retryNodesLater(ctx, names)
		}
	}
	if nodes := s.dra.devices.takeResync(); len(nodes) > 0 {
		// New DRA selectors: their devices carry their classes in the
		// engine before tasks asking for them arrive.
		if err := rn.reconcileNodes(ctx, nodes); err != nil && ctx.Err() == nil {
			s.log.Warn("could not update nodes; trying again", "err", err)
			rn.retryNodesLater(ctx, nodes)
		}
	}
	s.apply(ctx, &b)
}

// planPod decides, under mu, what one pod's change asks of the engine;
// it registers new task ids before they are submitted, so that their
// first decision finds its pod.
func (rn *reconciler) planPod(key string, b *podBatch) {
	s := rn.s
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return
	}
	pod, err := s.podLst.Pods(ns).Get(name)
	exists := err == nil
	st := s.byUID[s.byKey[key]]
	if st != nil && (!exists || pod.UID != st.uid) {
		// Deleted, or replaced by a new pod of the same name.
		s.endPod(st, b, false, 0)
		st = nil
	}
	if !exists {
		return
	}
	switch {
	case podEnded(pod):
		if st != nil {
			s.endPod(st, b, true, exitCode(pod))
		}
	case pod.Spec.NodeName != "":
		if st == nil {
			st = s.track(pod)
		}
		now := ""
		if st.bound {
			now = countedAs(pod)
			if st.counted == "" {
				st.counted = now // bound by this Scheduler: first seen bound
			}
		}
		if st.bound && st.task != "" && st.counted != now && len(st.draHeld) == 0 && len(pod.Spec.ResourceClaims) == 0 {
			// Resized in place, or relabelled: counted again, where it
			// runs, by what it holds now, its old task displaced in the
			// same engine step (nothing waiting takes its room between).
			old := st.task
			delete(s.tasks, old)
			st.task = ""
			id := s.newTaskID(st)
			st.counted = now
			b.adopt = append(b.adopt, engine.Adoption{Task: rn.adoptedTask(pod, id), Node: pod.Spec.NodeName,
				Devices: adoptedDevices(pod, s.cfg.SchedulerName), Displace: []string{old}})
			return
		}
		if st.bound || st.binding != "" {
			return
		}
		rn.leaveGang(st)
		// Bound by someone else (another scheduler, or this one before a
		// restart): count it where it runs.
		if st.task != "" {
			s.untrackTask(st, b, false, 0)
		}
		st.bound, st.node = true, pod.Spec.NodeName
		st.counted = countedAs(pod)
		id := s.newTaskID(st)
		b.adopt = append(b.adopt, engine.Adoption{Task: rn.adoptedTask(pod, id), Node: pod.Spec.NodeName, Devices: adoptedDevices(pod, s.cfg.SchedulerName)})
	case pod.Spec.SchedulerName != s.cfg.SchedulerName || pod.DeletionTimestamp != nil:
		// Not this scheduler's to place, or on its way out.
	case len(pod.Spec.SchedulingGates) > 0:
		// Gated (a queue controller such as Kueue holds it): not placed
		// until its gates are gone, as kube-scheduler does.
		if st != nil && st.task != "" && st.binding == "" {
			rn.leaveGang(st)
			s.untrackTask(st, b, false, 0)
		}
	default:
		if st == nil {
			st = s.track(pod)
		}
		if st.task != "" && st.binding == "" && st.dra != nil && !st.inGangJob() && st.dra.version != s.dra.devices.currentVersion() {
			// Its claims' options were made from other devices: made again,
			// the task is replaced when they changed.
			_, plan, wait, err := s.dra.withClaims(pod, api.Task{}, false)
			if err == nil && wait == "" && plan != nil && plan.key == st.dra.key {
				st.dra.version = plan.version
				return
			}
			s.untrackTask(st, b, false, 0)
		}
		if st.task != "" && st.binding == "" && !st.inGangJob() && st.nsVersion != 0 && st.nsVersion != s.ns.version.Load() {
			// Made with a namespaceSelector, and namespaces changed since.
			s.untrackTask(st, b, false, 0)
		}
		if st.task != "" && st.binding == "" && !st.inGangJob() && st.volVersion != 0 && st.volVersion != s.vol.version.Load() {
			// Made from claims, volumes and classes that changed since:
			// made again when what its volumes ask of nodes changed.
			var t api.Task
			if w, err := s.volumeTerms(pod, &t); err != nil || w != "" || strings.Join(t.NodeAffinity, "|") != st.volTerms {
				s.untrackTask(st, b, false, 0)
			} else {
				st.volVersion = s.vol.version.Load()
			}
		}
		if st.task != "" || st.binding != "" || st.gang != "" && rn.gangWaiting(st) {
			return
		}
		rn.planWaiting(pod, st, b)
	}
}

// planWaiting submits a waiting pod's task, or adds it to its gang.
func (rn *reconciler) planWaiting(pod *corev1.Pod, st *podState, b *podBatch) {
	s := rn.s
	gs, wait, err := s.gangOf(pod)
	if err != nil {
		st.invalid = err.Error()
		b.invalid = append(b.invalid, st)
		return
	}
	if wait != "" {
		b.gathering = append(b.gathering, gathering{st: st, why: wait})
		return
	}
	t, plan, wait, err := rn.podTask(pod, "", false)
	if err != nil {
		st.invalid = err.Error()
		b.invalid = append(b.invalid, st)
		return
	}
	st.invalid = ""
	st.nsVersion = 0
	if usesNamespaceSelector(pod) {
		st.nsVersion = s.ns.version.Load()
	}
	st.volVersion, st.volTerms = 0, ""
	if len(podClaims(pod)) > 0 {
		st.volVersion = s.vol.version.Load()
		var vt api.Task
		if w, err := s.volumeTerms(pod, &vt); err == nil && w == "" {
			st.volTerms = strings.Join(vt.NodeAffinity, "|")
		}
	}
	if wait != "" {
		b.gathering = append(b.gathering, gathering{st: st, why: wait})
		return
	}
	s.dra.setPlan(st, plan)
	if t.Queue == "" {
		t.Queue = s.nsQueues[pod.Namespace]
	}
	gs.applyPriority(&t, s.pods.tiers)
	if gs.name == "" || gs.min <= 1 && !gs.upstream {
		t.ID = s.newTaskID(st)
		b.submit = append(b.submit, t)
		return
	}
	gang := gs.name
	g := s.gangs[gang]
	if g == nil {
		g = &gangState{}
		s.gangs[gang] = g
	}
	if st.gang != gang {
		st.gang = gang
		g.members++
	}
	if g.jobs == 0 {
		// Until it forms, the gang's spec is its latest pod's (a
		// PodGroup may change).
		g.spec = gs
	}
	if g.jobs > 0 || gs.min <= 1 {
		// The gang was placed, or is a PodGroup of the basic policy:
		// (later) members go alone, into its domain.
		if g.spec.required != "" {
			if g.domain == "" {
				b.gathering = append(b.gathering, gathering{st: st, why: "waiting for the first of gang " + gs.display() + " to be bound: its pods share one " + g.spec.required})
				return
			}
			t.NodeSelector = maps.Clone(t.NodeSelector)
			if t.NodeSelector == nil {
				t.NodeSelector = map[string]string{}
			}
			t.NodeSelector[g.spec.required] = g.domain
		}
		t.ID = s.newTaskID(st)
		b.submit = append(b.submit, t)
		return
	}
	g.waiting = append(g.waiting, st.uid)
	if len(g.waiting) < gs.min {
		b.gathering = append(b.gathering, gathering{st: st, why: "waiting for gang " + gs.display() + ": " + strconv.Itoa(len(g.waiting)) + " of its " + strconv.Itoa(gs.min) + " pods exist"})
		return
	}
	rn.formGang(gang, g, pod.Namespace, t, b)
}

// formGang submits a gang's waiting members as one job with a gang of
// g.spec.min, or leaves them gathering when fewer than that can still go.
func (rn *reconciler) formGang(gang string, g *gangState, ns string, first api.Task, b *podBatch) {
	s := rn.s
	g.jobs++
	g.seq++ // job ids are never reused: an ended job keeps its id
	job := api.Job{ID: gangJobID(gang, g.seq), Gang: g.spec.gang(), FailurePolicy: api.Continue}
	var members []*podState
	for _, uid := range g.waiting {
		m := s.byUID[uid]
		if m == nil || m.task != "" || m.bound || m.binding != "" {
			continue // gone, bound or placed meanwhile
		}
		mp, err := s.podLst.Pods(ns).Get(podName(m.key))
		if err != nil || mp.UID != uid || mp.Spec.NodeName != "" || mp.DeletionTimestamp != nil {
			continue
		}
		mt, plan, wait, err := rn.podTask(mp, string(uid), len(job.Tasks) > 0)
		if err != nil {
			m.invalid = err.Error()
			b.invalid = append(b.invalid, m)
			continue
		}
		if wait != "" {
			b.gathering = append(b.gathering, gathering{st: m, why: wait})
			continue
		}
		s.dra.setPlan(m, plan)
		if mt.Queue == "" {
			mt.Queue = s.nsQueues[ns]
		}
		mt.Priority = first.Priority // a gang waits at one tier: its latest member's (its group's)
		g.spec.applyPriority(&mt, s.pods.tiers)
		job.Tasks = append(job.Tasks, mt)
		members = append(members, m)
		if plan != nil && slices.ContainsFunc(plan.claims, func(r draClaimRef) bool { return r.group != nil && !r.allocated }) {
			// Its group's claim is allocated with it, on one node: the
			// node every member shares.
			job.Gang.RequiredTopology = api.NodeNameLabel
		}
	}
	g.waiting = nil
	if len(job.Tasks) < g.spec.min {
		// Members went away while the gang gathered: gather again.
		for _, m := range members {
			g.waiting = append(g.waiting, m.uid)
		}
		g.jobs--
		return
	}
	for i, m := range members {
		m.n++
		m.task = engine.JobTaskID(job.ID, job.Tasks[i].ID)
		s.tasks[m.task] = m.uid
	}
	b.jobs = append(b.jobs, job)
}

// leaveGang takes st out of its gang's gathering (it was bound by someone
// else, say).
func (rn *reconciler) leaveGang(st *podState) {
	s := rn.s
	g := s.gangs[st.gang]
	if g == nil {
		return
	}
	for i, uid := range g.waiting {
		if uid == st.uid {
			g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
			return
		}
	}
}

// gangWaiting reports whether st waits in its gang for more members.
func (rn *reconciler) gangWaiting(st *podState) bool {
	s := rn.s
	g := s.gangs[st.gang]
	if g == nil {
		return false
	}
	for _, uid := range g.waiting {
		if uid == st.uid {
			return true
		}
	}
	return false
}

// inGangJob reports whether st's task is a member of a gang's job (not
// one that went alone): it is made again only with its gang.
func (st *podState) inGangJob() bool { return strings.HasPrefix(st.task, "gang-") }

// gangJobID is the id of a gang's n-th job ("/" is not an id's).
func gangJobID(gang string, n int) string {
	return "gang-" + strings.ReplaceAll(gang, "/", ".") + "-" + strconv.Itoa(n)
}

func podName(key string) string {
	_, name, _ := cache.SplitMetaNamespaceKey(key)
	return name
}

// track starts tracking a pod.
func (s *Scheduler) track(pod *corev1.Pod) *podState {
	key := pod.Namespace + "/" + pod.Name
	st := &podState{uid: pod.UID, key: key}
	s.byUID[pod.UID] = st
	s.byKey[key] = pod.UID
	return st
}

// newTaskID registers the pod's next task id.
func (s *Scheduler) newTaskID(st *podState) string {
	st.n++
	id := string(st.uid)
	if st.n > 1 {
		id += "-" + strconv.Itoa(st.n)
	}
	st.task = id
	s.tasks[id] = st.uid
	return id
}

// endPod stops tracking a pod that finished or went away, ending its task.
func (s *Scheduler) endPod(st *podState, b *podBatch, finished bool, code int) {
	if st.evicting {
		st.evicting = false
		s.dec.evictionDone(st.node)
	}
	if st.task != "" {
		s.untrackTask(st, b, finished, code)
	}
	if g := s.gangs[st.gang]; g != nil {
		s.rec.leaveGang(st)
		if g.members--; g.members <= 0 {
			delete(s.gangs, st.gang) // its last pod went: the name may start afresh
		}
	}
	s.dra.setPlan(st, nil)
	delete(s.byUID, st.uid)
	if s.byKey[st.key] == st.uid {
		delete(s.byKey, st.key)
	}
}

// untrackTask ends st's task: its events are not decisions any more.
// Claims it allocated and that stay allocated go to claim tasks in the
// same step (claimsAfterPod).
func (s *Scheduler) untrackTask(st *podState, b *podBatch, finished bool, code int) {
	delete(s.tasks, st.task)
	if !s.dra.claimsAfterPod(st, b) {
		b.end = append(b.end, endTask{id: st.task, finished: finished, code: code})
	}
	st.task = ""
	s.dra.setPlan(st, nil)
}

// podTask is a waiting pod's task with its claims (withClaims).
// sharer: the pod shares its PodGroup's unallocated claims with the
// gang member that allocates them (withClaims).
func (rn *reconciler) podTask(pod *corev1.Pod, id string, sharer bool) (api.Task, *draPlan, string, error) {
	s := rn.s
	t, err := s.pods.task(pod, id)
	if err != nil {
		return t, nil, "", err
	}
	t.Resources = s.csi.request(pod, s.vol, t.Resources)
	if wait, err := s.volumeTerms(pod, &t); err != nil || wait != "" {
		return t, nil, wait, err
	}
	return s.dra.withClaims(pod, t, sharer)
}

// draRecheck is the pods to look at again after DRA devices changed
// (under its own lock), and marks unmapped claims to be tried again.
func (da *draAllocator) draRecheck() []string {
	da.mu.Lock()
	defer da.mu.Unlock()
	out := drainKeys(&da.noDevice)
	for _, st := range da.planned {
		if st.task != "" && st.binding == "" && !st.bound {
			out = append(out, st.key)
		}
	}
	for k := range da.unmapped {
		da.dirty.add(&da.dirty.claims, k)
	}
	return out
}

// exitCode is a finished pod's exit code: its first failed container's,
// 1 when a failed pod has none, else 0.
func exitCode(pod *corev1.Pod) int {
	if pod.Status.Phase != corev1.PodFailed {
		return 0
	}
	for _, c := range pod.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil && t.ExitCode != 0 {
			return int(t.ExitCode)
		}
	}
	return 1
}

// adoptedTask is the task that counts a running pod: its request,
// pinned to its node, taking any taint; a pod of another scheduler is not
// preemptible (hetsched does not evict what it did not place).
func (rn *reconciler) adoptedTask(pod *corev1.Pod, id string) api.Task {
	s := rn.s
	// It may go back to waiting (Requeue): one that does not fit where it
	// runs waits there to be counted; one the engine sends back otherwise
	// (preempted) is evicted (decide).
	t := podTask(pod, id)
	t.Tolerations = []string{"*"}
	if len(pod.Spec.NodeName) <= 63 && api.ValidateLabelValue(pod.Spec.NodeName) == nil {
		t.NodeSelector = map[string]string{api.NodeNameLabel: pod.Spec.NodeName}
	}
	// What hetsched can hold of its request, all of it counted (a
	// resource it cannot hold no node offers it either).
	t.Resources, _ = podRequest(pod)
	t.Resources = s.csi.request(pod, s.vol, t.Resources)
	prio, err := s.pods.priority(pod)
	if err != nil {
		prio = api.PriorityMedium
	}
	t.Priority = &prio
	t.PriorityValue = s.pods.value(pod)
	adoptedConstraints(s.pods, pod, &t)
	if pod.Spec.SchedulerName != s.cfg.SchedulerName || s.byUID[pod.UID] != nil && s.byUID[pod.UID].keep {
		t.Preemptible = boolPtr(false)
		return t
	}
	if v, err := strconv.ParseBool(pod.Annotations[AnnotationPreemptible]); err == nil {
		t.Preemptible = &v
	}
	t.Queue = pod.Labels[LabelQueue] // dropped in apply when no such queue exists
	return t
}

// countedAs is what a running pod's task is made from and may change
// while it runs: its request (a resize) and its labels.
func countedAs(pod *corev1.Pod) string {
	req, _ := podRequest(pod)
	return req.String() + "|" + fmt.Sprint(pod.Labels)
}

// adoptedConstraints gives a running pod's task its host ports, labels
// and (anti-)affinity, which count where it runs: another pod's
// anti-affinity may keep pods from it, and its own keeps the pods its
// selector matches off its domain. A pod is always counted: what cannot
// be translated or held (a namespaceSelector that cannot be resolved,
// more labels than a task holds) is left out, the rest kept.
func adoptedConstraints(pt podTranslator, pod *corev1.Pod, t *api.Task) {
	if err := pt.podConstraints(pod, t); err != nil {
		t.Affinity, t.AntiAffinity, t.Spread, t.PreferredNodeAffinity = nil, nil, nil, nil
		t.HostPorts = podHostPorts(pod)
	}
	if t.Validate() == nil {
		return
	}
	t.Affinity, t.AntiAffinity, t.Spread, t.PreferredNodeAffinity = nil, nil, nil, nil
	if t.Validate() == nil {
		return
	}
	t.Metadata = map[string]string{metaNamespace: pod.Namespace, metaPod: pod.Name}
	if t.Validate() != nil {
		t.HostPorts = nil
	}
}

// adoptedDevices are the devices a running pod holds: what hetsched's
// annotation says for its own pods, any free ones for the others'.
func adoptedDevices(pod *corev1.Pod, scheduler string) []api.DeviceRef {
	if pod.Spec.SchedulerName != scheduler {
		return nil
	}
	// DRA devices are held by their claims' tasks, not the pod's.
	return slices.DeleteFunc(parseDevices(pod.Annotations[AnnotationDevices]), func(d api.DeviceRef) bool { return isDRAType(d.Type) })
}

// apply carries out a batch: ends first (they free capacity), then
// adoptions, then new work.
func (s *Scheduler) apply(ctx context.Context, b *podBatch) {
	if len(b.end) > 0 {
		s.dec.starts.flush(ctx) // a bound pod's task starts before it ends
	}
	parallel(64, len(b.end), func(i int) {
		e := b.end[i]
		var err error
		if e.finished {
			err = s.eng.Finished(ctx, e.id, engine.Result{ExitCode: e.code})
		}
		if !e.finished || err != nil {
			err = s.eng.Cancel(ctx, e.id)
		}
		if err != nil && ctx.Err() == nil {
			s.log.Debug("ending task", "task", e.id, "err", err)
		}
	})
	if len(b.adopt) > 0 {
		// A running pod is counted even when its queue label names no
		// queue: it runs anyway.
		known := map[string]bool{}
		for _, q := range s.eng.Queues("") {
			known[q.Name] = true
		}
		for i := range b.adopt {
			if !known[b.adopt[i].Task.Queue] {
				b.adopt[i].Task.Queue = ""
			}
		}
	}
	for len(b.adopt) > 0 {
		batch := b.adopt[:min(len(b.adopt), 4096)]
		b.adopt = b.adopt[len(batch):]
		errs, err := s.eng.Adopt(ctx, "", batch)
		for i := range batch {
			if err == nil {
				err = errs[i]
			}
			if err != nil && ctx.Err() == nil {
				s.log.Warn("could not count a running pod", "pod", batch[i].Task.Name, "node", batch[i].Node, "err", err)
			}
		}
	}
	for len(b.submit) > 0 {
		batch := b.submit[:min(len(b.submit), 4096)]
		b.submit = b.submit[len(batch):]
		_, errs, err := s.eng.Submit(ctx, "", batch)
		for i := range batch {
			e := err
			if e == nil {
				e = errs[i]
			}
			if e != nil {
				s.submitFailed(ctx, batch[i].ID, e)
			}
		}
	}
	for _, j := range b.jobs {
		if _, err := s.eng.SubmitJob(ctx, "", j); err != nil {
			for _, t := range j.Tasks {
				s.submitFailed(ctx, engine.JobTaskID(j.ID, t.ID), err)
			}
		}
	}
	for _, st := range b.invalid {
		s.dec.reportInvalid(ctx, st)
	}
	for _, g := range b.gathering {
		s.dec.reportUnschedulable(ctx, g.st.key, g.st.uid, g.why)
	}
}

// submitFailed unregisters a task the engine refused and reports why.
func (s *Scheduler) submitFailed(ctx context.Context, id string, err error) {
	s.mu.Lock()
	st := s.byUID[s.tasks[id]]
	delete(s.tasks, id)
	if st != nil && st.task == id {
		st.task = ""
		st.invalid = err.Error()
	}
	s.mu.Unlock()
	if st != nil && ctx.Err() == nil {
		s.dec.reportInvalid(ctx, st)
	}
}

// parallel runs fn(0..n-1) on up to k goroutines.
func parallel(k, n int, fn func(i int)) {
	if n == 0 {
		return
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(k, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
