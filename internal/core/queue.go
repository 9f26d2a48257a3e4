package core

// classQueue holds the pending tasks of one class at one level, ordered by
// (sortKey, levelSince, seq). Without a queue-sort plugin every key is
// appended in order, so the queue is a FIFO with O(1) push and pop (lazy
// deletion for removals from the middle); with one (shortest-job-first) it
// is a binary heap. A queue is active (in its tier's heap) or blocked (its
// head did not fit; it waits for capacity in a compatible group).
type classQueue struct {
	cls      *class
	level    int
	band     int     // bandOf(level, raised): where it waits in the serving order
	heap     bool    // heap mode (sorted policies) or FIFO mode
	tasks    []*Task // FIFO: tasks[first:] with nil holes; heap: the heap
	first    int
	live     int
	hpos     int32 // index in its leaf's lane; -1 when not there
	blocked  bool
	gen      uint32 // bumps at each block, invalidates old blockRefs
	deferred bool   // left for the next cycle (search budget spent)
	// lastReason is the unschedulable reason last reported for this queue.
	lastReason string
	// untold holds the tasks that joined while the queue was not blocked
	// (maybe gone since: placed, cancelled, moved): their records do not
	// carry lastReason, so a block that finds the same reason reports
	// them, and only them. Cleared at each block and when the queue
	// empties; compacted as it grows, so it stays within twice the live
	// tasks.
	untold []*Task
	// woken is when capacity its class could use last woke it (0: never
	// blocked): where an attempt of a task that was already waiting begins.
	woken int64
}

func taskLess(a, b *Task) bool {
	if a.sortKey != b.sortKey {
		return a.sortKey < b.sortKey
	}
	if a.levelSince != b.levelSince {
		return a.levelSince < b.levelSince
	}
	return a.seq < b.seq
}

func (q *classQueue) size() int { return q.live }

// head returns the first task; the queue must not be empty.
func (q *classQueue) head() *Task {
	if q.heap {
		return q.tasks[0]
	}
	for q.tasks[q.first] == nil {
		q.first++
	}
	return q.tasks[q.first]
}

func (q *classQueue) push(t *Task) {
	t.cq = q
	t.cqpos = int32(len(q.tasks))
	q.tasks = append(q.tasks, t)
	q.live++
	if !q.blocked || q.lastReason == "" {
		q.noteUntold(t)
	}
	if q.heap {
		heapUp[*Task, byQueueOrder](q.tasks, int(t.cqpos))
	}
}

// noteUntold adds t to the untold tasks, first dropping those no longer
// in the queue once the list has outgrown twice the live tasks.
func (q *classQueue) noteUntold(t *Task) {
	if n := len(q.untold); n >= 64 && n == cap(q.untold) && n > 2*q.live {
		keep := q.untold[:0]
		for _, x := range q.untold {
			if x.cq == q {
				keep = append(keep, x)
			}
		}
		clear(q.untold[len(keep):])
		q.untold = keep
	}
	q.untold = append(q.untold, t)
}

// takeUntold returns the untold tasks still waiting in the queue and
// forgets them all.
func (q *classQueue) takeUntold() []*Task {
	var in []*Task
	for _, x := range q.untold {
		if x.cq == q {
			in = append(in, x)
		}
	}
	q.dropUntold()
	return in
}

func (q *classQueue) dropUntold() {
	clear(q.untold)
	q.untold = q.untold[:0]
}

// removeAt removes the task at index i.
func (q *classQueue) removeAt(i int) {
	t := q.tasks[i]
	t.cq = nil
	t.cqpos = -1
	q.live--
	if !q.heap {
		q.tasks[i] = nil
		if q.live == 0 {
			clear(q.tasks)
			q.tasks = q.tasks[:0]
			q.first = 0
			q.dropUntold()
			return
		}
		if i == q.first {
			q.first++
		}
		// Compact once the dead slots (consumed head or holes left by
		// removals from the middle) outnumber the live tasks.
		if dead := len(q.tasks) - q.live; dead >= 1024 && dead > q.live {
			n := 0
			for _, x := range q.tasks[q.first:] {
				if x != nil {
					q.tasks[n] = x
					x.cqpos = int32(n)
					n++
				}
			}
			clear(q.tasks[n:])
			q.tasks = q.tasks[:n]
			q.first = 0
		}
		return
	}
	q.tasks = heapRemove[*Task, byQueueOrder](q.tasks, i)
}

// tier holds one level's pending tasks in entry order (for aging):
// levels holds the pending tasks by level: each tier's aging lists and
// counts, the bands' batch windows, and the raised bands' bypass counts.
// The core calls it at named points: pushLevel when a task becomes
// pending, due and notePlaced when a pass dispatches, age at each Tick.
type levels struct {
	c     *Core
	tiers [4]tier
	bands [nBands]bandState
	// bypass counts, per raised band, the placements that passed over its
	// active work since its last placement.
	bypass [nBands]int
}

// aging[0] holds tasks at their native level, aging[1] tasks raised into it,
// so that each list is ordered by levelSince. Only aging[0] is walked by
// age(): a task is raised at most once.
type tier struct {
	aging [2]tlist
	count int // pending tasks at this level
	// raised counts those of them in aging[1]: raised into this level
	// from the one below.
	raised int
}

// Bands: the order in which pending work is served. A level's native work
// and the work aging raised into it wait in separate bands, the raised band
// right behind the native one:
//
//	band 0: urgent (level 0)          band 3: medium (level 2)
//	band 1: high (level 1)            band 4: low raised to level 2
//	band 2: medium raised to level 1  band 5: low (level 3)
//
// Contract (aging and the serving order):
//   - Aging raises a task at most one level above its native tier (medium
//     to 1, low to 2), never to 0, once it has waited its tier's
//     AgingAfter. A raised task waits ahead of the native work of its own
//     and of every less important tier, and behind the native work of the
//     level it was raised into, so aged work as a mass never outranks
//     natively more important work.
//   - Anti-starvation is a bounded bypass instead (as the deadline I/O
//     scheduler's writes_starved): while a raised band has active work,
//     placements from the bands ahead of it (urgent excepted) pass over it
//     at most Config.AgedBypass times in a row; the next placement is the
//     raised band's head. So raised work that fits gets at least one
//     placement in every AgedBypass+1 made at levels 1 and 2 while it
//     waits, and a low task is placed under any sustained load but
//     urgent's. When two raised bands are due a turn, the one whose head
//     was raised first goes. (This orders placement only: a placed task
//     stays a priority-preemption victim of urgent and high work, by its
//     native priority, however it was placed.)
//   - Each band is served in its own fair order (its lanes, queues.go), so
//     picking the next task of a band, and counting bypasses, is O(depth ×
//     log fan-out): never a scan of the queue. The counters change only on
//     placements, so the order is deterministic.
//   - Batching applies to the native bands of levels 2 and 3 only: raised
//     tasks have waited past their target already and are never held for
//     a batch. A batch counts from its oldest active task's entry: a class
//     woken by released capacity brings its head's entry time along, so
//     that capacity is not left to less important work for another window.
const nBands = 6

// bandOf returns the band of level's native (raised false) or raised work.
func bandOf(level int, raised bool) int {
	if level == 0 {
		return 0
	}
	b := 2*level - 1
	if raised {
		b++
	}
	return b
}

// bandRaised reports whether band b holds raised work.
func bandRaised(b int) bool { return b == 2 || b == 4 }

// raisedBands lists the bands of raised work.
var raisedBands = [2]int{2, 4}

// bandState is the batching state of one band.
type bandState struct {
	active int   // tasks in active queues
	since  int64 // when the current batch started collecting; -1 when none
	resume bool  // a dispatch stopped early: the band is due again at once
}

type tlist struct {
	head, tail *Task
}

func agingList(x *Task) int {
	if x.raised > 0 {
		return 1
	}
	return 0
}

func qLess(a, b *classQueue) bool { return taskLess(a.head(), b.head()) }

// listAppend adds x at the tail of its aging list.
func (t *tier) listAppend(x *Task) {
	l := &t.aging[agingList(x)]
	x.lprev, x.lnext = l.tail, nil
	if l.tail != nil {
		l.tail.lnext = x
	} else {
		l.head = x
	}
	l.tail = x
	t.count++
	if l == &t.aging[1] {
		t.raised++
	}
}

func (t *tier) listRemove(x *Task) {
	l := &t.aging[agingList(x)]
	if x.lprev != nil {
		x.lprev.lnext = x.lnext
	} else {
		l.head = x.lnext
	}
	if x.lnext != nil {
		x.lnext.lprev = x.lprev
	} else {
		l.tail = x.lprev
	}
	x.lprev, x.lnext = nil, nil
	t.count--
	if l == &t.aging[1] {
		t.raised--
	}
}
