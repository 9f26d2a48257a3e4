package core

import (
	"github.com/hetsched/hetsched/internal/api"
)

// The serving loop: pending tasks enter their class queues (enqueue), each
// input ends with schedule, which dispatches the due bands in band order
// (each band in its fair order, queues.go) and then tries the waiting
// gangs (jobs.go); a class queue whose head fits nowhere is blocked until
// capacity it could use appears (wake), and tasks that waited past their
// tier's target are raised (age).

// queueOf returns the class queue of cls at level, creating it.
func (lv *levels) queueOf(cls *class, level int, raised bool) *classQueue {
	r := 0
	if raised {
		r = 1
	}
	q := cls.queues[level][r]
	if q == nil {
		q = &classQueue{cls: cls, level: level, band: bandOf(level, raised), hpos: -1, heap: lv.c.policy.QueueSort != nil}
		cls.queues[level][r] = q
	}
	return q
}

// enqueue makes t pending at its native level.
func (c *Core) enqueue(t *Task) {
	t.state = Pending
	t.level = t.prio
	t.raised = 0
	t.levelSince = c.now
	t.enqueued = c.now
	t.reason = ""
	t.starved = false
	if c.policy.QueueSort != nil {
		t.sortKey = c.promo.sortKey(t)
	}
	if t.queueTTL > 0 {
		c.timers.set(t, timerQueue, c.now+t.queueTTL)
	}
	c.promo.schedule(t)
	if t.cls.stale() {
		c.cons.refreshClass(t) // its labels part it from its class now
	}
	if t.locCls != nil {
		c.loc.enterLocality(t)
	}
	if t.gang != nil {
		c.gs.gangEnqueue(t)
		return
	}
	c.lv.pushLevel(t)
}

// pushLevel puts t into its class queue at t.level.
func (lv *levels) pushLevel(t *Task) {
	c := lv.c
	q := lv.queueOf(t.cls, int(t.level), t.raised > 0)
	lv.tiers[t.level].listAppend(t)
	wasEmpty := q.size() == 0
	q.push(t)
	if q.blocked {
		if c.policy.TimeShare != nil && q.head() == t && q.size() > 1 {
			// Time-sharing: a new head ranks better than the one whose
			// failure blocked the queue, and may swap out what that
			// one could not. It tries now.
			c.wk.unblock(q)
		}
		return
	}
	bs := &lv.bands[q.band]
	if bs.active == 0 {
		bs.since = c.now
	}
	bs.active++
	switch {
	case q.deferred:
	case wasEmpty:
		c.qs.hpush(q)
	default:
		c.qs.hfix(q)
	}
}

// unqueue takes a pending t out of its queue and level list (or its
// gang's ready list).
func (c *Core) unqueue(t *Task) {
	if t.gready {
		c.gs.gangUnqueue(t)
		return
	}
	q := t.cq
	c.lv.tiers[t.level].listRemove(t)
	q.removeAt(int(t.cqpos))
	bs := &c.lv.bands[q.band]
	if !q.blocked {
		bs.active--
		if q.hpos >= 0 {
			if q.size() == 0 {
				c.qs.hremove(q)
			} else {
				c.qs.hfix(q)
			}
		}
	}
	if bs.active == 0 {
		bs.since = -1
	}
}

// schedule dispatches every band that is due, in band order (queue.go).
func (c *Core) schedule() {
	c.cons.reclassStale()
	if c.qs.dirty || c.idx.totalChanged {
		c.idx.totalChanged = false
		c.qs.refreshAllShares()
	}
	// A reclaim may evict tasks more important than the reclaimer: their
	// bands were served already in this pass. Another pass serves them,
	// or they would wait for the next input, which may never come. (Every
	// preemption gains guaranteed usage or priority, preempt.go, so the
	// passes end.)
	end := c.servePass()
	for end == passEvicted {
		end = c.servePass()
	}
	if end == passLimit {
		c.retryAt, c.retrySet = c.now, true
		c.gs.gr.sweep(c)
		c.gs.showGangReasons()
		return
	}
	if len(c.gs.wait) > 0 {
		c.gs.placeGangs()
		c.gs.showGangReasons()
	} else {
		c.gs.gr.sweep(c)
	}
}

// passEnd is how one pass over the bands ended.
type passEnd uint8

const (
	passDone    passEnd = iota // every due band was dispatched
	passEvicted                // a band after the first evicted tasks: the pass stopped there
	passLimit                  // the input reached MaxPlacementsPerCall
)

// servePass dispatches the due bands in band order, stopping after a band
// behind the first that evicted tasks (their bands may be due again).
func (c *Core) servePass() passEnd {
	for b := 0; b < nBands; b++ {
		if c.callPlaced >= c.cfg.MaxPlacementsPerCall {
			return passLimit
		}
		if c.lv.due(b) && c.dispatch(b) && b > 0 {
			return passEvicted
		}
	}
	return passDone
}

// due reports whether band b has active work to dispatch now: the native
// band of a batched tier waits until its batch holds BatchSize tasks or
// has collected for Window; every other band is due when it has work.
func (lv *levels) due(b int) bool {
	c := lv.c
	if !c.qs.hasActive(b) {
		return false
	}
	if bandRaised(b) {
		return true
	}
	bs := &lv.bands[b]
	tc := &c.cfg.Tiers[bandLevel(b)]
	return bs.resume || tc.BatchSize <= 1 || bs.active >= tc.BatchSize || c.now-bs.since >= int64(tc.Window)
}

// dispatch places the tasks of band b in order until every active class
// queue of the band is placed, blocked or deferred. When a raised band
// behind b has been passed over AgedBypass times, its head goes instead of
// b's (see bypassed). It reports whether a preemption evicted tasks.
func (c *Core) dispatch(b int) (evicted bool) {
	bs := &c.lv.bands[b]
	c.deferred = c.deferred[:0]
	bs.resume = false
	for c.qs.hasActive(b) {
		if c.callPlaced >= c.cfg.MaxPlacementsPerCall {
			c.retryAt, c.retrySet = c.now, true
			bs.resume = true
			break
		}
		q := c.qs.top(b)
		if r := c.lv.bypassed(b); r > 0 {
			q = c.qs.top(r)
		}
		t := q.head()
		c.stats.Attempts++
		before := c.stats.Placed
		r := c.pl.tryPlace(c.pl.beginSearch(false, nil), t)
		if r == deferred && t.prio <= api.PriorityHigh {
			// Urgent and high work does not wait a retry interval for the
			// rest of its search: it completes now (then may preempt).
			c.stats.Deferrals++
			r = c.pl.tryPlace(c.pl.beginSearch(true, nil), t)
		}
		switch r {
		case placed:
		case deferred:
			c.stats.Deferrals++
			c.qs.hremove(q)
			q.deferred = true
			c.deferred = append(c.deferred, q)
		case unfit:
			if c.pe.mayPreempt(t) {
				done, ev := c.pe.tryPreempt(t)
				evicted = evicted || ev
				if done {
					break
				}
			}
			c.block(q, t)
		}
		if c.stats.Placed != before {
			c.lv.notePlaced(q.band)
		}
	}
	for _, q := range c.deferred {
		q.deferred = false
		if q.size() > 0 && !q.blocked && q.hpos < 0 {
			c.qs.hpush(q)
		}
		// The search budget ran out: resume soon, batch or not.
		c.lv.bands[q.band].resume = true
	}
	if len(c.deferred) > 0 {
		c.retrySoon()
	}
	switch {
	case bs.active == 0:
		bs.since = -1
	case !bs.resume:
		bs.since = c.now
	}
	return evicted
}

// bandLevel returns the level of band b's work.
func bandLevel(b int) int { return (b + 1) / 2 }

// bypassed returns the raised band whose turn it is instead of band b's, 0
// when none: a band behind b with active work that placements from the
// bands ahead of it have passed over AgedBypass times since its last
// placement. Urgent work (band 0) is never held back. When both raised
// bands qualify, the one whose head was raised first goes (then the
// earlier submitted).
func (lv *levels) bypassed(b int) int {
	c := lv.c
	if b == 0 {
		return 0
	}
	best := 0
	var bh *Task
	for _, r := range raisedBands {
		if r <= b || lv.bypass[r] < c.cfg.AgedBypass || !c.qs.hasActive(r) {
			continue
		}
		h := c.qs.top(r).head()
		if best == 0 || h.levelSince < bh.levelSince || h.levelSince == bh.levelSince && h.seq < bh.seq {
			best, bh = r, h
		}
	}
	return best
}

// notePlaced counts a placement from band pb against the raised bands: it
// resets pb's own count, and counts one bypass of every raised band behind
// pb that has active work (placements from urgent, band 0, are not
// counted: urgent work never yields).
func (lv *levels) notePlaced(pb int) {
	c := lv.c
	for _, r := range raisedBands {
		switch {
		case r == pb:
			lv.bypass[r] = 0
		case r > pb && pb > 0 && c.qs.hasActive(r):
			lv.bypass[r]++
		}
	}
}

// block parks q until capacity appears in a group its class can use.
func (c *Core) block(q *classQueue, t *Task) {
	c.stats.Blocks++
	if q.hpos >= 0 {
		c.qs.hremove(q)
	}
	q.blocked = true
	q.gen++
	bs := &c.lv.bands[q.band]
	if bs.active -= q.size(); bs.active == 0 {
		bs.since = -1
	}
	c.wk.park(q, t)
	c.out.Unfit = append(c.out.Unfit, UnfitAttempt{Task: t.id, Priority: int(t.prio), Wait: durationOf(c.now - attemptStart(t))})
	reason := c.pl.explain(t)
	switch {
	case reason != q.lastReason:
		// Reported to every waiting task when the reason changes, not at
		// every retry.
		q.lastReason = reason
		q.dropUntold()
		ids := make([]string, 0, q.size())
		for _, x := range q.tasks {
			if x != nil {
				ids = append(ids, x.id)
			}
		}
		c.out.Unschedulable = append(c.out.Unschedulable, UnschedulableClass{Sample: t.id, Count: q.size(), Reason: reason, Tasks: ids})
	case len(q.untold) > 0:
		// The same reason: only the tasks that joined since the queue
		// was last blocked have not been told it.
		if untold := q.takeUntold(); len(untold) > 0 {
			ids := make([]string, len(untold))
			for i, x := range untold {
				ids[i] = x.id
			}
			c.out.Unschedulable = append(c.out.Unschedulable, UnschedulableClass{Sample: t.id, Count: q.size(), Reason: reason, Tasks: ids})
		}
	}
}

// appendRef adds r, dropping stale references once the list has doubled.
func appendRef(refs []blockRef, r blockRef) []blockRef {
	if len(refs) >= 64 && len(refs) == cap(refs) {
		live := refs[:0]
		for _, x := range refs {
			if x.q.blocked && x.q.gen == x.gen && x.q != r.q {
				live = append(live, x)
			}
		}
		for i := len(live); i < len(refs); i++ {
			refs[i] = blockRef{}
		}
		refs = live
	}
	return append(refs, r)
}

// waker holds the blocked class queues and wakes them when capacity that
// may help them appears. A blocked queue is listed (park) where the
// changes that may help it look: the identity value it is pinned to or
// the groups its options may use, the list of all, its constraint terms,
// and a retry list when its head may preempt or swap. The core calls it
// at named points: park when a queue blocks, wake when a node's
// resources free, wakeAll when the groups change, unblockRefs when a
// retry list is due.
type waker struct {
	c      *Core
	all    []blockRef
	pinned map[pinKey][]blockRef // pinned classes by the identity value they wait on
	// highRetry lists the blocked queues whose head may preempt (urgent
	// and high) or reclaim, retried after Config.PreemptRetry.
	highRetry retryList
	// shareRetry lists the blocked queues whose head may swap out a
	// running task under a time-sharing policy, retried every
	// Config.TimeShareRound.
	shareRetry retryList
}

// park lists blocked q, whose head is t, where a wake may find it.
func (wk *waker) park(q *classQueue, t *Task) {
	c := wk.c
	ref := blockRef{q: q, gen: q.gen}
	if id := q.cls.identity; len(id) > 0 {
		// Pinned: wait on the identity value (whichever node carries it,
		// now or later), so that releases elsewhere in the groups do not
		// walk past every pinned class.
		for _, v := range id[0].values {
			k := pinKey{id[0].key, v}
			wk.pinned[k] = appendRef(wk.pinned[k], ref)
		}
	} else {
		for oi := range q.cls.opts {
			for _, g := range q.cls.opts[oi].groups {
				g.blocked = appendRef(g.blocked, ref)
			}
		}
	}
	wk.all = appendRef(wk.all, ref)
	if q.cls.cons != nil {
		c.cons.blockOn(q.cls.cons, ref)
	}
	switch {
	case t.prio <= 1 || c.policy.TimeShare == nil && c.pe.mayPreempt(t):
		wk.highRetry.add(ref, c.now, int64(c.cfg.PreemptRetry))
	case c.pe.mayPreempt(t):
		// Time-sharing: the next round tries again (running tasks'
		// ranks and protections change with time).
		wk.shareRetry.add(ref, c.now, int64(c.cfg.TimeShareRound))
	}
}

// wake reactivates the class queues blocked on n's group that could use
// n's free resources now; the others stay blocked. The cost is one vector
// comparison per blocked class of the group, so a release never retries
// classes it cannot help.
func (wk *waker) wake(n *Node) {
	c := wk.c
	c.capSeq++
	g := n.group
	if g == nil || n.bucket < 0 {
		return
	}
	g.blocked = wk.wakeRefs(g.blocked, g, n)
	if len(wk.pinned) == 0 {
		return
	}
	for k, v := range n.labels {
		if !c.idx.identity[k] {
			continue
		}
		pk := pinKey{k, v}
		if refs, ok := wk.pinned[pk]; ok {
			if refs = wk.wakeRefs(refs, g, n); len(refs) == 0 {
				delete(wk.pinned, pk)
			} else {
				wk.pinned[pk] = refs
			}
		}
	}
}

// pinKey is an identity label value that pinned classes wait on.
type pinKey struct{ key, value string }

// wakeRefs unblocks the live queues of refs that could fit n and returns
// the refs still waiting.
func (wk *waker) wakeRefs(refs []blockRef, g *group, n *Node) []blockRef {
	keep := refs[:0]
	for _, r := range refs {
		if !r.q.blocked || r.q.gen != r.gen {
			continue // stale
		}
		if wk.couldFit(r.q.cls, g, n) {
			wk.unblock(r.q)
			continue
		}
		keep = append(keep, r)
	}
	for i := len(keep); i < len(refs); i++ {
		refs[i] = blockRef{}
	}
	return keep
}

// couldFit reports whether some option of cls that may use g fits n's free
// resources by vector (devices are checked by the attempt itself).
func (wk *waker) couldFit(cls *class, g *group, n *Node) bool {
	c := wk.c
	if cls.perNode() && !identityMatch(cls, n) {
		return false
	}
	nd := c.dims.Len()
	for oi := range cls.opts {
		o := &cls.opts[oi]
		if !o.hasGroup(g) {
			continue
		}
		fits := true
		for i := 0; i < nd; i++ {
			if o.req[i] > n.capacity[i]-n.alloc[i] {
				fits = false
				break
			}
		}
		if fits {
			return true
		}
	}
	return false
}

// unblockRefs reactivates the class queues refs name that are still
// blocked since they were listed.
func (wk *waker) unblockRefs(refs []blockRef) {
	for _, r := range refs {
		if r.q.blocked && r.q.gen == r.gen {
			wk.unblock(r.q)
		}
	}
}

// wakeAll reactivates every blocked class queue (the set of groups changed).
func (wk *waker) wakeAll() {
	c := wk.c
	c.capSeq++
	for _, r := range wk.all {
		if r.q.blocked && r.q.gen == r.gen {
			wk.unblock(r.q)
		}
	}
	wk.all = wk.all[:0]
}

func (wk *waker) unblock(q *classQueue) {
	c := wk.c
	q.blocked = false
	q.woken = c.now
	if q.size() == 0 {
		return
	}
	bs := &c.lv.bands[q.band]
	// The woken tasks have waited already: the batch counts from the
	// entry of the queue's head (its oldest task in FIFO order), so that
	// capacity that comes back is not left to less important work for
	// another window.
	if h := q.head().levelSince; bs.active == 0 || h < bs.since {
		bs.since = h
	}
	bs.active += q.size()
	if !q.deferred {
		c.qs.hpush(q)
	}
}

// agingThreshold is how long t must wait at its level before it is raised;
// 0 means never: urgent and high tasks, and tasks raised once already
// (aging raises a task at most one level, queue.go).
func (lv *levels) agingThreshold(t *Task) int64 {
	c := lv.c
	if t.level <= api.PriorityHigh || t.raised > 0 {
		return 0
	}
	return int64(c.cfg.Tiers[t.level].AgingAfter)
}

// age raises the native tasks that waited past their level's threshold by
// one level (the number goes down: medium to 1, low to 2), oldest first.
// Raised tasks are not raised again: they wait in their level's raised
// band, which the bounded bypass keeps from starving (queue.go).
func (lv *levels) age() {
	c := lv.c
	for l := 3; l >= 2; l-- {
		tr := &lv.tiers[l]
		for {
			h := tr.aging[0].head
			if h == nil {
				break
			}
			th := lv.agingThreshold(h)
			if th == 0 || c.now-h.levelSince <= th {
				break // not waited past the threshold yet
			}
			c.unqueue(h)
			h.level--
			h.raised = 1
			h.levelSince = c.now
			c.stats.Aged++
			lv.pushLevel(h)
		}
	}
}

// retryList is a list of blocked class queues retried together at one
// time: those whose head may preempt or reclaim (Core.highRetry), or swap
// out a running task under time-sharing (Core.shareRetry).
type retryList struct {
	refs []blockRef
	at   int64
}

// add lists ref; the first ref of an empty list sets the list's time to
// now+after.
func (l *retryList) add(ref blockRef, now, after int64) {
	if len(l.refs) == 0 {
		l.at = now + after
	}
	l.refs = appendRef(l.refs, ref)
}

// next returns the list's time, ok=false when it is empty.
func (l *retryList) next() (int64, bool) { return l.at, len(l.refs) > 0 }

// due takes the list's refs when its time has come (nil before).
func (l *retryList) due(now int64) []blockRef {
	if len(l.refs) == 0 || now < l.at {
		return nil
	}
	refs := l.refs
	l.refs = nil
	return refs
}
