package core

// The journal: tries that may be undone run between a checkpoint and its
// rollback or keep, in the manner of KAI-Scheduler's Statement:
//
//	cp := c.checkpoint()
//	… commit members, or evict victims what-if …
//	c.rollback(cp) // or c.keep(cp)
//
// While a checkpoint is open, every change the core makes through commit
// (a placement) is recorded with the state it replaced:
//
//   - allocations: the node's alloc vector and allocation by priority,
//     its devices' shares, its task list, and its bucket position (the
//     node goes back to the very slot it left, so later walks visit the
//     nodes in the order they would have);
//   - queue usage: used by the task's leaf and every ancestor, and when a
//     placement last went below each (picked); shares and lanes follow
//     the usage they are recomputed from;
//   - timers: the timer the task held (a queue timeout), and the lease
//     timer a placement set;
//   - task fields: state, chosen, node, devices, started, reason, the
//     locality preference, and the task's slot in its gang's ready list
//     with the gang's verdict;
//   - stats, the placements made by the current input, and the output
//     appended since the checkpoint (all four lists).
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
// try makes: members wait in no class queue); no input returns with a
// checkpoint open.

// checkpoint is where rollback returns to.
type checkpoint struct {
	mark, picked int // lengths of the journal's entries and picked values
	stats        Stats
	callPlaced   int
	// lengths of the output lists
	placements, preemptions, transitions, unschedulable int
}

// journal is the undo log of the open checkpoints.
type journal struct {
	entries []jentry
	picked  []uint64 // queueNode.picked values replaced by placements
	open    int      // checkpoints open
}

type jkind uint8

const (
	jPlace jkind = iota // commit placed a gang-ready member
)

// jentry is one recorded change and what it replaced.
type jentry struct {
	kind jkind
	t    *Task
	n    *Node
	o    *Option
	// jPlace: the task's fields
	state    State
	chosen   int8
	locDone  bool
	npos     int32
	started  int64
	reason   string
	devs     []devShare
	tkind    timerKind
	deadline int64
	// jPlace: its slot in its gang's ready list, and the gang's verdict
	readyAt    int
	gangReason string
	// jPlace: the node's task list and bucket slot, its group's highest
	// bucket
	tasks       []*Task
	bucket, pos int32
	gmax        int
	// jPlace: where the replaced picked values of the task's leaf and its
	// ancestors (leaf first) start in journal.picked
	pickedAt int
}

// checkpoint opens a checkpoint.
func (c *Core) checkpoint() checkpoint {
	c.jr.open++
	return checkpoint{
		mark: len(c.jr.entries), picked: len(c.jr.picked),
		stats: c.stats, callPlaced: c.callPlaced,
		placements: len(c.out.Placements), preemptions: len(c.out.Preemptions),
		transitions: len(c.out.Transitions), unschedulable: len(c.out.Unschedulable),
	}
}

// journaling reports whether changes are being recorded.
func (c *Core) journaling() bool { return c.jr.open > 0 }

// keep closes cp keeping every placement made since it (an enclosing
// checkpoint may still roll them back).
func (c *Core) keep(cp checkpoint) {
	c.jr.open--
	if c.jr.open == 0 {
		clear(c.jr.entries)
		c.jr.entries = c.jr.entries[:0]
		c.jr.picked = c.jr.picked[:0]
	}
}

// rollback closes cp undoing every change recorded since it, newest
// first, and restores the counters and the output as they were.
func (c *Core) rollback(cp checkpoint) {
	for i := len(c.jr.entries) - 1; i >= cp.mark; i-- {
		e := &c.jr.entries[i]
		switch e.kind {
		case jPlace:
			c.unplace(e)
		}
		*e = jentry{}
	}
	c.jr.entries = c.jr.entries[:cp.mark]
	c.jr.picked = c.jr.picked[:cp.picked]
	c.jr.open--
	c.stats, c.callPlaced = cp.stats, cp.callPlaced
	o := &c.out
	clear(o.Placements[cp.placements:])
	o.Placements = o.Placements[:cp.placements]
	clear(o.Preemptions[cp.preemptions:])
	o.Preemptions = o.Preemptions[:cp.preemptions]
	clear(o.Transitions[cp.transitions:])
	o.Transitions = o.Transitions[:cp.transitions]
	clear(o.Unschedulable[cp.unschedulable:])
	o.Unschedulable = o.Unschedulable[:cp.unschedulable]
}

// recordPlace records what commit is about to change to place gang-ready
// t on n with o.
func (c *Core) recordPlace(t *Task, o *Option, n *Node) {
	e := jentry{kind: jPlace, t: t, n: n, o: o,
		state: t.state, chosen: t.chosen, locDone: t.locDone, npos: t.npos, started: t.started,
		reason: t.reason, devs: t.devs, tkind: t.tkind, deadline: t.deadline,
		readyAt: -1, gangReason: t.gang.reason,
		tasks: n.tasks, bucket: n.bucket, pos: n.pos, pickedAt: len(c.jr.picked)}
	if n.group != nil {
		e.gmax = n.group.max
	}
	for i, m := range t.gang.ready {
		if m == t {
			e.readyAt = i
			break
		}
	}
	for q := t.leaf; q != nil; q = q.parent {
		c.jr.picked = append(c.jr.picked, q.picked)
	}
	c.jr.entries = append(c.jr.entries, e)
}

// unplace undoes a recorded commit (the reverse of commit's steps).
func (c *Core) unplace(e *jentry) {
	t, n, o := e.t, e.n, e.o
	for i := len(c.policy.Reserve) - 1; i >= 0; i-- {
		c.policy.Reserve[i].Unreserve(&c.cs, t, o, n)
	}
	c.timers.cancel(t)
	if e.tkind != timerNone {
		c.timers.set(t, e.tkind, e.deadline)
	}
	t.deadline = e.deadline // also where no timer is held (a stale value)
	rawAdd(n, t, o, t.devs, -1)
	i := e.pickedAt
	for q := t.leaf; q != nil; q = q.parent {
		for d := range o.req {
			q.used[d] -= o.req[d]
		}
		q.picked = c.jr.picked[i]
		i++
		c.refreshShare(q)
	}
	n.tasks[len(n.tasks)-1] = nil
	n.tasks = e.tasks
	if g := n.group; g != nil && n.bucket != e.bucket {
		g.moveBack(n, e.bucket, e.pos, e.gmax)
	}
	t.state, t.chosen, t.locDone, t.started, t.reason = e.state, e.chosen, e.locDone, e.started, e.reason
	t.node, t.npos, t.devs = nil, e.npos, e.devs
	g := t.gang
	g.ready = append(g.ready, nil)
	copy(g.ready[e.readyAt+1:], g.ready[e.readyAt:])
	g.ready[e.readyAt] = t
	t.gready = true
	g.reason = e.gangReason
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
	g.max = max
	g.ix.totalChanged = ch
}
