package core

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Deterministic tests of jobs (retries, fail-fast, gangs) and locality:
// each drives a core through a short input sequence, checks the invariants
// (checkInvariants, which includes checkJobInvariants) after every input,
// and then the outcome. Those named after a bug reproduce it in the
// smallest form found; they fail until the core is fixed.

// jh is a small driver for these tests.
type jh struct {
	t   *testing.T
	c   *Core
	now time.Time
}

func newJH(t *testing.T, cfg Config) *jh {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &jh{t: t, c: c, now: time.Unix(1000, 0)}
}

// ok fails the test on err, then checks the invariants.
func (h *jh) ok(what string, err error) {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("%s: %v", what, err)
	}
	h.inv(what)
}

func (h *jh) inv(what string) {
	h.t.Helper()
	if err := checkInvariants(h.c); err != nil {
		h.t.Fatalf("after %s: invariant: %v", what, err)
	}
}

func (h *jh) adv(d time.Duration) { h.now = h.now.Add(d) }

func (h *jh) node(name string, cpu int64, labels map[string]string, taints ...string) {
	h.t.Helper()
	spec := &api.Node{Name: name, Labels: labels, Taints: taints,
		Capacity: resource.List{resource.CPU: cpu, resource.Memory: 64 << 30}}
	h.ok("node "+name, h.c.UpsertNode(h.now, spec))
}

func (h *jh) job(spec JobSpec) {
	h.t.Helper()
	h.ok("job "+spec.ID, h.c.AddJob(h.now, spec))
}

func prioP(p int) *int { return &p }

// task is a spec asking for cpu milli-cores at priority prio.
func jtask(id string, prio int, cpu int64, deps ...string) *api.Task {
	return &api.Task{ID: id, Priority: prioP(prio), Resources: resource.List{resource.CPU: cpu}, Depends: deps}
}

func (h *jh) submit(job string, spec *api.Task) {
	h.t.Helper()
	var err error
	if job != "" {
		err = h.c.SubmitJobTask(h.now, job, spec)
	} else {
		err = h.c.Submit(h.now, spec)
	}
	h.ok("submit "+spec.ID, err)
}

func (h *jh) finish(id string, exit int) {
	h.t.Helper()
	h.ok("finish "+id, h.c.TaskFinished(h.now, id, Result{ExitCode: exit}))
}

func (h *jh) task(id string) *Task {
	h.t.Helper()
	t, ok := h.c.Task(id)
	if !ok {
		h.t.Fatalf("no task %s", id)
	}
	return t
}

func (h *jh) state(id string) State { return h.task(id).state }

func (h *jh) want(id string, s State) {
	h.t.Helper()
	if got := h.state(id); got != s {
		h.t.Fatalf("task %s is %s (%q), want %s", id, got, h.task(id).reason, s)
	}
}

// settle ticks at NextWakeup, as a driver that sleeps until then does,
// until nothing is due within horizon.
func (h *jh) settle(horizon time.Duration) {
	h.t.Helper()
	end := h.now.Add(horizon)
	for i := 0; i < 10000; i++ {
		next, ok := h.c.NextWakeup()
		if !ok || next.After(end) {
			h.now = end
			return
		}
		if next.After(h.now) {
			h.now = next
		}
		h.c.Tick(h.now)
		h.inv("tick")
	}
	h.t.Fatalf("settle: NextWakeup keeps answering")
}

func TestJobRetryBackoffThenSuccess(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 4000, nil)
	h.job(JobSpec{ID: "j", RetryLimit: 2, RetryBackoff: time.Second})
	h.submit("j", jtask("a", 0, 1000))
	h.want("a", Scheduled)
	h.finish("a", 1)
	h.want("a", Pending)
	if a := h.task("a"); !a.backoff || a.Failures() != 1 {
		t.Fatalf("a: backoff %v failures %d", a.backoff, a.Failures())
	}
	h.adv(999 * time.Millisecond)
	h.c.Tick(h.now)
	h.inv("tick")
	h.want("a", Pending)
	h.adv(time.Millisecond)
	h.c.Tick(h.now)
	h.inv("tick")
	h.want("a", Scheduled)
	h.finish("a", 1) // second retry: 2s
	h.settle(time.Minute)
	h.want("a", Scheduled)
	h.finish("a", 1) // retries spent
	h.want("a", Failed)
}

func TestJobFailFastCancelsPlacedAndBackoffTasks(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 4000, nil)
	h.job(JobSpec{ID: "j", FailFast: true, RetryLimit: 1})
	h.submit("j", jtask("a", 0, 1000))
	h.submit("j", jtask("b", 0, 1000))
	h.submit("j", jtask("c", 0, 1000, "a"))
	h.finish("b", 1) // b in backoff
	h.want("b", Pending)
	h.finish("a", 1) // a in backoff
	h.settle(time.Minute)
	h.finish("a", 1) // a's retries spent: fail fast
	h.want("a", Failed)
	for _, id := range []string{"b", "c"} {
		if s := h.state(id); !s.Terminal() {
			t.Fatalf("%s is %s after fail-fast", id, s)
		}
	}
}

func TestGangAllOrNothing(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 2000, nil)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b", "c"}, MinMember: 3}})
	for _, id := range []string{"a", "b", "c"} {
		h.submit("g", jtask(id, 1, 1000))
	}
	for _, id := range []string{"a", "b", "c"} {
		h.want(id, Pending)
	}
	h.node("n1", 1000, nil)
	for _, id := range []string{"a", "b", "c"} {
		h.want(id, Scheduled)
	}
}

// TestGangRestartAfterMemberSucceeded: a member that succeeded cannot be
// placed again, but it still counts among the members the gang needs to
// start: after a restart the gang waits for ever.
//
// Bug: gangMemberLeft (jobs.go:202) keeps a succeeded member out of
// g.placed and restarts the gang when another member leaves without
// success; placeGangs (jobs.go:288) then needs placed+ready >= minMember,
// which the remaining members can never reach, and gangCheckReachable
// counts only failures. Sequence: gang {a, b} minMember 2 (no timeout),
// both placed; a succeeds; b is lost (TaskLost) -> b pending for ever
// ("waiting for its gang: 1 of 2 members pending or placed"), the node
// empty.
func TestGangRestartAfterMemberSucceeded(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 4000, nil)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b"}, MinMember: 2}})
	h.submit("g", jtask("a", 0, 1000))
	h.submit("g", jtask("b", 0, 1000))
	h.want("a", Scheduled)
	h.want("b", Scheduled)
	h.finish("a", 0)
	h.ok("lost b", h.c.TaskLost(h.now, "b", "agent lost"))
	h.settle(time.Hour)
	if s := h.state("b"); s == Pending || s == Blocked {
		t.Fatalf("b stays %s for ever (%q) on an empty node: a gang whose member succeeded can never start again", s, h.task("b").reason)
	}
}

// TestGangMemberEndedBeforeOthersJoined: a gang that became unreachable
// before all its members were submitted keeps the late members pending for
// ever.
//
// Bug: gangCheckReachable (jobs.go:224) runs only when a member ends; a
// member submitted afterwards (attachJob, gangEnqueue) is not checked.
// Sequence: gang {a, b} minMember 2; submit a; cancel a; submit b -> b
// pending for ever.
func TestGangMemberEndedBeforeOthersJoined(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 4000, nil)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b"}, MinMember: 2}})
	h.submit("g", jtask("a", 0, 1000))
	h.ok("cancel a", h.c.Cancel(h.now, "a", ""))
	h.submit("g", jtask("b", 0, 1000))
	h.settle(time.Hour)
	if s := h.state("b"); s == Pending {
		t.Fatalf("b stays pending for ever (%q): its gang can no longer reach minMember", h.task("b").reason)
	}
}

// TestGangMemberSkippedByDependency: a member skipped because a
// dependency failed is not counted as a member that ended without success.
//
// Bug: settleDependents (task.go) and Submit's skip path move a
// task to Skipped without jobTaskEnded, so g.failed misses it and
// gangCheckReachable never runs. Sequence: job j with p0, p1 and gang
// {w0 (after p0), w1 (after p1)} minMember 2; p1 fails -> w1 skipped; p0
// succeeds -> w0 pending for ever. checkJobInvariants reports it at once
// ("failed 0, members ended without success 1").
func TestGangMemberSkippedByDependency(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 4000, nil)
	h.job(JobSpec{ID: "j", Gang: &GangSpec{Members: []string{"w0", "w1"}, MinMember: 2}})
	h.submit("j", jtask("p0", 0, 500))
	h.submit("j", jtask("p1", 0, 500))
	h.submit("j", jtask("w0", 0, 1000, "p0"))
	h.submit("j", jtask("w1", 0, 1000, "p1"))
	h.finish("p1", 1)
	h.want("w1", Skipped)
	h.finish("p0", 0)
	h.settle(time.Hour)
	if s := h.state("w0"); s == Pending {
		t.Fatalf("w0 stays pending for ever (%q): its gang lost w1 to a skip", h.task("w0").reason)
	}
}

// TestPreemptTwoMembersOfOneGang: preemption evicts two members of one
// gang; the first eviction restarts the gang, which re-queues the second,
// and then the second is re-queued again.
//
// Bug: tryPreempt (preempt.go:102) requeues every planned victim without
// checking that it is still placed; requeue (task.go) on a
// pending task enqueues it a second time (twice in its gang's ready list).
// The same happens in replaceNode's NoExecute loop (nodes.go, see
// TestNoExecuteTaintEvictsAGang). Fix: requeue returns at once for a task
// that is not scheduled or running (or the callers skip such victims).
func TestPreemptTwoMembersOfOneGang(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 2000, nil)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b"}, MinMember: 2}})
	h.submit("g", jtask("a", 3, 1000))
	h.submit("g", jtask("b", 3, 1000))
	h.want("a", Scheduled)
	h.want("b", Scheduled)
	h.submit("", jtask("u", 0, 2000)) // evicts a and b
	h.want("u", Scheduled)
	for _, id := range []string{"a", "b"} {
		h.want(id, Pending)
	}
	if n := len(h.task("a").gang.ready); n != 2 {
		t.Fatalf("gang ready list holds %d entries, want 2", n)
	}
}

// TestNoExecuteTaintEvictsAGang: a NoExecute taint on a node holding two
// members of one gang (replaceNode's taint loop walks a copy of the
// node's tasks; the first eviction restarts the gang and re-queues the
// second, which the loop then re-queues again).
func TestNoExecuteTaintEvictsAGang(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 2000, nil)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b"}, MinMember: 2}})
	h.submit("g", jtask("a", 1, 1000))
	h.submit("g", jtask("b", 1, 1000))
	h.want("a", Scheduled)
	h.want("b", Scheduled)
	h.node("n0", 2000, nil, "maint:NoExecute")
	for _, id := range []string{"a", "b"} {
		h.want(id, Pending)
		if a := h.task(id).attempt; a != 1 {
			t.Fatalf("%s: attempt %d after one eviction, want 1", id, a)
		}
	}
}

// TestGangLocalityWaitEnds: gang members preferring a busy node must be
// tried anywhere once their locality wait ends.
//
// Bug: fireLocality (locality.go:78) moves a gang-ready member to its own
// class without marking its gang dirty; the gang's last failed try has
// tried == capSeq, so placeGangs never tries it again until capacity
// changes. Sequence: nodes n1, n2 (2 cpu each); filler on n1 (2 cpu);
// gang {a, b} minMember 2, 1 cpu each, locality nodes [n1] -> pending;
// Tick past the wait (3s) -> still pending for ever, n2 empty.
func TestGangLocalityWaitEnds(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n1", 2000, nil)
	h.node("n2", 2000, nil)
	filler := jtask("filler", 0, 2000)
	filler.NodeSelector = map[string]string{NodeNameLabel: "n1"}
	h.submit("", filler)
	h.want("filler", Scheduled)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b"}, MinMember: 2}})
	for _, id := range []string{"a", "b"} {
		spec := jtask(id, 0, 1000)
		spec.Locality = &api.Locality{Nodes: []string{"n1"}}
		h.submit("g", spec)
	}
	h.want("a", Pending)
	h.settle(time.Minute)
	for _, id := range []string{"a", "b"} {
		if s := h.state(id); s != Scheduled {
			t.Fatalf("%s is %s (%q) a minute after its locality wait ended, n2 empty", id, s, h.task(id).reason)
		}
	}
}

// TestLocalityMoveKeepsAgingOrder: a pending task whose locality wait ends
// moves to its own class; it keeps its levelSince, so it must not be
// appended behind tasks that entered the level after it.
//
// Bug: fireLocality (locality.go:82) unqueues and pushLevels the task, and
// pushLevel appends it at the tail of its aging list, which is ordered by
// levelSince: age() stops at the first task not due and so raises the
// moved task late. checkInvariants reports "aging list out of order".
func TestLocalityMoveKeepsAgingOrder(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n1", 1000, nil)
	h.submit("", jtask("filler", 0, 1000))
	h.want("filler", Scheduled)
	loc := jtask("loc", 1, 1000)
	loc.Locality = &api.Locality{Nodes: []string{"n1"}}
	h.submit("", loc)
	h.adv(time.Second)
	h.submit("", jtask("later", 1, 1000))
	h.adv(3 * time.Second)
	h.c.Tick(h.now)
	h.inv("tick past the locality wait")
}

// TestGangTimeoutCountsFromRestart: a gang's start timeout counts from
// when it began waiting; after the gang started and then restarted, the
// timeout must count from the restart.
//
// Bug: g.since is set only when the gang enters gangs.wait (gangEnqueue,
// jobs.go:250) and a gang that keeps ready members stays there while it
// runs; gangMemberLeft's restart does not reset it, so gangTimeouts fails
// the gang at the first Tick after a restart. Sequence: node 2 cpu; gang
// {a, b, c} minMember 2, timeout 10s, retryLimit 1; a, b (1 cpu) placed,
// c (2 cpu) pending; 60s later a fails -> backoff 1s, b re-queued; the
// try of {b, c} cannot place 2; Tick at +1s -> a back, and every member
// fails "did not start within 10s" though the gang restarted 1s ago and
// a and b fit.
func TestGangTimeoutCountsFromRestart(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 2000, nil)
	h.job(JobSpec{ID: "g", RetryLimit: 1, RetryBackoff: time.Second,
		Gang: &GangSpec{Members: []string{"a", "b", "c"}, MinMember: 2, Timeout: 10 * time.Second}})
	h.submit("g", jtask("a", 0, 1000))
	h.submit("g", jtask("b", 0, 1000))
	h.submit("g", jtask("c", 0, 2000))
	h.want("a", Scheduled)
	h.want("b", Scheduled)
	h.want("c", Pending)
	h.adv(time.Minute)
	h.ok("started a", h.c.TaskStarted(h.now, "a"))
	h.finish("a", 1)
	h.want("a", Pending)
	h.want("b", Pending)
	h.adv(time.Second)
	h.c.Tick(h.now)
	h.inv("tick")
	for _, id := range []string{"a", "b"} {
		if s := h.state(id); s != Scheduled {
			t.Fatalf("%s is %s (%q) one second after its gang restarted", id, s, h.task(id).reason)
		}
	}
}

// TestGangTryDeferredIsResumed: a gang try whose search ran out of its
// MaxVisit budget must be resumed, as a deferred class is (RetryInterval).
//
// Bug: tryGang (jobs.go:346) treats deferred like unfit: the try is
// rolled back with tried = capSeq and nothing sets retryAt, so the gang
// waits for a capacity change that may never come. Sequence (SampleSize
// 1, MaxVisit 1, policy binpack): nodes n0, n1 {cpu 2, one GPU}; a {cpu
// 2} placed on n0; single-member gang {b} {cpu 750m} -> pending for ever,
// n1 empty (a plain task b is placed at the next Tick).
func TestGangTryDeferredIsResumed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy, cfg.SampleSize, cfg.MaxVisit = "binpack", 1, 1
	h := newJH(t, cfg)
	for _, n := range []string{"n0", "n1"} {
		h.ok("node "+n, h.c.UpsertNode(h.now, &api.Node{Name: n,
			Capacity: resource.List{resource.CPU: 2000, resource.Memory: 1 << 30},
			Devices:  []api.Device{{Type: "nvidia.com/gpu", ID: "0", Model: "A"}}}))
	}
	h.submit("", jtask("a", 0, 2000))
	h.want("a", Scheduled)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"b"}, MinMember: 1}})
	h.submit("g", jtask("b", 0, 750))
	h.settle(time.Minute)
	if s := h.state("b"); s != Scheduled {
		t.Fatalf("b is %s (%q), a node with room empty", s, h.task("b").reason)
	}
}

// TestGangSkippedByPlacementLimitIsResumed: placeGangs skips gangs once
// the input made MaxPlacementsPerCall placements (or tried maxGangTries
// gangs) but leaves no retry behind, so NextWakeup does not ask for the
// Tick that would place them.
//
// Bug: jobs.go:285 continues without setting retryAt/retrySet. Sequence
// (MaxPlacementsPerCall 1, tier 3 unbatched): node 2 cpu; filler (2 cpu)
// placed; p (priority 3, 1 cpu) and single-member gang {m} (1 cpu)
// pending; the filler finishes -> p placed, m skipped; NextWakeup: none;
// m pending for ever with 1 cpu free.
func TestGangSkippedByPlacementLimitIsResumed(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxPlacementsPerCall = 1
	cfg.Tiers[3].BatchSize, cfg.Tiers[3].Window, cfg.Tiers[3].AgingAfter = 0, 0, 0
	h := newJH(t, cfg)
	h.node("n0", 2000, nil)
	h.submit("", jtask("filler", 0, 2000))
	h.submit("", jtask("p", 3, 1000))
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"m"}, MinMember: 1}})
	h.submit("g", jtask("m", 3, 1000))
	h.want("p", Pending)
	h.want("m", Pending)
	h.adv(time.Millisecond)
	h.c.Tick(h.now) // the retry left by the filler's placement is done
	h.inv("tick")
	h.finish("filler", 0)
	h.want("p", Scheduled)
	h.settle(time.Hour)
	if s := h.state("m"); s != Scheduled {
		_, wake := h.c.NextWakeup()
		t.Fatalf("m is %s (%q) with 1 cpu free; NextWakeup set: %v", s, h.task("m").reason, wake)
	}
}

// TestRestoreGangCountsFailedMembers: after a restart, members that ended
// without success must still count against the gang's minMember.
//
// Bug: Restore (restore.go:65) puts terminal members back without
// counting them in g.failed, so the gang is no longer found unreachable:
// gang {a, b, c} minMember 2; a cancelled (reachable: 2 left); save and
// restore; cancel b -> c pending for ever (without the restart c fails:
// "can no longer reach minMember 2"). checkJobInvariants reports it at the
// restore.
func TestRestoreGangCountsFailedMembers(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 1000, nil)
	spec := JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b", "c"}, MinMember: 2}}
	h.job(spec)
	specs := []*api.Task{jtask("a", 0, 1000), jtask("b", 0, 1000), jtask("c", 0, 1000)}
	for _, s := range specs {
		h.submit("g", s)
	}
	h.ok("cancel a", h.c.Cancel(h.now, "a", ""))
	r := newJH(t, DefaultConfig())
	r.now = h.now
	r.node("n0", 1000, nil)
	r.job(spec)
	for _, s := range specs {
		saved, _ := h.c.SavedState(s.ID)
		r.ok("restore "+s.ID, r.c.Restore(r.now, s, saved))
	}
	r.c.Tick(r.now)
	r.inv("tick")
	r.ok("cancel b", r.c.Cancel(r.now, "b", ""))
	r.settle(time.Hour)
	if s := r.state("c"); s == Pending {
		t.Fatalf("c stays pending for ever after the restore (%q)", r.task("c").reason)
	}
}

// TestRestoreGangWithLostPlacement: a gang restored with one member's
// placement gone must not keep the others placed (partial hold).
//
// Bug: Restore (restore.go:58) marks the gang started for every member
// restored placed and re-queues a member whose placement cannot be
// restored without restarting the gang: gang {a, b} minMember 2 running
// on n0 and n1; restored without n1 -> a runs alone while b waits (for
// ever when nothing else fits b). checkJobInvariants reports "started
// with 1 placed and 0 succeeded, minMember 2".
func TestRestoreGangWithLostPlacement(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 1000, nil)
	h.node("n1", 1000, nil)
	spec := JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b"}, MinMember: 2}}
	h.job(spec)
	specs := []*api.Task{jtask("a", 0, 1000), jtask("b", 0, 1000)}
	for _, s := range specs {
		h.submit("g", s)
	}
	h.want("a", Scheduled)
	h.want("b", Scheduled)
	r := newJH(t, DefaultConfig())
	r.now = h.now
	r.node("n0", 1000, nil)
	r.job(spec)
	for _, s := range specs {
		saved, _ := h.c.SavedState(s.ID)
		if err := r.c.Restore(r.now, s, saved); err != nil {
			t.Fatal(err)
		}
	}
	r.c.Tick(r.now)
	r.inv("restore and tick")
	if a, b := r.state("a"), r.state("b"); (a == Scheduled) != (b == Scheduled) {
		t.Fatalf("after the restore a is %s and b is %s: a partial gang holds its node", a, b)
	}
}

func TestGangTimeoutNamesShortfall(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 1000, nil)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b"}, MinMember: 2, Timeout: 10 * time.Second}})
	h.submit("g", jtask("a", 0, 1000))
	h.submit("g", jtask("b", 0, 1000))
	h.settle(time.Minute)
	for _, id := range []string{"a", "b"} {
		h.want(id, Failed)
		if r := h.task(id).reason; !strings.Contains(r, "did not start within 10s") {
			t.Fatalf("%s: reason %q", id, r)
		}
	}
}

// TestGangLastMemberAfterOthersSucceeded: members that succeeded do not
// count towards MinMember, so once they finish, a member still pending can
// never join its started gang: it stays pending for ever, even with a gang
// timeout (gangTimeouts skips started gangs).
//
// Bug: placeGangs (jobs.go:288) needs placed+ready >= minMember and
// tryGang (jobs.go:355) placed+newly >= minMember, where placed leaves out
// the members that succeeded. Sequence: node 2 cpu; gang {a, b, c}
// minMember 2, 1 cpu each -> a, b placed, c pending; a plain x (1 cpu,
// same priority) pending; a succeeds -> x takes the cpu (class queues go
// before gangs); b succeeds -> placed 0, ready 1 < 2: c is never tried
// again; x succeeds -> c pending for ever on an empty node.
func TestGangLastMemberAfterOthersSucceeded(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 2000, nil)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b", "c"}, MinMember: 2, Timeout: time.Minute}})
	for _, id := range []string{"a", "b", "c"} {
		h.submit("g", jtask(id, 1, 1000))
	}
	h.want("a", Scheduled)
	h.want("b", Scheduled)
	h.want("c", Pending)
	h.submit("", jtask("x", 1, 1000))
	h.finish("a", 0)
	h.want("x", Scheduled)
	h.finish("b", 0)
	h.finish("x", 0)
	h.settle(time.Hour)
	if s := h.state("c"); s == Pending {
		t.Fatalf("c stays pending for ever (%q) on an empty node after a and b succeeded", h.task("c").reason)
	}
}

// The two tests below pin bugs outside the jobs code that the jobs
// property test (TestPropertyJobsTight) ran into: a search that can never
// succeed is deferred again every RetryInterval for ever, instead of
// ending unfit (and blocking its class until capacity appears). Nothing is
// stranded, but the core polls: two full attempts per millisecond, for ever,
// and the class's "unschedulable" reason is never reported.

// TestRoundRobinUnfitAfterFullTurn: round-robin with more compatible nodes
// than MaxVisit. The first attempt runs out of budget (deferred); the next
// is exhaustive with limit len(order), but rotatePlace (placement.go:201)
// checks checked >= limit before the loop ends, so the attempt that has
// just examined the last node answers deferred, not unfit, every time.
func TestRoundRobinUnfitAfterFullTurn(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy, cfg.SampleSize, cfg.MaxVisit = "round-robin", 1, 2
	h := newJH(t, cfg)
	for i := 0; i < 3; i++ {
		h.ok("node", h.c.UpsertNode(h.now, &api.Node{Name: "n" + string(rune('0'+i)),
			Capacity: resource.List{resource.CPU: 1000, resource.Memory: 1 << 30},
			Devices:  []api.Device{{Type: "nvidia.com/gpu", ID: "0", Model: "A"}}}))
	}
	h.submit("", jtask("big", 2, 2000)) // fits no node
	assertSettlesQuietly(h, time.Second)
}

// TestSearchGroupsOutOfPhaseDeferForever: a class whose option spans two
// node groups, each larger than MaxVisit, with the groups' scan states out
// of step (one exhaustive, one not: left so by earlier placements of the
// class). Each attempt walks one group completely (which resets it to a
// budgeted search, searchGroup placement.go:293) and cuts the other short
// (which makes it exhaustive, placement.go:276): the groups swap roles at
// every attempt and tryPlace answers deferred for ever.
func TestSearchGroupsOutOfPhaseDeferForever(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Policy, cfg.SampleSize, cfg.MaxVisit = "binpack", 1, 1
	h := newJH(t, cfg)
	for _, n := range []struct {
		name string
		cpu  int64
		gpus int
		rack string
	}{{"n0", 5000, 2, "r2"}, {"n1", 5000, 1, "r2"}, {"n2", 7000, 4, "r1"}, {"n3", 5000, 3, "r1"}} {
		spec := &api.Node{Name: n.name, Labels: map[string]string{"rack": n.rack},
			Capacity: resource.List{resource.CPU: n.cpu, resource.Memory: 64 << 30}}
		for d := 0; d < n.gpus; d++ {
			spec.Devices = append(spec.Devices, api.Device{Type: "nvidia.com/gpu", ID: string(rune('0' + d)), Model: "A"})
		}
		h.ok("node", h.c.UpsertNode(h.now, spec))
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		h.submit("", jtask(id, 0, 4000))
		h.want(id, Scheduled)
	}
	h.submit("", jtask("x", 0, 4000)) // fits no node
	assertSettlesQuietly(h, time.Second)
}

// assertSettlesQuietly ticks at NextWakeup for d and fails when the core
// asks for more than 10 Ticks that change nothing.
func assertSettlesQuietly(h *jh, d time.Duration) {
	h.t.Helper()
	end := h.now.Add(d)
	idle := 0
	d0 := h.c.Stats().Deferrals
	for idle <= 10 {
		next, ok := h.c.NextWakeup()
		if !ok || next.After(end) {
			return
		}
		if next.After(h.now) {
			h.now = next
		}
		h.c.TakeOutput()
		h.c.Tick(h.now)
		h.inv("tick")
		if out := h.c.TakeOutput(); len(out.Placements)+len(out.Transitions) == 0 {
			idle++
		}
	}
	h.t.Fatalf("the core keeps asking for Ticks that change nothing: %d deferrals by %s", h.c.Stats().Deferrals-d0, h.now.Sub(end.Add(-d)))
}

// TestGangUnreachableDuringRestart: a gang found unreachable in the middle
// of a restart fails its members with finish(Failed), and a member still
// placed at that moment takes a retry instead: it comes back from its
// backoff to a gang that can never start, and waits for ever.
//
// Bug: gangCheckReachable (jobs.go:236) calls finish(m, Failed), which
// retry (jobs.go:143) turns into a backoff for a placed member with
// retries left. Sequence: job retryLimit 1, gang {a, b, c} minMember 3, b
// with requeue false; all placed; a is lost -> the restart re-queues b,
// which cannot be re-queued and fails -> the gang is unreachable: a fails,
// c (still placed) goes to backoff -> after the backoff c pending for ever.
// The fix: fail the members for good (no retry) when the gang is
// unreachable, e.g. a finish variant that skips retry.
func TestGangUnreachableDuringRestart(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 3000, nil)
	h.job(JobSpec{ID: "g", RetryLimit: 1, Gang: &GangSpec{Members: []string{"a", "b", "c"}, MinMember: 3}})
	no := false
	for _, id := range []string{"a", "b", "c"} {
		spec := jtask(id, 1, 1000)
		if id == "b" {
			spec.Requeue = &no
		}
		h.submit("g", spec)
	}
	for _, id := range []string{"a", "b", "c"} {
		h.want(id, Scheduled)
	}
	h.ok("lost a", h.c.TaskLost(h.now, "a", "agent lost"))
	h.want("b", Failed)
	h.settle(time.Hour)
	if s := h.state("c"); !s.Terminal() {
		t.Fatalf("c is %s (%q): its gang can never start again (b failed, minMember 3)", s, h.task("c").reason)
	}
}

// TestGangTriesBeyondMaxAreResumed: placeGangs tries at most maxGangTries
// gangs per call and skips the rest without leaving a retry behind
// (jobs.go:285, as in TestGangSkippedByPlacementLimitIsResumed), so a
// gang past the 64th waits for the next input though it fits now.
// Sequence: node 1 cpu with a filler; 64 single-member gangs of 2 cpu
// (never fit) and then one of 1 cpu; the filler finishes -> the 64 big
// gangs are tried, the small one is not; NextWakeup: none.
func TestGangTriesBeyondMaxAreResumed(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 1000, nil)
	h.submit("", jtask("filler", 0, 1000))
	for i := 0; i <= maxGangTries; i++ {
		id := fmt.Sprintf("g%d", i)
		cpu := int64(2000)
		if i == maxGangTries {
			cpu = 1000
		}
		h.job(JobSpec{ID: id, Gang: &GangSpec{Members: []string{id + ".m"}, MinMember: 1}})
		h.submit(id, jtask(id+".m", 1, cpu))
	}
	h.adv(time.Millisecond)
	h.c.Tick(h.now)
	h.inv("tick")
	h.finish("filler", 0)
	h.settle(time.Hour)
	last := fmt.Sprintf("g%d.m", maxGangTries)
	if s := h.state(last); s != Scheduled {
		_, wake := h.c.NextWakeup()
		t.Fatalf("%s is %s (%q) with its node empty; NextWakeup set: %v", last, s, h.task(last).reason, wake)
	}
}

// TestGangNotTriedWhileNoNodesHoldIt: a gang whose last try failed is not
// tried again while the cluster could not hold the members it needs (by
// the free capacity of all nodes, or by the nodes with room for one
// member), however often capacity changes, and starts as soon as it can.
func TestGangNotTriedWhileNoNodesHoldIt(t *testing.T) {
	h := newJH(t, DefaultConfig())
	for i := 0; i < 4; i++ {
		spec := &api.Node{Name: fmt.Sprintf("n%d", i), Capacity: resource.List{resource.CPU: 64000, resource.Memory: 64 << 30}}
		for d := 0; d < 8; d++ {
			spec.Devices = append(spec.Devices, api.Device{Type: "nvidia.com/gpu", ID: fmt.Sprint(d), Model: "A"})
		}
		h.ok("node", h.c.UpsertNode(h.now, spec))
	}
	gpus := func(id string, prio int, n int64) *api.Task {
		return &api.Task{ID: id, Priority: prioP(prio), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": n * 1000}}
	}
	// n0 full, n1 and n2 half full, n3 empty: 16 GPUs free, one node
	// with room for an 8-GPU member.
	on := func(spec *api.Task, node string) *api.Task {
		spec.NodeSelector = map[string]string{NodeNameLabel: node}
		return spec
	}
	h.submit("", on(gpus("full", 0, 8), "n0"))
	h.submit("", on(gpus("half1", 0, 4), "n1"))
	h.submit("", on(gpus("half2", 0, 4), "n2"))
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"g.0", "g.1"}, MinMember: 2}})
	h.submit("g", gpus("g.0", 1, 8))
	h.submit("g", gpus("g.1", 1, 8))
	h.want("g.0", Pending)
	verdict := h.task("g.0").Reason()
	if !strings.Contains(verdict, "1 of 2 pending members fit together now") {
		t.Fatalf("g.0's verdict: %q", verdict)
	}
	// Capacity changes again and again (a 1-GPU task comes and goes):
	// the gang is not tried, and keeps its verdict. With the task, 15
	// GPUs are free in all; without it 16, but only one node has room
	// for a member.
	before := h.c.Stats().Attempts
	for i := 0; i < 5; i++ {
		id := fmt.Sprintf("small%d", i)
		h.submit("", gpus(id, 0, 1))
		h.want(id, Scheduled)
		h.finish(id, 0)
	}
	if got := h.c.Stats().Attempts - before; got != 5 {
		t.Fatalf("%d attempts while 5 small tasks came and went: the gang was tried", got)
	}
	if r := h.task("g.1").Reason(); r != verdict {
		t.Fatalf("g.1's reason %q, want the last try's %q", r, verdict)
	}
	h.finish("half1", 0) // n1: 8 free, n2: 4 free, n3: 8 free
	h.want("g.0", Scheduled)
	h.want("g.1", Scheduled)
}
