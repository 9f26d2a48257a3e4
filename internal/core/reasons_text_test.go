package core

import (
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Issue 16 §2: reason texts that mislead. Each test pins a text that must
// say what is true.

// gangReasons fails the test unless every one of the gang members ids is
// pending and says want, and Waiting reports want for the gang too.
func gangReasons(h *jh, want string, ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		h.want(id, Pending)
		if r := h.task(id).Reason(); r != want {
			h.t.Errorf("%s: reason %q\n\twant %q", id, r, want)
		}
	}
	// Waiting reports the same reason as the tasks.
	h.c.Waiting(func(_, reason string, n int) {
		if strings.Contains(reason, "gang") && reason != want {
			h.t.Errorf("Waiting reports %d with %q, want %q", n, reason, want)
		}
	})
}

// TestGangMembersShowOneReason: every waiting member of one gang shows
// the same reason with the same counts at the same moment (they said "1
// of 3" and "2 of 3": each member's reason was made when it joined, while
// the gang's counters kept changing).
func TestGangMembersShowOneReason(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 2000, nil)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b", "c"}, MinMember: 3}})
	h.submit("g", jtask("a", 1, 1000))
	gangReasons(h, "waiting for its gang: 1 of 3 members pending, placed or done (minMember 3)", "a")
	h.submit("g", jtask("b", 1, 1000))
	gangReasons(h, "waiting for its gang: 2 of 3 members pending, placed or done (minMember 3)", "a", "b")
	// The third makes a try: two fit on the node, three are needed.
	h.submit("g", jtask("c", 1, 1000))
	gangReasons(h, "gang of job g: 2 of 3 pending members fit together now, 3 needed to start", "a", "b", "c")
	// Time passes, nothing changes: still one reason.
	h.adv(time.Minute)
	h.c.Tick(h.now)
	h.inv("tick")
	gangReasons(h, "gang of job g: 2 of 3 pending members fit together now, 3 needed to start", "a", "b", "c")
}

// TestGangReasonChangeIsReported: when the reason a gang's members show
// changes, the output names every waiting member, not only the one whose
// input changed it: a server keeps a record per task and re-reads only the
// tasks the output names (the records said "1 of 3", "2 of 3" and "2 of 3
// pending members fit" for one gang).
func TestGangReasonChangeIsReported(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 2000, nil)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b", "c"}, MinMember: 3}})
	reported := func(want string, ids ...string) {
		t.Helper()
		got := map[string]string{}
		for _, u := range h.c.TakeOutput().Unschedulable {
			got[u.Sample] = u.Reason
		}
		for _, id := range ids {
			if got[id] != want {
				t.Errorf("%s: reported %q, want %q", id, got[id], want)
			}
		}
	}
	h.submit("g", jtask("a", 1, 1000))
	reported("waiting for its gang: 1 of 3 members pending, placed or done (minMember 3)", "a")
	h.submit("g", jtask("b", 1, 1000))
	reported("waiting for its gang: 2 of 3 members pending, placed or done (minMember 3)", "a", "b")
	h.submit("g", jtask("c", 1, 1000))
	reported("gang of job g: 2 of 3 pending members fit together now, 3 needed to start", "a", "b", "c")
	// Nothing changed: nothing is reported.
	h.adv(time.Minute)
	h.c.Tick(h.now)
	if u := h.c.TakeOutput().Unschedulable; len(u) != 0 {
		t.Errorf("reported %+v with no change", u)
	}
}

// TestGangReasonDropsAStaleVerdict: a try's verdict names the pending
// members it saw; once one of them leaves, the others no longer say it
// (they said "2 of 3 pending members fit" with two pending).
func TestGangReasonDropsAStaleVerdict(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 2000, nil)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b", "c", "d"}, MinMember: 3}})
	for _, id := range []string{"a", "b", "c"} {
		h.submit("g", jtask(id, 1, 1000))
	}
	gangReasons(h, "gang of job g: 2 of 3 pending members fit together now, 3 needed to start", "a", "b", "c")
	h.ok("cancel c", h.c.Cancel(h.now, "c", ""))
	gangReasons(h, "waiting for its gang: 2 of 4 members pending, placed or done (minMember 3)", "a", "b")
}

// TestGangRestartReasonIsShared: the members a restart sends back to
// pending, and one that joins later, show the same reason.
func TestGangRestartReasonIsShared(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 4000, nil)
	h.job(JobSpec{ID: "g", RetryLimit: 1, RetryBackoff: time.Minute,
		Gang: &GangSpec{Members: []string{"a", "b", "c", "d"}, MinMember: 3}})
	for _, id := range []string{"a", "b", "c"} {
		h.submit("g", jtask(id, 1, 1000))
	}
	for _, id := range []string{"a", "b", "c"} {
		h.want(id, Scheduled)
	}
	h.finish("c", 1) // c waits out its backoff; a and b go back to pending
	const why = "gang restart: member c failed: exit code 1"
	gangReasons(h, why, "a", "b")
	h.node("n0", 2000, nil) // room for two only
	h.submit("g", jtask("d", 1, 1000))
	gangReasons(h, "gang of job g: 2 of 3 pending members fit together now, 3 needed to start", "a", "b", "d")
}

// TestGangTimeoutReasonTopologyIsAPreference: a gang that times out says
// what blocked it (its last try, and the free capacity of the whole
// cluster), and names its topology domain only as a preference it could
// not meet. It said "needs 3 cpu in one rack domain": topology is no
// requirement.
func TestGangTimeoutReasonTopologyIsAPreference(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 2000, map[string]string{"rack": "r1"})
	h.node("n1", 2000, map[string]string{"rack": "r2"})
	h.submit("", &api.Task{ID: "filler", Priority: prioP(1), Resources: resource.List{resource.CPU: 2000},
		NodeSelector: map[string]string{"hetsched.io/node": "n1"}})
	h.want("filler", Scheduled)
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b", "c"}, MinMember: 3, Timeout: 10 * time.Second}})
	for _, id := range []string{"a", "b", "c"} {
		h.submit("g", jtask(id, 1, 1000))
	}
	h.settle(time.Minute)
	const want = "gang of job g did not start within 10s: " +
		"2 of 3 pending members could be placed together at its last try, 3 needed to start; " +
		"its 3 pending members ask 3 cpu in all, the cluster has 2 free (at most 2 on one node); " +
		"its preference for one rack domain could not be met either: the largest free rack domain has 2"
	for _, id := range []string{"a", "b", "c"} {
		h.want(id, Failed)
		if r := h.task(id).reason; r != want {
			t.Errorf("%s: reason %q\n\twant %q", id, r, want)
		}
	}
}

// TestGangTimeoutReasonMissingMembers: a gang that times out with too few
// members to start says so, and says nothing of a topology domain that
// had room.
func TestGangTimeoutReasonMissingMembers(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 8000, map[string]string{"rack": "r1"})
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"a", "b", "c", "d"}, MinMember: 4, Timeout: 10 * time.Second}})
	h.submit("g", jtask("a", 1, 1000))
	h.submit("g", jtask("b", 1, 1000))
	h.settle(time.Minute)
	const want = "gang of job g did not start within 10s: " +
		"2 of its 4 members pending, placed or done, minMember 4; " +
		"its 2 pending members ask 2 cpu in all, the cluster has 8 free (at most 8 on one node)"
	for _, id := range []string{"a", "b"} {
		h.want(id, Failed)
		if r := h.task(id).reason; r != want {
			t.Errorf("%s: reason %q\n\twant %q", id, r, want)
		}
	}
}

// TestQueueMaxReasonSaysTheArithmetic: a task refused by its queue's max
// says what the queue holds, what it asks and the max ("4/6" left the
// request out, and read as if the queue were under its max).
func TestQueueMaxReasonSaysTheArithmetic(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 16000, nil)
	h.ok("queue", h.c.SetQueue(h.now, &api.Queue{Name: "team-a",
		Max: resource.List{resource.CPU: 6000, resource.Memory: 6 << 30}}))
	task := func(id string, cpu, mem int64) *api.Task {
		return &api.Task{ID: id, Queue: "team-a", Priority: prioP(1),
			Resources: resource.List{resource.CPU: cpu, resource.Memory: mem}}
	}
	h.submit("", task("a", 4000, 1<<30))
	h.want("a", Scheduled)
	h.submit("", task("b", 2500, 1<<30))
	h.want("b", Pending)
	if r, want := h.task("b").Reason(), "queue team-a max reached: cpu 4 used + 2.5 asked > 6 max"; r != want {
		t.Errorf("b: reason %q, want %q", r, want)
	}
	h.submit("", task("c", 1000, 6<<30))
	h.want("c", Pending)
	if r, want := h.task("c").Reason(), "queue team-a max reached: memory 1Gi used + 6Gi asked > 6Gi max"; r != want {
		t.Errorf("c: reason %q, want %q", r, want)
	}
}

// TestLateJoinerIsToldTheSameReason: a task that joins its class's queue
// while the queue is not blocked, and then fails for the reason the queue
// reported last, is named in the output (it was not: its record never
// had the reason, and on Kubernetes its pod got no condition or event).
// Tasks told already are not named again.
func TestLateJoinerIsToldTheSameReason(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.node("n0", 2000, nil)
	told := func(want ...string) string {
		t.Helper()
		var got []string
		reason := ""
		for _, u := range h.c.TakeOutput().Unschedulable {
			got = append(got, u.Tasks...)
			reason = u.Reason
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("told %v, want %v", got, want)
		}
		return reason
	}
	h.submit("", jtask("x", 1, 1500))
	h.want("x", Scheduled)
	told()
	h.submit("", jtask("c1", 1, 1000))
	h.want("c1", Pending)
	first := told("c1")
	h.finish("x", 0)
	h.want("c1", Scheduled)
	told()
	h.submit("", jtask("c2", 1, 1000))
	h.want("c2", Scheduled)
	// c3 joins the queue, unblocked since c1 was placed, and fails for
	// the reason c1 was told.
	h.submit("", jtask("c3", 1, 1000))
	h.want("c3", Pending)
	if again := told("c3"); again != first {
		t.Errorf("c3 told %q, c1 was told %q: the test wants the same reason", again, first)
	}
	// c4 joins the blocked queue and takes its reason from it (Reason),
	// so it is not named; nor is c3 again.
	h.submit("", jtask("c4", 1, 1000))
	if r := h.task("c4").Reason(); r != first {
		t.Errorf("c4's reason %q, want %q", r, first)
	}
	told()
}
