package core

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Property tests of tenant queues (queues.go, preempt.go, fairshare.go): a
// random queue tree (1-6 queues, depth up to 3, parents first, weight 1-4,
// guarantees and maxes on cpu and GPUs that api.ValidateQueueTree accepts),
// a few nodes, and random inputs: plain tasks (of a queue, of none, of a
// queue the core does not know; priority 0-3; preemptible or not; requeue:
// false now and then; now and then an alternative request), jobs
// (fail-fast or not, gangs of 2-3 members with their own preemptible and
// requeue flags), finishing, cancelling and starting placed tasks, time
// passing, raised (or dropped) maxes and new weights (SetQueue), node
// states, and nodes removed and added back.
//
// After every input (every Tick of the final phases included):
//
//   - checkInvariants;
//   - no queue holds more than its max of any resource: the usage is
//     recomputed from the test's own record of which queue (and ancestors)
//     each placed task belongs to and which option its Placement chose,
//     and must also equal QueueUsage. Maxes are only ever raised (or
//     dropped), so this holds after every input;
//   - FairShares: a queue's fair share is within its max, and the shares
//     of a parent's children add up to no more than the parent's;
//   - every Preemption of the input names a task that was placed before
//     it (a transition from scheduled or running says so), that was
//     preemptible and had run PreemptMinRuntime, whose reason is honest
//     (priority: a more important urgent or high task; reclaim: the
//     preemptor's queue has a guarantee; gang: the victim is in a gang), and
//     that is not lost: it is pending again, or placed again by a Placement
//     of the same input, or it ended only because it (or a task of its job
//     evicted by the same input) said requeue: false; and every transition
//     to preempted has its Preemption;
//   - every Placement's task is scheduled at the end of the input on the
//     Placement's (ready) node, unless a transition of the same input
//     moved it on; conversely a task's state changes only with a Placement
//     or a Transition of that input saying so;
//   - bookkeeping: every submitted task is known (Stats.Submitted and
//     NumTasks count them), each is in exactly one of pending, blocked,
//     scheduled, running or a terminal state; Pending() (class queues and
//     gang-ready lists) plus the tasks in retry backoff is every pending
//     task; the placed ones are exactly the nodes' tasks; a terminal task
//     never changes again;
//   - no input makes MaxPlacementsPerCall (8192) placements: a case holds
//     a few hundred tasks at most, so that many placements in one input
//     are tasks placed and evicted over and over (a bound with a wide
//     margin, not an exact one).
//
// Liveness, at the end: every node is added back and made ready, some
// maxes are raised (only SetQueue itself can let in what they refused),
// nothing finishes, and the core is ticked at NextWakeup for a minute.
//
//   - Quiescence: another minute of Ticks at NextWakeup places and evicts
//     nothing. Every timer of a case (retry backoff, PreemptMinRuntime,
//     PreemptRetry, batch windows, aging) is due within seconds, no input
//     comes and nothing finishes, so work still moving is a livelock:
//     tasks evicting each other in turn.
//   - Then no pending task outside gangs and backoff fits now: for none of
//     its options are the cpu and whole GPUs free on some node
//     (recomputed from the placed tasks' specs) with every queue above it
//     below its max by the request. A task that fits and stays pending
//     would mean a lost wakeup (after a release, an eviction, a raised
//     max, a node coming back).
//
// TestPropertyTenantQueues draws everything; TestPropertyTenantQueuesGangs
// submits gangs often and keeps the nodes; TestPropertyTenantQueuesPlain
// leaves out jobs and node changes, so that a failure of queues alone
// shrinks to fewer inputs. The deterministic tests at the end pin the
// bugs these found.

// qpOpts selects what a case may draw.
type qpOpts struct {
	jobs  int  // of 16 draws, how many submit a job (fail-fast or not, a gang or not); 0: no jobs
	gangs bool // every job is a gang
	nodes bool // node states, removal and re-adding
}

type qpNode struct {
	name    string
	cpu     int64 // milli
	gpus    int
	present bool
}

func (n *qpNode) spec() *api.Node {
	s := &api.Node{Name: n.name, Capacity: resource.List{resource.CPU: n.cpu, resource.Memory: 64 << 30}}
	for d := 0; d < n.gpus; d++ {
		s.Devices = append(s.Devices, api.Device{Type: gpuRes, ID: fmt.Sprint(d), Model: "A"})
	}
	return s
}

// qpFailure is a failed check.
type qpFailure struct{ msg string }

type qpCase struct {
	t      *rapid.T
	opts   qpOpts
	cfg    Config
	c      *Core
	now    time.Time
	start  time.Time
	queues []*api.Queue // creation order, the current specs
	qmap   map[string]*api.Queue
	nodes  []*qpNode

	specs  map[string]*api.Task
	ids    []string
	jobOf  map[string]string   // task id -> job id
	jobIDs map[string][]string // job id -> task ids
	gangOf map[string]bool     // task id is a gang member
	njobs  int
	nplain int

	prev     map[string]State     // state after the previous input
	startAt  map[string]time.Time // placed or started, whichever is later
	chosen   map[string]int       // the option of the latest Placement
	terminal map[string]State
	hist     []string
}

var qpQueueRes = []resource.Name{resource.CPU, gpuRes}

func (k *qpCase) fail(format string, args ...any) {
	panic(qpFailure{fmt.Sprintf(format, args...)})
}

func (k *qpCase) logf(format string, args ...any) {
	k.hist = append(k.hist, fmt.Sprintf("%8s ", k.now.Sub(k.start))+fmt.Sprintf(format, args...))
}

func (k *qpCase) report(msg string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\nconfig: policy=%s preemptMinRuntime=%s gangReserveAfter=%s\nqueues:\n", msg, k.cfg.Policy, k.cfg.PreemptMinRuntime, k.cfg.GangReserveAfter)
	for _, q := range k.queues {
		fmt.Fprintf(&b, "  %s parent=%s weight=%v guaranteed=%v max=%v\n", q.Name, q.ParentOrRoot(), q.Weight, q.Guaranteed, q.Max)
	}
	b.WriteString("nodes:\n")
	for _, n := range k.nodes {
		fmt.Fprintf(&b, "  %s cpu=%dm gpus=%d\n", n.name, n.cpu, n.gpus)
	}
	b.WriteString("inputs:\n")
	for _, h := range k.hist {
		b.WriteString("  " + h + "\n")
	}
	return b.String()
}

// --- drawing

// drawQueues draws a tree that api.ValidateQueueTree accepts (a draw it
// refuses is skipped: the core's contract starts after validation).
func (k *qpCase) drawQueues() {
	t := k.t
	n := rapid.IntRange(1, 6).Draw(t, "queues")
	depth := map[string]int{}
	for i := 0; i < n; i++ {
		q := &api.Queue{Name: fmt.Sprintf("q%d", i), Weight: float64(rapid.IntRange(1, 4).Draw(t, "weight"))}
		var parents []string
		for _, p := range k.queues {
			if depth[p.Name] < 3 {
				parents = append(parents, p.Name)
			}
		}
		if len(parents) > 0 && rapid.Bool().Draw(t, "nested") {
			q.Parent = parents[rapid.IntRange(0, len(parents)-1).Draw(t, "parent")]
			depth[q.Name] = depth[q.Parent] + 1
		} else {
			depth[q.Name] = 1
		}
		for _, r := range qpQueueRes {
			var g int64 = -1
			if rapid.IntRange(0, 2).Draw(t, "guarSet") == 0 {
				g = int64(rapid.IntRange(0, 6).Draw(t, "guar")) * 1000
				if p := k.qmap[q.Parent]; p != nil && p.Guaranteed != nil {
					if pg, ok := p.Guaranteed[r]; ok {
						// Leave room for the siblings drawn so far.
						left := pg
						for _, s := range k.queues {
							if s.Parent == q.Parent {
								left -= s.Guaranteed[r]
							}
						}
						g = min(g, max(left, 0))
					}
				}
				if q.Guaranteed == nil {
					q.Guaranteed = resource.List{}
				}
				q.Guaranteed[r] = g
			}
			if rapid.IntRange(0, 2).Draw(t, "maxSet") == 0 {
				m := int64(rapid.IntRange(0, 6).Draw(t, "max")) * 1000
				if g > m {
					m = g
				}
				if q.Max == nil {
					q.Max = resource.List{}
				}
				q.Max[r] = m
			}
		}
		if err := q.Validate(); err != nil {
			continue
		}
		if err := api.ValidateQueueTree(q, k.qmap); err != nil {
			continue
		}
		k.setQueue(q)
	}
}

func (k *qpCase) setQueue(q *api.Queue) {
	k.logf("SetQueue %s parent=%s weight=%v guaranteed=%v max=%v", q.Name, q.ParentOrRoot(), q.Weight, q.Guaranteed, q.Max)
	if err := k.c.SetQueue(k.now, q); err != nil {
		k.fail("SetQueue %s: %v", q.Name, err)
	}
	if k.qmap[q.Name] == nil {
		k.queues = append(k.queues, q)
	} else {
		for i := range k.queues {
			if k.queues[i].Name == q.Name {
				k.queues[i] = q
			}
		}
	}
	k.qmap[q.Name] = q
}

func (k *qpCase) drawNodes() {
	n := rapid.IntRange(1, 4).Draw(k.t, "nodes")
	for i := 0; i < n; i++ {
		nd := &qpNode{name: fmt.Sprintf("n%d", i), cpu: int64(rapid.IntRange(2, 8).Draw(k.t, "cores")) * 1000,
			gpus: rapid.IntRange(0, 4).Draw(k.t, "gpus"), present: true}
		k.nodes = append(k.nodes, nd)
		k.logf("UpsertNode %s cpu=%dm gpus=%d", nd.name, nd.cpu, nd.gpus)
		if err := k.c.UpsertNode(k.now, nd.spec()); err != nil {
			k.fail("UpsertNode: %v", err)
		}
	}
}

var qpCPUs = []int64{500, 1000, 2000, 4000}

// drawTask draws a task's spec, id set by the caller.
func (k *qpCase) drawTask(queue string, prio int, cpu int64, gpu int) *api.Task {
	spec := &api.Task{Queue: queue, Priority: &prio, Resources: resource.List{resource.CPU: cpu}}
	if gpu > 0 {
		spec.Resources[gpuRes] = int64(gpu) * 1000
	}
	if rapid.IntRange(0, 3).Draw(k.t, "nonPreemptible") == 0 {
		f := false
		spec.Preemptible = &f
	}
	if rapid.IntRange(0, 7).Draw(k.t, "noRequeue") == 0 {
		f := false
		spec.Requeue = &f
	}
	return spec
}

func (k *qpCase) drawQueueName() string {
	names := []string{"", "nosuch"}
	for _, q := range k.queues {
		names = append(names, q.Name, q.Name) // queues twice as likely
	}
	return names[rapid.IntRange(0, len(names)-1).Draw(k.t, "queue")]
}

func (k *qpCase) drawRequest() (int64, int) {
	cpu := rapid.SampledFrom(qpCPUs).Draw(k.t, "cpu")
	gpu := 0
	if rapid.IntRange(0, 2).Draw(k.t, "gpuSet") > 0 {
		gpu = rapid.IntRange(1, 2).Draw(k.t, "gpu")
	}
	return cpu, gpu
}

func (k *qpCase) submitted(spec *api.Task, job string) {
	k.specs[spec.ID] = spec
	k.ids = append(k.ids, spec.ID)
	if job != "" {
		k.jobOf[spec.ID] = job
		k.jobIDs[job] = append(k.jobIDs[job], spec.ID)
	}
}

func (k *qpCase) describe(s *api.Task) string {
	d := fmt.Sprintf("%s queue=%q prio=%d cpu=%dm", s.ID, s.Queue, *s.Priority, s.Resources[resource.CPU])
	if g := s.Resources[gpuRes]; g > 0 {
		d += fmt.Sprintf(" gpu=%d", g/1000)
	}
	for _, a := range s.Alternatives {
		d += fmt.Sprintf(" alt=(cpu=%dm gpu=%d)", a.Resources[resource.CPU], a.Resources[gpuRes]/1000)
	}
	if !s.IsPreemptible() {
		d += " preemptible=false"
	}
	if !s.Requeues() {
		d += " requeue=false"
	}
	return d
}

// drawAlternative gives spec, now and then, an alternative request.
func (k *qpCase) drawAlternative(spec *api.Task) {
	if rapid.IntRange(0, 3).Draw(k.t, "altSet") > 0 {
		return
	}
	cpu, gpu := k.drawRequest()
	alt := resource.List{resource.CPU: cpu}
	if gpu > 0 {
		alt[gpuRes] = int64(gpu) * 1000
	}
	spec.Alternatives = []api.Alternative{{Resources: alt, Speed: 0.5}}
}

func (k *qpCase) submitPlain() {
	k.nplain++
	cpu, gpu := k.drawRequest()
	spec := k.drawTask(k.drawQueueName(), rapid.IntRange(0, 3).Draw(k.t, "prio"), cpu, gpu)
	k.drawAlternative(spec)
	spec.ID = fmt.Sprintf("p%d", k.nplain)
	k.input("Submit "+k.describe(spec), func() error {
		err := k.c.Submit(k.now, spec)
		if err == nil {
			k.submitted(spec, "")
		}
		return err
	})
}

// submitJob adds a job: a gang of 2-3 members (identical requests, one
// queue, one priority; each member its own preemptible and requeue flags)
// or 1-3 independent tasks, fail-fast or not.
func (k *qpCase) submitJob() {
	t := k.t
	k.njobs++
	jid := fmt.Sprintf("j%d", k.njobs)
	spec := JobSpec{ID: jid, FailFast: rapid.Bool().Draw(t, "failFast"), RetryLimit: rapid.IntRange(0, 1).Draw(t, "retries"),
		RetryBackoff: time.Second}
	gang := k.opts.gangs || rapid.Bool().Draw(t, "gang")
	n := rapid.IntRange(1, 3).Draw(t, "jobTasks")
	if gang {
		n = max(n, 2)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s.t%d", jid, i)
	}
	if gang {
		spec.Gang = &GangSpec{Members: ids, MinMember: rapid.IntRange(1, n).Draw(t, "minMember")}
	}
	desc := fmt.Sprintf("AddJob %s failFast=%v retries=%d", jid, spec.FailFast, spec.RetryLimit)
	if gang {
		desc += fmt.Sprintf(" gang=%v min=%d", ids, spec.Gang.MinMember)
	}
	k.input(desc, func() error { return k.c.AddJob(k.now, spec) })
	queue, prio := k.drawQueueName(), rapid.IntRange(0, 3).Draw(t, "jobPrio")
	cpu, gpu := k.drawRequest()
	for _, id := range ids {
		if !gang {
			queue, prio = k.drawQueueName(), rapid.IntRange(0, 3).Draw(t, "taskPrio")
			cpu, gpu = k.drawRequest()
		}
		ts := k.drawTask(queue, prio, cpu, gpu)
		ts.ID = id
		if gang {
			k.gangOf[id] = true
		} else {
			k.drawAlternative(ts)
		}
		k.input("SubmitJobTask "+jid+" "+k.describe(ts), func() error {
			err := k.c.SubmitJobTask(k.now, jid, ts)
			if err == nil {
				k.submitted(ts, jid)
			}
			return err
		})
	}
}

// pick returns a random task id whose task passes ok, "" when none.
func (k *qpCase) pick(label string, ok func(*Task) bool) string {
	return drawTaskID(k.t, k.c, k.ids, label, ok)
}

func (k *qpCase) step() {
	t := k.t
	switch op := rapid.IntRange(0, 15).Draw(t, "op"); op {
	case 0, 1, 2, 3, 4:
		if op < k.opts.jobs {
			k.submitJob()
		} else {
			k.submitPlain()
		}
	case 5, 6:
		id := k.pick("finishPick", func(t *Task) bool { return isPlaced(t.state) })
		if id == "" {
			return
		}
		r := Result{}
		if rapid.IntRange(0, 3).Draw(t, "failed") == 0 {
			r.ExitCode = 1
		}
		k.input(fmt.Sprintf("TaskFinished %s exit=%d", id, r.ExitCode), func() error { return k.c.TaskFinished(k.now, id, r) })
	case 7:
		if id := k.pick("cancelPick", func(t *Task) bool { return !t.state.Terminal() }); id != "" {
			k.input("Cancel "+id, func() error { return k.c.Cancel(k.now, id, "") })
		}
	case 8:
		if id := k.pick("startPick", func(t *Task) bool { return t.state == Scheduled }); id != "" {
			k.input("TaskStarted "+id, func() error {
				k.startAt[id] = k.now
				return k.c.TaskStarted(k.now, id)
			})
		}
	case 9:
		k.changeQueue()
	case 10:
		if k.opts.nodes {
			k.changeNode()
			return
		}
		fallthrough
	default:
		var d time.Duration
		switch rapid.IntRange(0, 2).Draw(t, "advKind") {
		case 0:
			d = time.Duration(rapid.IntRange(0, 50).Draw(t, "ms")) * time.Millisecond
		case 1:
			d = time.Duration(rapid.IntRange(1, 5).Draw(t, "s")) * time.Second
		case 2:
			d = 30 * time.Second
		}
		k.now = k.now.Add(d)
		k.input("Tick +"+d.String(), func() error { k.c.Tick(k.now); return nil })
	}
}

// changeQueue raises (or drops) a max, or sets a new weight: a copy of the
// queue's spec with that one change, so that the tree stays valid.
func (k *qpCase) changeQueue() {
	if len(k.queues) == 0 {
		return
	}
	t := k.t
	kind := rapid.IntRange(0, 3).Draw(t, "change")
	cands := k.queues
	if kind > 0 {
		cands = nil
		for _, q := range k.queues {
			if len(q.Max) > 0 {
				cands = append(cands, q)
			}
		}
		if len(cands) == 0 {
			return
		}
	}
	old := cands[rapid.IntRange(0, len(cands)-1).Draw(t, "changeQueue")]
	q := *old
	q.Max = resource.List{}
	var res []resource.Name
	for _, r := range qpQueueRes {
		if v, ok := old.Max[r]; ok {
			q.Max[r] = v
			res = append(res, r)
		}
	}
	switch kind {
	case 0:
		q.Weight = float64(rapid.IntRange(1, 4).Draw(t, "newWeight"))
	case 1, 2:
		q.Max[rapid.SampledFrom(res).Draw(t, "raiseRes")] += int64(rapid.IntRange(1, 3).Draw(t, "raise")) * 1000
	case 3:
		delete(q.Max, rapid.SampledFrom(res).Draw(t, "dropRes"))
	}
	if len(q.Max) == 0 {
		q.Max = nil
	}
	k.replaceQueue(&q)
}

// replaceQueue applies a changed copy of a queue's spec.
func (k *qpCase) replaceQueue(q *api.Queue) {
	k.logf("SetQueue %s weight=%v max=%v", q.Name, q.Weight, q.Max)
	k.input("", func() error {
		err := k.c.SetQueue(k.now, q)
		if err == nil {
			k.qmap[q.Name] = q
			for i := range k.queues {
				if k.queues[i].Name == q.Name {
					k.queues[i] = q
				}
			}
		}
		return err
	})
}

var qpStates = []string{api.NodeReady, api.NodeCordoned, api.NodeDraining, api.NodeNotReady}

func (k *qpCase) changeNode() {
	t := k.t
	n := k.nodes[rapid.IntRange(0, len(k.nodes)-1).Draw(t, "node")]
	switch {
	case !n.present:
		k.input("UpsertNode "+n.name+" (back)", func() error {
			n.present = true
			return k.c.UpsertNode(k.now, n.spec())
		})
	case rapid.IntRange(0, 3).Draw(t, "remove") == 0:
		k.input("RemoveNode "+n.name, func() error {
			n.present = false
			return k.c.RemoveNode(k.now, n.name)
		})
	default:
		st := rapid.SampledFrom(qpStates).Draw(t, "state")
		k.input("SetNodeState "+n.name+" "+st, func() error { return k.c.SetNodeState(k.now, n.name, st) })
	}
}

// --- checking

// input runs one input (logged as desc unless empty), then every check.
func (k *qpCase) input(desc string, do func() error) {
	if desc != "" {
		k.logf("%s", desc)
	}
	if err := do(); err != nil {
		k.fail("%s: unexpected error: %v", desc, err)
	}
	out := k.c.TakeOutput()
	k.logOutput(&out)
	k.check(&out)
}

func (k *qpCase) logOutput(out *Output) {
	var parts []string
	for _, p := range out.Placements {
		parts = append(parts, "placed "+p.Task+" on "+p.Node)
	}
	for _, p := range out.Preemptions {
		parts = append(parts, fmt.Sprintf("preempt %s by %s (%s)", p.Victim, p.By, p.Reason))
	}
	for _, tr := range out.Transitions {
		parts = append(parts, fmt.Sprintf("%s %s->%s", tr.Task, tr.From, tr.To))
	}
	if len(parts) > 0 {
		const most = 40
		if len(parts) > most {
			parts = append(parts[:most], fmt.Sprintf("... (%d more)", len(parts)-most))
		}
		k.hist = append(k.hist, "         => "+strings.Join(parts, "; "))
	}
}

// chain is the queues a task of spec counts against, its own first (none
// for a task of no queue or of a queue the core does not know).
func (k *qpCase) chain(spec *api.Task) []string {
	var out []string
	for q := k.qmap[spec.Queue]; q != nil; q = k.qmap[q.Parent] {
		out = append(out, q.Name)
	}
	return out
}

// guaranteed reports whether spec's queue or an ancestor has a guarantee.
func (k *qpCase) guaranteed(spec *api.Task) bool {
	for _, name := range k.chain(spec) {
		if len(k.qmap[name].Guaranteed) > 0 {
			return true
		}
	}
	return false
}

// --- liveness

// --- running

func runQP(t *rapid.T, opts qpOpts) {
	cfg := DefaultConfig()
	cfg.Policy = rapid.SampledFrom([]string{"least-allocated", "binpack", "spread"}).Draw(t, "policy")
	cfg.PreemptMinRuntime = rapid.SampledFrom([]time.Duration{0, 0, 2 * time.Second}).Draw(t, "preemptMinRuntime")
	cfg.GangReserveAfter = rapid.SampledFrom([]time.Duration{0, time.Minute}).Draw(t, "gangReserveAfter")
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	k := &qpCase{t: t, opts: opts, cfg: cfg, c: c, now: time.Unix(1_000_000, 0), qmap: map[string]*api.Queue{},
		specs: map[string]*api.Task{}, jobOf: map[string]string{}, jobIDs: map[string][]string{}, gangOf: map[string]bool{},
		prev: map[string]State{}, startAt: map[string]time.Time{}, chosen: map[string]int{}, terminal: map[string]State{}}
	k.start = k.now
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(qpFailure)
			if !ok {
				if s := fmt.Sprintf("%T", r); s == "rapid.invalidData" || s == "rapid.stopTest" {
					panic(r)
				}
				f.msg = fmt.Sprintf("panic: %v", r)
			}
			t.Fatal(k.report(f.msg))
		}
	}()
	k.drawQueues()
	k.drawNodes()
	c.TakeOutput()
	n := rapid.IntRange(1, 120).Draw(t, "steps")
	for i := 0; i < n; i++ {
		k.step()
	}
	k.liveness()
}

// TestPropertyTenantQueues: random queue trees, tasks, jobs and gangs,
// queue and node changes; the checks of the top of this file after every
// input, liveness at the end.
func TestPropertyTenantQueues(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runQP(t, qpOpts{jobs: 2, nodes: true}) })
}

// TestPropertyTenantQueuesGangs: gangs submitted often (each member with
// its own preemptible and requeue flags), nodes fixed.
func TestPropertyTenantQueuesGangs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runQP(t, qpOpts{jobs: 4, gangs: true}) })
}

// TestPropertyTenantQueuesPlain: plain tasks only, nodes fixed (shrinks
// further).
func TestPropertyTenantQueuesPlain(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) { runQP(t, qpOpts{}) })
}

// --- regressions found by the property tests above
