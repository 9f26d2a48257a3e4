package core

import (
	"fmt"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Unit tests of reclaim and priority preemption across tenant queues
// (queues_property_test.go's cases built by hand).

// qpNodeSpec is a node of cores CPUs and gpus GPUs.
func qpNodeSpec(name string, cores, gpus int) *api.Node {
	return (&qpNode{name: name, cpu: int64(cores) * 1000, gpus: gpus}).spec()
}

// qpSubmit submits a task of 1 cpu and gpus GPUs and returns what it did.
func qpSubmit(h *jh, job, id, queue string, prio, gpus int, preemptible bool) Output {
	h.t.Helper()
	spec := &api.Task{ID: id, Queue: queue, Priority: &prio, Resources: resource.List{resource.CPU: 1000}}
	if gpus > 0 {
		spec.Resources[gpuRes] = int64(gpus) * 1000
	}
	if !preemptible {
		spec.Preemptible = &preemptible
	}
	h.submit(job, spec)
	return h.c.TakeOutput()
}

// qpQuiet ticks a few times and fails on any preemption.
func qpQuiet(h *jh, what string) {
	h.t.Helper()
	for i := 0; i < 3; i++ {
		h.adv(time.Second)
		h.c.Tick(h.now)
		h.inv("Tick")
		if out := h.c.TakeOutput(); len(out.Preemptions) > 0 {
			h.t.Fatalf("%s: Tick %d evicts %v", what, i, out.Preemptions)
		}
	}
}

func qpState(h *jh, id string, want State) {
	h.t.Helper()
	if t, _ := h.c.Task(id); t.State() != want {
		h.t.Errorf("%s is %s (%q), want %s", id, t.State(), t.Reason(), want)
	}
}

// TestReclaimNotWithinOwnQueue: team-a (guaranteed 4 GPUs, holding 3)
// may not reclaim from its own sub-queue team-a-dev: that gives team-a
// nothing, and the evicted task, within team-a's guarantee too, reclaimed
// its place back at once, 8192 times per input (the per-call placement
// limit), for ever.
func TestReclaimNotWithinOwnQueue(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.ok("node", h.c.UpsertNode(h.now, qpNodeSpec("n", 16, 4)))
	h.ok("team-a", h.c.SetQueue(h.now, &api.Queue{Name: "team-a", Guaranteed: resource.List{gpuRes: 4000}}))
	h.ok("team-a-dev", h.c.SetQueue(h.now, &api.Queue{Name: "team-a-dev", Parent: "team-a"}))
	h.ok("team-b", h.c.SetQueue(h.now, &api.Queue{Name: "team-b"}))
	qpSubmit(h, "", "b1", "team-b", 1, 1, false)
	qpSubmit(h, "", "dev", "team-a-dev", 1, 1, true)
	qpSubmit(h, "", "a1", "team-a", 1, 1, true)
	qpSubmit(h, "", "a2", "team-a", 1, 1, true)
	h.adv(time.Second)
	if out := qpSubmit(h, "", "a3", "team-a", 1, 1, true); len(out.Preemptions) > 0 {
		t.Fatalf("a3 evicts %d tasks (first %v); team-a-dev's task is team-a's own", len(out.Preemptions), out.Preemptions[0])
	}
	qpQuiet(h, "after a3")
	qpState(h, "a3", Pending)
	qpState(h, "dev", Scheduled)
}

// TestReclaimSparesQueueWithinGuarantee: a and b are each guaranteed 4
// GPUs (no CPU); b holds its 4, a 2. a's task may not reclaim from b
// because b "borrows" CPU (it has no CPU guarantee): b is within its GPU
// guarantee, and its evicted task reclaimed back from a in turn, for ever.
func TestReclaimSparesQueueWithinGuarantee(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.ok("node", h.c.UpsertNode(h.now, qpNodeSpec("n", 64, 8)))
	h.ok("a", h.c.SetQueue(h.now, &api.Queue{Name: "a", Guaranteed: resource.List{gpuRes: 4000}}))
	h.ok("b", h.c.SetQueue(h.now, &api.Queue{Name: "b", Guaranteed: resource.List{gpuRes: 4000}}))
	h.ok("c", h.c.SetQueue(h.now, &api.Queue{Name: "c"}))
	qpSubmit(h, "", "c1", "c", 1, 1, false)
	qpSubmit(h, "", "c2", "c", 1, 1, false)
	qpSubmit(h, "", "a1", "a", 1, 1, true)
	qpSubmit(h, "", "a2", "a", 1, 1, true)
	for i := 1; i <= 4; i++ {
		qpSubmit(h, "", fmt.Sprint("b", i), "b", 1, 1, true)
	}
	h.adv(time.Second)
	if out := qpSubmit(h, "", "a3", "a", 1, 1, true); len(out.Preemptions) > 0 {
		t.Fatalf("a3 evicts %d tasks (first %v); b holds no more than its guarantee", len(out.Preemptions), out.Preemptions[0])
	}
	qpQuiet(h, "after a3")
	qpState(h, "a3", Pending)
}

// TestPrioritySparesSubQueueWithinGuarantee: b (guaranteed 4 GPUs) holds
// 6, but 1 of them in b1, within b1's guarantee of 2. An urgent task of a
// may not evict b1's task for priority (b borrowing is not enough): it
// did, and the task, under b1's guarantee, reclaimed its place back from
// the urgent one (a has no guarantee), twice per Tick, for ever.
func TestPrioritySparesSubQueueWithinGuarantee(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.ok("node", h.c.UpsertNode(h.now, qpNodeSpec("n", 64, 6)))
	h.ok("a", h.c.SetQueue(h.now, &api.Queue{Name: "a"}))
	h.ok("b", h.c.SetQueue(h.now, &api.Queue{Name: "b", Guaranteed: resource.List{gpuRes: 4000}}))
	h.ok("b1", h.c.SetQueue(h.now, &api.Queue{Name: "b1", Parent: "b", Guaranteed: resource.List{gpuRes: 2000}}))
	h.ok("b2", h.c.SetQueue(h.now, &api.Queue{Name: "b2", Parent: "b"}))
	qpSubmit(h, "", "v", "b1", 1, 1, true)
	for i := 1; i <= 5; i++ {
		qpSubmit(h, "", fmt.Sprint("x", i), "b2", 1, 1, false)
	}
	h.adv(time.Second)
	if out := qpSubmit(h, "", "u", "a", 0, 1, true); len(out.Preemptions) > 0 {
		t.Fatalf("u evicts %v; b1 is within its guarantee", out.Preemptions)
	}
	qpQuiet(h, "after u")
	qpState(h, "u", Pending)
	qpState(h, "v", Scheduled)
}

// TestGangWithNonPreemptibleMemberIsNotEvicted: a gang is evicted whole,
// so a member that is not preemptible protects its preemptible mates
// (evicting the mate evicted it too).
func TestGangWithNonPreemptibleMemberIsNotEvicted(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.ok("node", h.c.UpsertNode(h.now, qpNodeSpec("n", 2, 0)))
	h.job(JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"g.0", "g.1"}, MinMember: 2}})
	qpSubmit(h, "g", "g.0", "", 3, 0, false)
	qpSubmit(h, "g", "g.1", "", 3, 0, true)
	qpState(h, "g.0", Scheduled)
	h.adv(time.Second)
	if out := qpSubmit(h, "", "u", "", 0, 0, true); len(out.Preemptions) > 0 {
		t.Fatalf("u evicts %v; g.0 is not preemptible", out.Preemptions)
	}
	qpState(h, "g.0", Scheduled)
	qpState(h, "g.1", Scheduled)
	qpState(h, "u", Pending)
}

// TestNoEvictionCycleThroughGuarantee: q3 is guaranteed 2 GPUs and holds
// them (p3, which also takes half the CPU); its high-priority CPU-only
// task j holds the other half. An urgent task u of no queue evicts j (q3
// guarantees no CPU). j may then not evict p3 for priority: that took q3
// below its GPU guarantee, so p3 reclaimed its place from u, u evicted j
// again, and so on, at every Tick, for ever.
func TestNoEvictionCycleThroughGuarantee(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.ok("node", h.c.UpsertNode(h.now, qpNodeSpec("n", 4, 2)))
	h.ok("q3", h.c.SetQueue(h.now, &api.Queue{Name: "q3", Guaranteed: resource.List{gpuRes: 2000}}))
	p := 2
	h.submit("", &api.Task{ID: "p3", Queue: "q3", Priority: &p, Resources: resource.List{resource.CPU: 2000, gpuRes: 2000}})
	h.adv(time.Second) // past the batch window
	h.c.Tick(h.now)
	qpState(h, "p3", Scheduled)
	p = 1
	h.submit("", &api.Task{ID: "j", Queue: "q3", Priority: &p, Resources: resource.List{resource.CPU: 2000}})
	h.c.TakeOutput()
	h.adv(time.Second)
	p = 0
	h.submit("", &api.Task{ID: "u", Priority: &p, Resources: resource.List{resource.CPU: 2000}})
	out := h.c.TakeOutput()
	if len(out.Preemptions) != 1 || out.Preemptions[0].Victim != "j" {
		t.Fatalf("u's preemptions: %v, want j evicted alone (placements %v, transitions %v)", out.Preemptions, out.Placements, out.Transitions)
	}
	qpQuiet(h, "after u")
	qpState(h, "u", Scheduled)
	qpState(h, "p3", Scheduled)
	qpState(h, "j", Pending)
}

// TestReclaimedUrgentTaskIsPlacedAgain: p2 (high, of q0, under its CPU
// guarantee) reclaims n3 from the urgent p1, which fits n2. p1 went back
// to the urgent tier after the dispatch had passed it, and waited for the
// next input (NextWakeup asked for none).
func TestReclaimedUrgentTaskIsPlacedAgain(t *testing.T) {
	h := newJH(t, DefaultConfig())
	h.ok("n3", h.c.UpsertNode(h.now, qpNodeSpec("n3", 2, 2)))
	h.ok("q0", h.c.SetQueue(h.now, &api.Queue{Name: "q0", Guaranteed: resource.List{resource.CPU: 1000}}))
	qpSubmit(h, "", "p1", "", 0, 1, true)
	h.ok("n2", h.c.UpsertNode(h.now, qpNodeSpec("n2", 2, 1)))
	out := qpSubmit(h, "", "p2", "q0", 1, 2, false)
	if len(out.Preemptions) != 1 || out.Preemptions[0].Victim != "p1" {
		t.Fatalf("p2's preemptions: %v, want p1 reclaimed", out.Preemptions)
	}
	if p1, _ := h.c.Task("p1"); p1.State() != Scheduled || p1.Node().Name() != "n2" {
		next, ok := h.c.NextWakeup()
		t.Fatalf("p1 is %s (%q), want placed on n2 at once (NextWakeup %v %v)", p1.State(), p1.Reason(), next, ok)
	}
}
