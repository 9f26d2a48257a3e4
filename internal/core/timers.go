package core

// timerKind says what a task's deadline means.
type timerKind uint8

const (
	timerNone  timerKind = iota
	timerQueue           // pending past queueTimeout: expired
	timerRun             // running past timeout: timeout
	timerLease           // lease not renewed: expired
	timerRetry           // a failed job task's backoff ended: pending again
)

// timers is a min-heap of tasks by deadline; a task holds at most one timer.
type timers struct {
	h []*Task
}

func (tm *timers) set(t *Task, kind timerKind, deadline int64) {
	if t.tkind != timerNone {
		tm.cancel(t)
	}
	t.tkind = kind
	t.deadline = deadline
	t.tpos = int32(len(tm.h))
	tm.h = append(tm.h, t)
	heapUp[*Task, byDeadline](tm.h, int(t.tpos))
}

func (tm *timers) cancel(t *Task) {
	if t.tkind == timerNone {
		return
	}
	tm.h = heapRemove[*Task, byDeadline](tm.h, int(t.tpos))
	t.tkind = timerNone
	t.tpos = -1
}

// next returns the earliest deadline, ok=false when none.
func (tm *timers) next() (int64, bool) {
	if len(tm.h) == 0 {
		return 0, false
	}
	return tm.h[0].deadline, true
}

// popDue removes and returns the earliest task whose deadline is <= now.
func (tm *timers) popDue(now int64) (*Task, timerKind) {
	if len(tm.h) == 0 || tm.h[0].deadline > now {
		return nil, timerNone
	}
	t := tm.h[0]
	k := t.tkind
	tm.cancel(t)
	return t, k
}

func tLess(a, b *Task) bool {
	if a.deadline != b.deadline {
		return a.deadline < b.deadline
	}
	return a.seq < b.seq
}

// fireTimers handles every deadline that has passed.
func (c *Core) fireTimers() {
	for {
		t, kind := c.timers.popDue(c.now)
		if t == nil {
			return
		}
		switch kind {
		case timerQueue:
			if t.state == Pending {
				c.stats.Expired++
				c.finish(t, Expired, "queueTimeout "+durString(t.queueTTL)+" passed while pending")
			}
		case timerRun:
			if t.state == Running {
				c.finish(t, Timeout, "ran past its timeout "+durString(t.timeout))
			}
		case timerLease:
			if t.state == Scheduled || t.state == Running {
				c.finish(t, Expired, "lease not renewed within "+durString(t.lease))
			}
		case timerRetry:
			if t.state == Pending && t.backoff {
				t.backoff = false
				t.leaf.backoff--
				reason := t.reason
				c.enqueue(t)
				t.reason = reason
			}
		}
	}
}
