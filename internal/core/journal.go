package core

// The journal: tries that may be undone run between a checkpoint and its
// rollback or keep, in the manner of KAI-Scheduler's Statement:
//
//	cp := c.jr.checkpoint()
//	… commit members, or evict victims what-if …
//	c.jr.rollback(cp) // or c.jr.keep(cp)
//
// While a checkpoint is open, every change the core makes through commit
// (a placement) and through whatIfEvict (a what-if eviction of a placed
// task: preemption's and reclaim's search for victims) is recorded with
// the state it replaced:
//
//   - allocations: the node's alloc vector and allocation by priority,
//     its devices' shares, its task list, and its bucket position (the
//     node goes back to the very slot it left, so later walks visit the
//     nodes in the order they would have);
//   - queue usage: used by the task's leaf and every ancestor, and for a
//     placement when one last went below each (picked) and each one's
//     share and guarantee flag, which the lanes are ordered by (a what-if
//     changes usage alone: nothing orders lanes during a what-if);
//   - timers: the timer the task held (a queue timeout), and the lease
//     timer a placement set;
//   - task fields: state, chosen, node, devices, started, reason, the
//     locality preference, and the task's slot in its gang's ready list
//     with the gang's verdict;
//   - stats, the placements made by the current input, and the output
//     appended since the checkpoint (all four lists);
//   - the wakes of class queues blocked on a placement constraint's term
//     whose counts a placement changed: they wait in the journal until the
//     outermost checkpoint is kept (rollback drops them, since it restores
//     the counts).
//
// Invariant: rollback(cp) restores exactly the state at cp: the same
// values in every field above, the same slots in every list and bucket.
// Heaps (timers, lanes) hold the same elements in a valid heap order,
// which is a total order, so they yield the same elements in the same
// order; only their internal layout may differ. Plugins' own bookkeeping
// is undone through their Unreserve (their contract with Reserve), as a
// release undoes it. keep(cp) keeps every placement made since cp.
//
// What the journal does not record, on purpose: search hints that only
// change where the next search starts or how soon blocked work is
// retried, never what fits (each class's scan positions, which a gang
// try saves and restores itself; the round-robin cursor; a queue's hit
// flag, which at worst wakes blocked classes once more).
//
// Contracts: checkpoints nest and are closed in reverse order of opening;
// a journaled placement takes a gang-ready member (the only placements a
// try makes: members wait in no class queue); what-if evictions are always
// rolled back, never kept (the task stays on its node, its queues' shares
// are not refreshed); no input returns with a checkpoint open.

// checkpoint is where rollback returns to.
type checkpoint struct {
	mark, places, queues, woken int // lengths of the journal's lists
	stats                       Stats
	callPlaced                  int
	// lengths of the output lists
	placements, preemptions, transitions, unschedulable int
}

// journal is the undo log of the open checkpoints.
type journal struct {
	c       *Core
	entries []jentry
	places  []placeWas // what each placement replaced
	queues  []queueWas // what placements replaced in the queues
	woken   []*term    // terms whose counts changed: their blocked queues wake at keep
	open    int        // checkpoints open
}

type jkind uint8

const (
	jPlace  jkind = iota // commit placed a gang-ready member
	jWhatIf              // whatIfEvict took a placed task's allocation away
)

// jentry is one recorded change: t on n with o; for a placement the index
// of what it replaced, for a what-if eviction whether it is in effect (a
// reprieve gives the task back in place: whatIfSet).
type jentry struct {
	kind    jkind
	evicted bool // jWhatIf: in effect
	at      int  // jPlace: index in journal.places
	t       *Task
	n       *Node
	o       *Option
}

// placeWas is what a placement replaced: the task's fields, its slot in
// its gang's ready list and the gang's verdict, the node's task list and
// bucket slot and its group's highest bucket, and where the queues' old
// values start in journal.queues (leaf first, then each ancestor).
type placeWas struct {
	state       State
	chosen      int8
	locDone     bool
	npos        int32
	started     int64
	reason      string
	devs        []devShare
	tkind       timerKind
	deadline    int64
	readyAt     int
	gangReason  string
	tasks       []*Task
	bucket, pos int32
	gmax        int
	queuesAt    int
}

// queueWas is what a placement replaced in one queueNode.
type queueWas struct {
	picked uint64
	share  float64
	under  bool
}

// checkpoint opens a checkpoint.
func (jr *journal) checkpoint() checkpoint {
	c := jr.c
	jr.open++
	return checkpoint{
		mark: len(jr.entries), places: len(jr.places), queues: len(jr.queues), woken: len(jr.woken),
		stats: c.stats, callPlaced: c.callPlaced,
		placements: len(c.out.Placements), preemptions: len(c.out.Preemptions),
		transitions: len(c.out.Transitions), unschedulable: len(c.out.Unschedulable),
	}
}

// journaling reports whether changes are being recorded.
func (jr *journal) journaling() bool { return jr.open > 0 }

// keep closes cp keeping every placement made since it (an enclosing
// checkpoint may still roll them back).
func (jr *journal) keep(cp checkpoint) {
	c := jr.c
	jr.open--
	if jr.open == 0 {
		clear(jr.entries)
		jr.entries = jr.entries[:0]
		clear(jr.places)
		jr.places = jr.places[:0]
		jr.queues = jr.queues[:0]
		for _, tm := range jr.woken {
			c.cons.wakeTerm(tm)
		}
		clear(jr.woken)
		jr.woken = jr.woken[:0]
	}
}

// rollback closes cp undoing every change recorded since it, newest
// first, and restores the counters and the output as they were.
func (jr *journal) rollback(cp checkpoint) {
	c := jr.c
	for i := len(jr.entries) - 1; i >= cp.mark; i-- {
		e := &jr.entries[i]
		switch e.kind {
		case jPlace:
			jr.unplace(e, &jr.places[e.at])
		case jWhatIf:
			if e.evicted {
				jr.applyWhatIf(e.t, e.n, e.o, 1)
			}
		}
		*e = jentry{}
	}
	jr.entries = jr.entries[:cp.mark]
	clear(jr.places[cp.places:])
	jr.places = jr.places[:cp.places]
	jr.queues = jr.queues[:cp.queues]
	clear(jr.woken[cp.woken:])
	jr.woken = jr.woken[:cp.woken]
	jr.open--
	c.stats, c.callPlaced = cp.stats, cp.callPlaced
	o := &c.out
	if len(o.Placements) > cp.placements {
		clear(o.Placements[cp.placements:])
		o.Placements = o.Placements[:cp.placements]
	}
	if len(o.Preemptions) > cp.preemptions {
		clear(o.Preemptions[cp.preemptions:])
		o.Preemptions = o.Preemptions[:cp.preemptions]
	}
	if len(o.Transitions) > cp.transitions {
		clear(o.Transitions[cp.transitions:])
		o.Transitions = o.Transitions[:cp.transitions]
	}
	if len(o.Unschedulable) > cp.unschedulable {
		clear(o.Unschedulable[cp.unschedulable:])
		o.Unschedulable = o.Unschedulable[:cp.unschedulable]
	}
}

// whatIfEvict takes placed v's allocation away from its node and from its
// queues' usage, under the open checkpoint: the what-if step of
// preemption (v stays on its node and keeps its state). It returns the
// entry recording it, for whatIfSet.
func (jr *journal) whatIfEvict(v *Task) int {
	o := &v.cls.opts[optIndex(v.chosen)]
	jr.entries = append(jr.entries, jentry{kind: jWhatIf, evicted: true, t: v, n: v.node, o: o})
	jr.applyWhatIf(v, v.node, o, -1)
	return len(jr.entries) - 1
}

// whatIfSet gives back (evicted false) or takes away again the what-if
// eviction recorded at entry i: a reprieve, in place, so that the entry
// says what rollback has to undo. The entry must have been recorded since
// the innermost open checkpoint (an enclosing one's entries are its
// history, which an inner rollback would not undo).
func (jr *journal) whatIfSet(i int, evicted bool) {
	e := &jr.entries[i]
	if e.evicted == evicted {
		return
	}
	e.evicted = evicted
	sign := int64(1)
	if evicted {
		sign = -1
	}
	jr.applyWhatIf(e.t, e.n, e.o, sign)
}

// applyWhatIf adds (sign 1) or takes away (sign -1) v's allocation on n
// and in its queues' usage, and v's counts in the constraint index (its
// host ports, its labels in the terms that match them, its anti-affinity
// terms: evicting it may free a port or lift a conflict, as
// kube-scheduler's preemption finds by removing its victims; the wakes
// this causes wait for the checkpoint's keep, and a rollback drops them).
func (jr *journal) applyWhatIf(v *Task, n *Node, o *Option, sign int64) {
	c := jr.c
	v.whatIfGone = sign < 0
	c.cons.reserve(v, n, int32(sign))
	rawAdd(n, v, o, v.devs, sign)
	req := o.req[:o.reqLen]
	for q := v.leaf; q != nil; q = q.parent {
		for i, r := range req {
			q.used[i] += sign * r
		}
	}
}

// usedAt returns what q held of dim d at cp: its usage now plus what the
// what-if evictions in effect since cp took away.
func (jr *journal) usedAt(cp checkpoint, q *queueNode, d int) int64 {
	u := q.used[d]
	for i := cp.mark; i < len(jr.entries); i++ {
		if e := &jr.entries[i]; e.kind == jWhatIf && e.evicted && inSubtree(e.t.leaf, q) {
			u += e.o.req[d]
		}
	}
	return u
}

// recordPlace records what commit is about to change to place gang-ready
// t on n with o.
func (jr *journal) recordPlace(t *Task, o *Option, n *Node) {
	w := placeWas{state: t.state, chosen: t.chosen, locDone: t.locDone, npos: t.npos, started: t.started,
		reason: t.reason, devs: t.devs, tkind: t.tkind, deadline: t.deadline,
		readyAt: -1, gangReason: t.gang.reason,
		tasks: n.tasks, bucket: n.bucket, pos: n.pos, queuesAt: len(jr.queues)}
	if n.group != nil {
		w.gmax = n.group.max
	}
	for i, m := range t.gang.ready {
		if m == t {
			w.readyAt = i
			break
		}
	}
	for q := t.leaf; q != nil; q = q.parent {
		jr.queues = append(jr.queues, queueWas{picked: q.picked, share: q.share, under: q.under})
	}
	jr.places = append(jr.places, w)
	jr.entries = append(jr.entries, jentry{kind: jPlace, at: len(jr.places) - 1, t: t, n: n, o: o})
}

// unplace undoes a recorded commit (the reverse of commit's steps).
func (jr *journal) unplace(e *jentry, w *placeWas) {
	c := jr.c
	t, n, o := e.t, e.n, e.o
	c.cons.reserve(t, n, -1)
	for i := len(c.policy.Reserve) - 1; i >= 0; i-- {
		c.policy.Reserve[i].Unreserve(&c.cs, t, o, n)
	}
	c.timers.cancel(t)
	if w.tkind != timerNone {
		c.timers.set(t, w.tkind, w.deadline)
	}
	t.deadline = w.deadline // also where no timer is held (a stale value)
	rawAdd(n, t, o, t.devs, -1)
	i := w.queuesAt
	for q := t.leaf; q != nil; q = q.parent {
		for d := range o.req {
			q.used[d] -= o.req[d]
		}
		was := &jr.queues[i]
		i++
		q.picked, q.share, q.under = was.picked, was.share, was.under
		c.qs.reorderLanes(q)
	}
	n.tasks[len(n.tasks)-1] = nil
	n.tasks = w.tasks
	if g := n.group; g != nil && n.bucket != w.bucket {
		g.moveBack(n, w.bucket, w.pos, w.gmax)
	}
	t.state, t.chosen, t.locDone, t.started, t.reason = w.state, w.chosen, w.locDone, w.started, w.reason
	t.node, t.npos, t.devs = nil, w.npos, w.devs
	g := t.gang
	g.ready = append(g.ready, nil)
	copy(g.ready[w.readyAt+1:], g.ready[w.readyAt:])
	g.ready[w.readyAt] = t
	t.gready = true
	g.reason = w.gangReason
}

// moveBack returns n, the last node of its bucket, to slot pos of bucket
// b, where it was before it moved (the reverse of rebucket's move), and
// restores the group's highest bucket.
func (g *group) moveBack(n *Node, b, pos int32, max int) {
	ch := g.ix.totalChanged // the capacity stays: total does not change
	g.remove(n)
	bk := g.buckets[b]
	if int(pos) < len(bk) {
		m := bk[pos]
		m.pos = int32(len(bk))
		bk = append(bk, m)
		bk[pos] = n
	} else {
		bk = append(bk, n)
	}
	g.buckets[b] = bk
	n.bucket, n.pos = b, pos
	g.indexed++
	g.ix.total.Add(&n.capacity)
	g.ix.countFree(n, g.ix.nd)
	g.max = max
	g.ix.totalChanged = ch
}
