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
	t.q = q
	t.qpos = int32(len(q.tasks))
	q.tasks = append(q.tasks, t)
	q.live++
	if q.heap {
		heapUp[*Task, byQueueOrder](q.tasks, int(t.qpos))
	}
}

// removeAt removes the task at index i.
func (q *classQueue) removeAt(i int) {
	t := q.tasks[i]
	t.q = nil
	t.qpos = -1
	q.live--
	if !q.heap {
		q.tasks[i] = nil
		if q.live == 0 {
			clear(q.tasks)
			q.tasks = q.tasks[:0]
			q.first = 0
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
					x.qpos = int32(n)
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

// tier holds one level (its active class queues are in the queue tree's
// lanes, queues.go), and its pending tasks in entry order (for aging): aging[0] holds
// tasks at their native level, aging[1] tasks raised into it, so that each
// list is ordered by deadline.
type tier struct {
	active int   // tasks in active queues
	since  int64 // when the current batch started collecting; -1 when none
	resume bool  // a dispatch stopped early: the tier is due again at once
	aging  [2]tlist
	count  int // pending tasks at this level
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
}
