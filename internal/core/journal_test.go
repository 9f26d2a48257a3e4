package core

import (
	"fmt"
	"maps"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// The journal's property (journal.go): random sequences of journaled
// placements of gang members and what-if evictions and reprieves of placed
// tasks (and, nested, checkpoints kept or rolled back inside them) rolled
// back leave the core as it was at the checkpoint: snapshotCore, which
// reads every field the journal promises to restore, compares equal, and
// the invariants hold.

// coreSnap is the state of a core as plain values: what rollback must
// restore. Heaps are listed as sorted sets (their layout may differ, see
// journal.go); search hints the journal leaves alone (scan positions, the
// round-robin cursor, queues' hit flags) are left out.
type coreSnap struct {
	Nodes        []nodeSnap
	Groups       []groupSnap
	Total        resource.Vector
	TotalChanged bool
	Tasks        map[string]taskSnap
	Queues       map[string]queueSnap
	Gangs        map[string]gangSnap
	ClassQueues  map[string]cqSnap
	Timers       []string
	Tiers        [4][2][]string
	TierCount    [4]int
	Bands        [nBands]bandState
	Bypass       [nBands]int
	Stats        Stats
	CallPlaced   int
	CapSeq       uint64
	Output       string
	OutLens      [4]int
	Journal      [4]int
}

type nodeSnap struct {
	Name         string
	Alloc        resource.Vector
	AllocByPrio  [4]resource.Vector
	Used         []int32
	Tasks        []string
	Bucket, Pos  int32
	LoadReserved float64
}

type groupSnap struct {
	Buckets map[int][]string
	Max     int
	Indexed int
}

type taskSnap struct {
	State                      State
	Level, Raised, Chosen      int8
	Node                       string
	Npos                       int32
	Devs                       [][2]int32
	Started, Enqueued, Since   int64
	Reason                     string
	LocDone, Gready, Backoff   bool
	Tkind                      timerKind
	Deadline                   int64
	ClassQueue                 string
	Cqpos                      int32
	Prev, Next                 string
	Attempt, Failures          int32
	Class                      string
	ShownReason, ReportedAsOwn string
}

type queueSnap struct {
	Used    resource.Vector
	Share   float64
	Under   bool
	Picked  uint64
	Backoff int
	Lanes   [nBands]laneSnap
}

type laneSnap struct {
	Linked bool
	CQs    []string
	Kids   []string
}

type gangSnap struct {
	Ready                             []string
	Reason, Shown                     string
	Placed, Failed, Done              int
	Started, Dirty, Waiting           bool
	Tried                             uint64
	LastFit, LastOf, LastNeed, Deferd int
}

type cqSnap struct {
	Tasks             []string
	First, Live       int
	Active            bool
	Blocked, Deferred bool
	Gen               uint32
	LastReason        string
}

func taskID(t *Task) string {
	if t == nil {
		return ""
	}
	return t.id
}

func cqName(q *classQueue) string {
	if q == nil {
		return ""
	}
	return fmt.Sprintf("%s@%s@%d/b%d", q.cls.key, queueKey(q.cls.leaf), q.level, q.band)
}

func queueKey(q *queueNode) string {
	if q.leaf {
		return q.name + "/leaf"
	}
	return q.name
}

// snapOpts compare snapshots: floats that plugins' Unreserve recomputes
// (a node's reserved load) to rounding.
var snapOpts = []cmp.Option{cmpopts.EquateApprox(0, 1e-9), cmp.AllowUnexported(bandState{})}

// snapshotCore reads c's state as plain values.
func snapshotCore(c *Core) coreSnap {
	s := coreSnap{Tasks: map[string]taskSnap{}, Queues: map[string]queueSnap{}, Gangs: map[string]gangSnap{},
		ClassQueues: map[string]cqSnap{}, Total: c.idx.total, TotalChanged: c.idx.totalChanged,
		Bands: c.lv.bands, Bypass: c.lv.bypass, Stats: c.stats, CallPlaced: c.callPlaced, CapSeq: c.capSeq,
		Output: formatOutput(c.out), Journal: [4]int{len(c.jr.entries), len(c.jr.places), len(c.jr.queues), c.jr.open},
		OutLens: [4]int{len(c.out.Placements), len(c.out.Preemptions), len(c.out.Transitions), len(c.out.Unschedulable)}}
	for _, n := range c.idx.order {
		ns := nodeSnap{Name: n.name, Alloc: n.alloc, AllocByPrio: n.allocByPrio, Bucket: n.bucket, Pos: n.pos, LoadReserved: n.load.reserved}
		for _, d := range n.devices {
			ns.Used = append(ns.Used, d.Used)
		}
		for _, t := range n.tasks {
			ns.Tasks = append(ns.Tasks, t.id)
		}
		s.Nodes = append(s.Nodes, ns)
	}
	for _, g := range c.idx.glist {
		gs := groupSnap{Buckets: map[int][]string{}, Max: g.max, Indexed: g.indexed}
		for b, bk := range g.buckets {
			for _, n := range bk {
				gs.Buckets[b] = append(gs.Buckets[b], n.name)
			}
		}
		s.Groups = append(s.Groups, gs)
	}
	for id, t := range c.tasks {
		ts := taskSnap{State: t.state, Level: t.level, Raised: t.raised, Chosen: t.chosen, Npos: t.npos,
			Started: t.started, Enqueued: t.enqueued, Since: t.levelSince, Reason: t.reason,
			LocDone: t.locDone, Gready: t.gready, Backoff: t.backoff, Tkind: t.tkind, Deadline: t.deadline,
			ClassQueue: cqName(t.cq), Cqpos: t.cqpos, Prev: taskID(t.lprev), Next: taskID(t.lnext),
			Attempt: t.attempt, Failures: t.failures, Class: t.cls.key, ShownReason: t.Reason(), ReportedAsOwn: t.ownReason()}
		if t.node != nil {
			ts.Node = t.node.name
		}
		for _, d := range t.devs {
			ts.Devs = append(ts.Devs, [2]int32{d.dev, d.milli})
		}
		s.Tasks[id] = ts
	}
	for _, q := range allQueueNodes(c) {
		qs := queueSnap{Used: q.used, Share: q.share, Under: q.under, Picked: q.picked, Backoff: q.backoff}
		for b := range q.ln {
			ln := &q.ln[b]
			ls := laneSnap{Linked: ln.pos >= 0}
			for _, cq := range ln.cqs {
				ls.CQs = append(ls.CQs, cqName(cq))
			}
			for _, k := range ln.kids {
				ls.Kids = append(ls.Kids, queueKey(k.node))
			}
			sort.Strings(ls.CQs)
			sort.Strings(ls.Kids)
			qs.Lanes[b] = ls
		}
		s.Queues[queueKey(q)] = qs
	}
	for id, j := range c.jb.jobs {
		g := j.gang
		if g == nil {
			continue
		}
		gs := gangSnap{Reason: g.reason, Shown: g.shown, Placed: g.placed, Failed: g.failed, Done: g.done,
			Started: g.started, Dirty: g.dirty, Waiting: g.waiting, Tried: g.tried,
			LastFit: g.lastFit, LastOf: g.lastOf, LastNeed: g.lastNeed, Deferd: g.deferred}
		for _, m := range g.ready {
			gs.Ready = append(gs.Ready, m.id)
		}
		s.Gangs[id] = gs
	}
	for _, list := range c.ct.byHash {
		for _, cl := range list {
			for _, q := range cl.classQueues() {
				if q == nil {
					continue
				}
				qs := cqSnap{First: q.first, Live: q.live, Active: q.hpos >= 0, Blocked: q.blocked, Deferred: q.deferred,
					Gen: q.gen, LastReason: q.lastReason}
				for _, t := range q.tasks {
					qs.Tasks = append(qs.Tasks, taskID(t))
				}
				name := cqName(q)
				if _, dup := s.ClassQueues[name]; dup {
					// Which one the map kept would hang on map order.
					panic("two class queues named " + name + ": equal requests must share a class")
				}
				s.ClassQueues[name] = qs
			}
		}
	}
	for _, t := range c.timers.h {
		s.Timers = append(s.Timers, fmt.Sprintf("%d %d %s %d", t.deadline, t.seq, t.id, t.tkind))
	}
	sort.Strings(s.Timers)
	for l := range c.lv.tiers {
		s.TierCount[l] = c.lv.tiers[l].count
		for r := range c.lv.tiers[l].aging {
			for x := c.lv.tiers[l].aging[r].head; x != nil; x = x.lnext {
				s.Tiers[l][r] = append(s.Tiers[l][r], x.id)
			}
		}
	}
	return s
}

// journalCase builds a random core: random inputs on a random cluster (the
// property tests' runner), two tenant queues, and gangs whose members all
// wait (each gang names one member more than is ever submitted, and needs
// it: it is never tried).
func journalCase(t *rapid.T) *runner {
	r, err := newRunner(drawConfig(t), drawCluster(t))
	if err != nil {
		t.Fatal(err)
	}
	c := r.c
	max := resource.List{resource.CPU: int64(rapid.IntRange(1, 64).Draw(t, "queueMaxCPU")) * 1000}
	guar := resource.List{resource.CPU: int64(rapid.IntRange(0, 32).Draw(t, "queueGuarCPU")) * 1000, gpuRes: 2000}
	if err := c.SetQueue(r.now, &api.Queue{Name: "a", Max: max, Guaranteed: guar}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetQueue(r.now, &api.Queue{Name: "a-sub", Parent: "a"}); err != nil {
		t.Fatal(err)
	}
	queues := []string{"", "a", "a-sub"}
	for _, o := range drawOps(t, &defaultWeights, 60) {
		if o.Kind != opSettle {
			r.apply(o)
		}
	}
	// Some work of the tenants, placed if it fits.
	for i, n := 0, rapid.IntRange(0, 6).Draw(t, "tenantTasks"); i < n; i++ {
		p := drawTaskParams(t)
		p.Dep = -1
		spec := buildTaskSpec(p, "q"+strconv.Itoa(i), nil)
		spec.Queue = rapid.SampledFrom(queues).Draw(t, "queue")
		if spec.Validate() == nil {
			if err := c.Submit(r.now, spec); err != nil {
				t.Fatal(err)
			}
		}
	}
	gangs := rapid.IntRange(1, 3).Draw(t, "gangs")
	for g := 0; g < gangs; g++ {
		jid := "g" + strconv.Itoa(g)
		n := rapid.IntRange(1, 5).Draw(t, "members")
		var ids []string
		for m := 0; m <= n; m++ {
			ids = append(ids, jid+"."+strconv.Itoa(m))
		}
		if err := c.AddJob(r.now, JobSpec{ID: jid, Gang: &GangSpec{Members: ids, MinMember: n + 1}}); err != nil {
			t.Fatal(err)
		}
		q := rapid.SampledFrom(queues).Draw(t, "queue")
		for _, id := range ids[:n] {
			p := drawTaskParams(t)
			p.Dep = -1
			spec := buildTaskSpec(p, id, nil)
			spec.Queue = q
			if spec.Validate() != nil {
				continue
			}
			if err := c.SubmitJobTask(r.now, jid, spec); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

// gangReady lists the members waiting in their gangs' ready lists.
func gangReady(c *Core) []*Task {
	var out []*Task
	for _, g := range c.gs.wait {
		out = append(out, g.ready...)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// journalPlace places a random gang-ready member on a random node its
// option fits (the dynamic checks; static filters aside), reporting
// whether it placed one.
func journalPlace(t *rapid.T, c *Core) bool {
	ready := gangReady(c)
	if len(ready) == 0 || len(c.idx.order) == 0 {
		return false
	}
	m := rapid.SampledFrom(ready).Draw(t, "member")
	o := &m.cls.opts[rapid.IntRange(0, len(m.cls.opts)-1).Draw(t, "option")]
	start := rapid.IntRange(0, len(c.idx.order)-1).Draw(t, "node")
	for k := range c.idx.order {
		n := c.idx.order[(start+k)%len(c.idx.order)]
		if n.bucket < 0 {
			continue
		}
		sc := c.pl.beginSearch(false, nil)
		if c.pl.checkNode(sc, m, o, n) == nil {
			c.commit(m, o, n, sc.cs.picked)
			return true
		}
	}
	return false
}

// whatIfs is what a sequence of what-if steps did: the journal entry of
// each task evicted (in effect), and of each given back since.
type whatIfs struct{ evicted, returned map[*Task]int }

func (w whatIfs) clone() whatIfs { return whatIfs{maps.Clone(w.evicted), maps.Clone(w.returned)} }

// journalWhatIf evicts a random placed task what-if (as preemption's
// search does), gives one back (a reprieve), or takes one given back away
// again (of those recorded since the innermost checkpoint, at mark).
func journalWhatIf(t *rapid.T, c *Core, w whatIfs, mark int) {
	var placed []*Task
	for _, x := range c.tasks {
		_, out := w.evicted[x]
		_, back := w.returned[x]
		if x.node != nil && !out && !back {
			placed = append(placed, x)
		}
	}
	sort.Slice(placed, func(i, j int) bool { return placed[i].seq < placed[j].seq })
	keys := func(m map[*Task]int) []*Task {
		var ts []*Task
		for x, at := range m {
			if at >= mark {
				ts = append(ts, x)
			}
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].seq < ts[j].seq })
		return ts
	}
	switch rapid.IntRange(0, 2).Draw(t, "whatIf") {
	case 0:
		if len(placed) > 0 {
			v := rapid.SampledFrom(placed).Draw(t, "victim")
			w.evicted[v] = c.jr.whatIfEvict(v)
		}
	case 1:
		if ks := keys(w.evicted); len(ks) > 0 {
			v := rapid.SampledFrom(ks).Draw(t, "reprieved")
			c.jr.whatIfSet(w.evicted[v], false)
			w.returned[v] = w.evicted[v]
			delete(w.evicted, v)
		}
	case 2:
		if ks := keys(w.returned); len(ks) > 0 {
			v := rapid.SampledFrom(ks).Draw(t, "retaken")
			c.jr.whatIfSet(w.returned[v], true)
			w.evicted[v] = w.returned[v]
			delete(w.returned, v)
		}
	}
}

// journalSteps runs random journaled steps under the open checkpoint
// (depth: how many are open): placements, what-if evictions and
// reprieves, and nested checkpoints that are kept or rolled back; it
// returns how many placements and what-ifs it made.
func journalSteps(t *rapid.T, c *Core, depth int, cp checkpoint, w whatIfs) int {
	made := 0
	steps := rapid.IntRange(0, 12).Draw(t, "steps")
	for i := 0; i < steps; i++ {
		switch rapid.IntRange(0, 5).Draw(t, "step") {
		case 0:
			if depth >= 3 {
				continue
			}
			before := snapshotCore(c)
			was := w.clone()
			icp := c.jr.checkpoint()
			inner := journalSteps(t, c, depth+1, icp, w)
			if rapid.Bool().Draw(t, "keepInner") {
				c.jr.keep(icp) // the outer checkpoint still rolls it back
				made += inner
				continue
			}
			c.jr.rollback(icp)
			clear(w.evicted)
			maps.Copy(w.evicted, was.evicted)
			clear(w.returned)
			maps.Copy(w.returned, was.returned)
			if d := cmp.Diff(before, snapshotCore(c), snapOpts...); d != "" {
				t.Fatalf("an inner rollback (depth %d) did not restore the state at its checkpoint (-before +after):\n%s", depth+1, d)
			}
		case 1, 2:
			journalWhatIf(t, c, w, cp.mark)
			made++
		default:
			if journalPlace(t, c) {
				made++
			}
		}
	}
	return made
}

// TestPropertyJournalRollback: random journaled placements and what-if
// evictions, nested checkpoints kept or rolled back, then the outer
// rollback: the core is as it was at the checkpoint and its invariants
// hold.
func TestPropertyJournalRollback(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := journalCase(t)
		c := r.c
		c.advance(r.now.Add(time.Millisecond)) // a try happens within an input
		c.TakeOutput()
		before := snapshotCore(c)
		cp := c.jr.checkpoint()
		made := journalSteps(t, c, 1, cp, whatIfs{map[*Task]int{}, map[*Task]int{}})
		c.jr.rollback(cp)
		if d := cmp.Diff(before, snapshotCore(c), snapOpts...); d != "" {
			t.Fatalf("rollback after %d placements and what-ifs did not restore the state at the checkpoint (-before +after):\n%s", made, d)
		}
		if err := checkInvariants(c); err != nil {
			t.Fatalf("after rollback: %v", err)
		}
	})
}

// TestJournalConstraintWakes: a journaled placement that changes a
// placement constraint's counts wakes the class queues blocked on it only
// when the outermost checkpoint is kept; a rollback, which restores the
// counts, leaves them blocked, as the journal's invariant says.
//
// Was a bug (fixed): the placement woke them at once and the rollback did
// not block them again (found by TestPropertyJournalRollback once the
// property tests drew constraints): every gang try rolled back retried
// the classes waiting on its members' labels.
func TestJournalConstraintWakes(t *testing.T) {
	for _, keep := range []bool{false, true} {
		c, err := New(DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		now := epoch
		node := &api.Node{Name: "n1", Labels: map[string]string{"zone": "a"}, Capacity: resource.List{resource.CPU: 16000, resource.Memory: 1 << 30}}
		if err := c.UpsertNode(now, node); err != nil {
			t.Fatal(err)
		}
		prio := 0
		client := &api.Task{ID: "client", Priority: &prio, Resources: resource.List{resource.CPU: 1000},
			Affinity: []api.AffinityTerm{{TaskSelector: api.TaskSelector{Selector: map[string]string{"app": "cache"}}, TopologyKey: "zone", Required: true}}}
		if err := c.Submit(now, client); err != nil {
			t.Fatal(err)
		}
		if err := c.AddJob(now, JobSpec{ID: "g", Gang: &GangSpec{Members: []string{"g.0", "g.1"}, MinMember: 2}}); err != nil {
			t.Fatal(err)
		}
		member := &api.Task{ID: "g.0", Priority: &prio, Resources: resource.List{resource.CPU: 1000}, Metadata: map[string]string{"app": "cache"}}
		if err := c.SubmitJobTask(now, "g", member); err != nil {
			t.Fatal(err)
		}
		q := c.tasks["client"].cq
		if q == nil || !q.blocked {
			t.Fatalf("client's class queue is not blocked (%+v)", q)
		}
		c.advance(now.Add(time.Millisecond))
		m, n := c.tasks["g.0"], c.idx.nodes["n1"]
		cp := c.jr.checkpoint()
		sc := c.pl.beginSearch(false, nil)
		if st := c.pl.checkNode(sc, m, &m.cls.opts[0], n); st != nil {
			t.Fatalf("g.0 does not fit n1: %v", st.Reason)
		}
		c.commit(m, &m.cls.opts[0], n, sc.cs.picked)
		if !q.blocked {
			t.Fatalf("keep=%v: a journaled placement woke client's queue before its checkpoint closed", keep)
		}
		if keep {
			c.jr.keep(cp)
		} else {
			c.jr.rollback(cp)
		}
		if q.blocked == keep {
			t.Fatalf("keep=%v: client's queue blocked=%v after the checkpoint closed", keep, q.blocked)
		}
		if err := checkInvariants(c); err != nil && !keep { // a kept member outside a gang try breaks the gang's books
			t.Fatalf("after rollback: %v", err)
		}
	}
}
