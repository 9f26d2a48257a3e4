package core

import (
	"fmt"
	"maps"

	"github.com/hetsched/hetsched/internal/api"

	"github.com/hetsched/hetsched/internal/resource"
)

// checkInvariants verifies the core's internal consistency: allocation
// equals the sum of what placed tasks hold and never exceeds capacity,
// every device share is within 0..1000, every task is in exactly the
// structures its state says, and the indexes agree with the nodes.
func checkInvariants(c *Core) error {
	placedOn, err := checkNodes(c)
	if err != nil {
		return err
	}
	if err := checkGroups(c); err != nil {
		return err
	}
	pendingAt, activeAt, seenQ, err := checkTaskStates(c, placedOn)
	if err != nil {
		return err
	}
	if err := checkTiers(c, pendingAt); err != nil {
		return err
	}
	for b := range c.lv.bands {
		bs := &c.lv.bands[b]
		if bs.active != activeAt[b] {
			return fmt.Errorf("band %d: active %d, tasks in active queues %d", b, bs.active, activeAt[b])
		}
		if (bs.active == 0) != (bs.since < 0) {
			return fmt.Errorf("band %d: active %d, batch since %d", b, bs.active, bs.since)
		}
	}
	if err := checkLanes(c); err != nil {
		return err
	}
	for q := range seenQ {
		if !q.blocked && !q.deferred && q.hpos < 0 {
			return fmt.Errorf("active queue of class %q at level %d is not in its lane", q.cls.key, q.level)
		}
	}
	for i, t := range c.timers.h {
		if int(t.tpos) != i || t.tkind == timerNone {
			return fmt.Errorf("timer %d of %s inconsistent", i, t.id)
		}
		if i > 0 && tLess(t, c.timers.h[(i-1)/2]) {
			return fmt.Errorf("timer heap order broken at %d", i)
		}
	}
	if err := checkQueueInvariants(c); err != nil {
		return err
	}
	if err := checkConstraints(c); err != nil {
		return err
	}
	return checkJobInvariants(c)
}

// checkConstraints: every term's counts and owners, and every node's host
// ports, are what the placed tasks make them, recounted from scratch.
func checkConstraints(c *Core) error {
	ci := &c.cons
	owned := 0
	for text, tm := range ci.terms {
		count, byNode, owners := map[string]int32{}, map[*Node]int32{}, map[string]int32{}
		var total, nOwners int32
		for _, n := range c.idx.order {
			for _, t := range n.tasks {
				if ci.matches(tm, t) {
					byNode[n]++
					total++
					if dom, ok := n.labels[tm.key]; ok {
						count[dom]++
					}
				}
				if cc := t.cls.cons; cc != nil {
					for _, ct := range cc.anti {
						if dom, ok := n.labels[tm.key]; ok && ct.t == tm {
							owners[dom]++
							nOwners++
						}
					}
				}
			}
		}
		if !maps.Equal(count, tm.count) || !maps.Equal(byNode, tm.byNode) || total != tm.total {
			return fmt.Errorf("term %q: counts %v (%d), recounted %v (%d)", text, tm.count, tm.total, count, total)
		}
		if !maps.Equal(owners, tm.owners) || nOwners != tm.nOwners {
			return fmt.Errorf("term %q: owners %v, recounted %v", text, tm.owners, owners)
		}
		if nOwners > 0 {
			owned++
		}
	}
	if owned != ci.owned {
		return fmt.Errorf("%d terms owned, recounted %d", ci.owned, owned)
	}
	for _, n := range c.idx.order {
		var want []api.HostPort
		for _, t := range n.tasks {
			if cc := t.cls.cons; cc != nil {
				want = append(want, cc.ports...)
			}
		}
		got := ci.ports[n]
		if len(got) != len(want) {
			return fmt.Errorf("node %s: host ports %v, recounted %v", n.name, got, want)
		}
	}
	return nil
}

// checkNodes: every node's allocation, devices, bucket and index entry
// agree with the tasks placed on it; it returns where each placed task is.
func checkNodes(c *Core) (map[*Task]*Node, error) {
	nd := c.dims.Len()
	placedOn := map[*Task]*Node{}
	for _, n := range c.idx.order {
		var alloc resource.Vector
		var byPrio [4]resource.Vector
		used := make([]int32, len(n.devices))
		for i, t := range n.tasks {
			if t.node != n || int(t.npos) != i {
				return nil, fmt.Errorf("node %s: task %s at %d has node=%v npos=%d", n.name, t.id, i, t.node != nil, t.npos)
			}
			if t.state != Scheduled && t.state != Running {
				return nil, fmt.Errorf("node %s holds task %s in state %s", n.name, t.id, t.state)
			}
			if _, dup := placedOn[t]; dup {
				return nil, fmt.Errorf("task %s placed twice", t.id)
			}
			placedOn[t] = n
			o := &t.cls.opts[optIndex(t.chosen)]
			alloc.Add(&o.req)
			if t.preemptible {
				byPrio[t.prio].Add(&o.req)
			}
			var perDim [resource.MaxDims]int64
			for _, s := range t.devs {
				if int(s.dev) >= len(n.devices) {
					return nil, fmt.Errorf("task %s: device index %d out of range", t.id, s.dev)
				}
				used[s.dev] += s.milli
				perDim[n.devices[s.dev].dim] += int64(s.milli)
				if !n.devices[s.dev].Healthy {
					return nil, fmt.Errorf("task %s holds unhealthy device %s", t.id, n.devices[s.dev].ID)
				}
			}
			for _, dr := range o.devs {
				if len(n.byDim[dr.dim]) > 0 && perDim[dr.dim] != dr.milli {
					return nil, fmt.Errorf("task %s: holds %d milli of %s devices, requested %d", t.id, perDim[dr.dim], c.dims.Name(dr.dim), dr.milli)
				}
			}
		}
		if alloc != n.alloc {
			return nil, fmt.Errorf("node %s: alloc %v, tasks sum %v", n.name, c.dims.Format(&n.alloc), c.dims.Format(&alloc))
		}
		if byPrio != n.allocByPrio {
			return nil, fmt.Errorf("node %s: allocByPrio out of step", n.name)
		}
		for i := 0; i < nd; i++ {
			if n.alloc[i] > n.capacity[i] {
				return nil, fmt.Errorf("node %s over-allocated on %s: %d > %d", n.name, c.dims.Name(i), n.alloc[i], n.capacity[i])
			}
			if n.alloc[i] < 0 {
				return nil, fmt.Errorf("node %s negative allocation on %s", n.name, c.dims.Name(i))
			}
		}
		for i := range n.devices {
			if n.devices[i].Used != used[i] {
				return nil, fmt.Errorf("node %s device %s: used %d, tasks hold %d", n.name, n.devices[i].ID, n.devices[i].Used, used[i])
			}
			if used[i] < 0 || used[i] > 1000 {
				return nil, fmt.Errorf("node %s device %s share %d out of 0..1000", n.name, n.devices[i].ID, used[i])
			}
		}
		g := n.group
		if g == nil {
			return nil, fmt.Errorf("node %s has no group", n.name)
		}
		if (n.state == "ready") != (n.bucket >= 0) {
			return nil, fmt.Errorf("node %s: state %s but bucket %d", n.name, n.state, n.bucket)
		}
		if n.bucket >= 0 {
			if want := g.bucketOf(n.freeDim(g.primary)); want != int(n.bucket) {
				return nil, fmt.Errorf("node %s in bucket %d, free says %d", n.name, n.bucket, want)
			}
			bk := g.buckets[n.bucket]
			if int(n.pos) >= len(bk) || bk[n.pos] != n {
				return nil, fmt.Errorf("node %s: bucket position wrong", n.name)
			}
		}
		if c.idx.nodes[n.name] != n {
			return nil, fmt.Errorf("node %s: name index wrong", n.name)
		}
	}
	return placedOn, nil
}

// checkGroups: every group's buckets hold its schedulable nodes and its
// counts agree.
func checkGroups(c *Core) error {
	for _, g := range c.idx.glist {
		cnt, max := 0, -1
		for b := range g.buckets {
			cnt += len(g.buckets[b])
			if len(g.buckets[b]) > 0 {
				max = b
			}
			for _, n := range g.buckets[b] {
				if n.group != g {
					return fmt.Errorf("group %d holds node %s of another group", g.id, n.name)
				}
			}
		}
		if cnt != g.indexed || max != g.max {
			return fmt.Errorf("group %d: indexed %d/%d max %d/%d", g.id, g.indexed, cnt, g.max, max)
		}
	}
	return nil
}

// checkTaskStates: every task is in exactly the structures its state
// says; it returns the pending tasks per level, the active ones per band
// and the class queues holding pending tasks.
func checkTaskStates(c *Core, placedOn map[*Task]*Node) (pendingAt [4]int, activeAt [nBands]int, seenQ map[*classQueue]bool, err error) {
	seenQ = map[*classQueue]bool{}
	for _, t := range c.tasks {
		switch t.state {
		case Pending:
			if t.backoff || t.gready {
				// In no class queue: waiting out a retry backoff (with a
				// retry timer), or in its gang's ready list.
				if t.node != nil {
					return pendingAt, activeAt, seenQ, fmt.Errorf("pending task %s (backoff %v, gang %v) holds a node", t.id, t.backoff, t.gready)
				}
				if t.backoff && t.tkind != timerRetry {
					return pendingAt, activeAt, seenQ, fmt.Errorf("task %s in backoff without its retry timer", t.id)
				}
				if t.gready {
					found := false
					for _, m := range t.gang.ready {
						found = found || m == t
					}
					if !found || !t.gang.waiting {
						return pendingAt, activeAt, seenQ, fmt.Errorf("gang-ready task %s is not in its waiting gang's ready list", t.id)
					}
				}
				continue
			}
			if t.cq == nil || int(t.cqpos) >= len(t.cq.tasks) || t.cq.tasks[t.cqpos] != t {
				return pendingAt, activeAt, seenQ, fmt.Errorf("pending task %s is not in its queue", t.id)
			}
			if t.cq.level != int(t.level) || t.node != nil {
				return pendingAt, activeAt, seenQ, fmt.Errorf("pending task %s: queue level %d, level %d, node %v", t.id, t.cq.level, t.level, t.node != nil)
			}
			if t.level > t.prio || t.level < 0 || (t.level < 1 && t.prio >= 1) {
				return pendingAt, activeAt, seenQ, fmt.Errorf("pending task %s: level %d for priority %d", t.id, t.level, t.prio)
			}
			// Aging raises a task at most once, by one level.
			if t.raised < 0 || t.raised > 1 || int(t.prio-t.level) != int(t.raised) {
				return pendingAt, activeAt, seenQ, fmt.Errorf("pending task %s: level %d for priority %d, raised %d", t.id, t.level, t.prio, t.raised)
			}
			if t.cq.band != bandOf(int(t.level), t.raised > 0) {
				return pendingAt, activeAt, seenQ, fmt.Errorf("pending task %s: level %d raised %d in band %d", t.id, t.level, t.raised, t.cq.band)
			}
			pendingAt[t.level]++
			if !t.cq.blocked {
				activeAt[t.cq.band]++
			}
			seenQ[t.cq] = true
		case Scheduled, Running:
			if placedOn[t] == nil || t.cq != nil {
				return pendingAt, activeAt, seenQ, fmt.Errorf("%s task %s: on node %v, queued %v", t.state, t.id, placedOn[t] != nil, t.cq != nil)
			}
		default:
			if t.cq != nil || t.node != nil {
				return pendingAt, activeAt, seenQ, fmt.Errorf("%s task %s still queued or placed", t.state, t.id)
			}
			if t.state.Terminal() && t.tkind != timerNone {
				return pendingAt, activeAt, seenQ, fmt.Errorf("%s task %s still has a timer", t.state, t.id)
			}
		}
	}
	return pendingAt, activeAt, seenQ, nil
}

// checkTiers: each level's aging lists hold its pending tasks in entry
// order, and its count agrees.
func checkTiers(c *Core, pendingAt [4]int) error {
	for l := range c.lv.tiers {
		tr := &c.lv.tiers[l]
		if tr.count != pendingAt[l] {
			return fmt.Errorf("level %d: count %d, pending tasks %d", l, tr.count, pendingAt[l])
		}
		listed := 0
		for r := range tr.aging {
			var prev *Task
			for x := tr.aging[r].head; x != nil; x = x.lnext {
				if x.state != Pending || int(x.level) != l || agingList(x) != r || x.lprev != prev {
					return fmt.Errorf("level %d aging list %d holds %s (%s, level %d)", l, r, x.id, x.state, x.level)
				}
				if prev != nil && prev.levelSince > x.levelSince {
					return fmt.Errorf("level %d aging list %d out of order at %s", l, r, x.id)
				}
				prev = x
				listed++
			}
			if tr.aging[r].tail != prev {
				return fmt.Errorf("level %d aging list %d tail wrong", l, r)
			}
		}
		if listed != tr.count {
			return fmt.Errorf("level %d: %d listed, %d counted", l, listed, tr.count)
		}
	}
	return nil
}

// checkJobInvariants verifies the bookkeeping of jobs, gangs, retries and
// locality (jobs.go, locality.go) between inputs:
//
//   - no input is half done: no gang try (a search context still holding
//     its affinity), restart or failure in progress (the job a task joins
//     is an argument of admit, no longer state that could be left set);
//   - a backoff task is pending in no queue, holds no node, its retry
//     timer is its only timer, and it belongs to a job with retries left;
//     a retry timer belongs to a backoff task;
//   - a gang-ready task is pending, in no class queue, listed exactly once
//     in its gang's ready list; a pending gang member that is not in
//     backoff is gang-ready (members never wait in class queues);
//   - per gang: placed counts the members scheduled or running; a gang
//     that has not started holds no placed member (no partial hold); a
//     started gang has, with the members that succeeded since, at least
//     MinMember; failed counts the members that ended without success;
//     the ready list holds only gang-ready members; waiting says whether
//     the gang is in gangs.wait (once), and a gang with ready members
//     waits;
//   - locality: a task with a locality class is in it or in its own
//     class; one pending in its locality class has not spent the
//     preference and has a live deadline in the locality heap; one pending
//     in its own class has spent it; the locality heap is ordered.
func checkJobInvariants(c *Core) error {
	if c.jr.open != 0 || len(c.jr.entries) != 0 || len(c.jr.places) != 0 || len(c.jr.queues) != 0 {
		return fmt.Errorf("journal left open after an input: %d checkpoints, %d entries", c.jr.open, len(c.jr.entries))
	}
	if c.pl.sc.aff != nil {
		return fmt.Errorf("gang affinity left set after an input")
	}
	inWait := map[*gang]int{}
	for _, g := range c.gs.wait {
		inWait[g]++
		if inWait[g] > 1 {
			return fmt.Errorf("gang of job %s listed twice in gangs.wait", g.job.id)
		}
	}
	locLive := map[*Task]bool{}
	for i, e := range c.loc.heap.h {
		if i > 0 && e.at < c.loc.heap.h[(i-1)/2].at {
			return fmt.Errorf("locality heap order broken at %d", i)
		}
		if e.t.attempt == e.attempt {
			locLive[e.t] = true
		}
	}
	for _, t := range c.tasks {
		if t.tkind == timerRetry && !t.backoff {
			return fmt.Errorf("task %s (%s) holds a retry timer but is not in backoff", t.id, t.state)
		}
		if t.backoff {
			switch {
			case t.state != Pending:
				return fmt.Errorf("task %s in backoff but %s", t.id, t.state)
			case t.gready || t.cq != nil || t.node != nil:
				return fmt.Errorf("task %s in backoff but queued (gang %v, class %v) or placed (%v)", t.id, t.gready, t.cq != nil, t.node != nil)
			case t.tkind != timerRetry:
				return fmt.Errorf("task %s in backoff without its retry timer", t.id)
			case t.job == nil:
				return fmt.Errorf("task %s in backoff without a job", t.id)
			}
		}
		if t.job != nil && t.failures > t.job.retryLimit {
			return fmt.Errorf("task %s used %d retries, limit %d", t.id, t.failures, t.job.retryLimit)
		}
		if t.gready {
			if t.state != Pending || t.gang == nil || t.cq != nil || t.backoff {
				return fmt.Errorf("gang-ready task %s: state %s, gang %v, queued %v, backoff %v", t.id, t.state, t.gang != nil, t.cq != nil, t.backoff)
			}
		}
		if t.gang != nil {
			if t.job == nil || t.job.gang != t.gang {
				return fmt.Errorf("gang member %s not in its gang's job", t.id)
			}
			if t.state == Pending && !t.backoff && !t.gready {
				return fmt.Errorf("pending gang member %s is neither gang-ready nor in backoff", t.id)
			}
		}
		if t.locCls != nil {
			if t.baseCls == nil || (t.cls != t.locCls && t.cls != t.baseCls) {
				return fmt.Errorf("task %s with locality is in a third class", t.id)
			}
			if t.state == Pending && !t.backoff {
				if t.cls == t.locCls && (t.locDone || !locLive[t]) {
					return fmt.Errorf("task %s pending in its locality class, preference spent %v, live deadline %v", t.id, t.locDone, locLive[t])
				}
				if t.cls == t.baseCls && !t.locDone {
					return fmt.Errorf("task %s pending in its own class with the locality preference unspent", t.id)
				}
			}
		}
	}
	return checkGangs(c, inWait)
}

// checkGangs: the per-job and per-gang bookkeeping (see
// checkJobInvariants); inWait counts each gang's entries in gangs.wait.
func checkGangs(c *Core, inWait map[*gang]int) error {
	for _, j := range c.jb.jobs {
		for _, t := range j.tasks {
			if t.job != j {
				return fmt.Errorf("job %s lists task %s of another job", j.id, t.id)
			}
		}
		g := j.gang
		if g == nil {
			continue
		}
		if g.job != j {
			return fmt.Errorf("gang of job %s points to another job", j.id)
		}
		if g.restart || g.failing {
			return fmt.Errorf("gang of job %s left restarting (%v) or failing (%v) after an input", j.id, g.restart, g.failing)
		}
		placed, ready, failed, succeeded := 0, 0, 0, 0
		for _, m := range g.members {
			if m.gang != g {
				return fmt.Errorf("gang of job %s lists %s, a member of another gang", j.id, m.id)
			}
			if g.want[m.id] {
				return fmt.Errorf("gang of job %s still wants submitted member %s", j.id, m.id)
			}
			switch {
			case m.state == Scheduled || m.state == Running:
				placed++
			case m.state == Succeeded:
				succeeded++
			case m.state.Terminal():
				failed++
			}
			if m.gready {
				ready++
			}
		}
		if placed != g.placed {
			return fmt.Errorf("gang of job %s: placed %d, members scheduled or running %d", j.id, g.placed, placed)
		}
		if !g.started && g.placed > 0 {
			return fmt.Errorf("gang of job %s has not started but holds %d placed members (partial hold)", j.id, g.placed)
		}
		if g.started && placed+succeeded < g.min && !g.byMember {
			return fmt.Errorf("gang of job %s started with %d placed and %d succeeded, minMember %d", j.id, placed, succeeded, g.min)
		}
		if failed != g.failed {
			return fmt.Errorf("gang of job %s: failed %d, members ended without success %d", j.id, g.failed, failed)
		}
		if ready != len(g.ready) {
			return fmt.Errorf("gang of job %s: %d members gang-ready, ready list holds %d", j.id, ready, len(g.ready))
		}
		seen := map[*Task]bool{}
		for _, m := range g.ready {
			if m.gang != g || !m.gready || m.state != Pending || seen[m] {
				return fmt.Errorf("gang of job %s: ready list holds %s (%s, gang-ready %v, twice %v)", j.id, m.id, m.state, m.gready, seen[m])
			}
			seen[m] = true
		}
		if err := checkGangDomain(g); err != nil {
			return err
		}
		if g.waiting != (inWait[g] == 1) {
			return fmt.Errorf("gang of job %s: waiting %v, in gangs.wait %v", j.id, g.waiting, inWait[g] == 1)
		}
		if len(g.ready) > 0 && !g.waiting {
			return fmt.Errorf("gang of job %s has ready members but is not waiting", j.id)
		}
	}
	return checkReservationInvariants(c)
}

// checkQueueInvariants: every queue's usage (leaves and root included) is
// the sum of the requests of the placed tasks below it; every share and
// guarantee flag follows its usage; the cluster total is the capacity of the
// schedulable nodes, and the cluster free their free capacity.
func checkQueueInvariants(c *Core) error {
	all := allQueueNodes(c)
	want := map[*queueNode]*resource.Vector{}
	for _, q := range all {
		want[q] = &resource.Vector{}
	}
	for _, t := range c.tasks {
		if t.leaf == nil {
			return fmt.Errorf("task %s has no queue leaf", t.id)
		}
		if t.leaf != t.cls.leaf || !t.leaf.leaf {
			return fmt.Errorf("task %s: queue %s is not its class's leaf", t.id, t.leaf.name)
		}
		if t.state != Scheduled && t.state != Running {
			continue
		}
		o := &t.cls.opts[optIndex(t.chosen)]
		for q := t.leaf; q != nil; q = q.parent {
			for i := range o.req {
				want[q][i] += o.req[i]
			}
		}
	}
	for _, q := range all {
		if *want[q] != q.used {
			return fmt.Errorf("queue %s (leaf %v): usage %s, placed tasks hold %s", q.name, q.leaf, c.dims.Format(&q.used), c.dims.Format(want[q]))
		}
	}
	var total, free resource.Vector
	for _, n := range c.idx.order {
		if n.bucket >= 0 {
			total.Add(&n.capacity)
			for i := range n.capacity {
				free[i] += max(0, n.capacity[i]-n.alloc[i])
			}
		}
	}
	if total != c.idx.total {
		return fmt.Errorf("cluster total %s, schedulable nodes hold %s", c.dims.Format(&c.idx.total), c.dims.Format(&total))
	}
	if free != c.idx.free {
		return fmt.Errorf("cluster free %s, schedulable nodes have %s free", c.dims.Format(&c.idx.free), c.dims.Format(&free))
	}
	if !c.qs.dirty && !c.idx.totalChanged {
		for _, q := range all {
			if q.parent == nil {
				continue
			}
			if sh, under := c.qs.shareOf(q); sh != q.share || under != q.under {
				return fmt.Errorf("queue %s (leaf %v): share %v under %v, usage says %v %v", q.name, q.leaf, q.share, q.under, sh, under)
			}
		}
	}
	return nil
}

// checkLanes: each band's lanes hold exactly the active class queues, in
// heap order, and a lane is linked into its parent's exactly when it is not
// empty.
func checkLanes(c *Core) error {
	for _, q := range allQueueNodes(c) {
		for l := range q.ln {
			ln := &q.ln[l]
			if ln.node != q || int(ln.band) != l {
				return fmt.Errorf("queue %s band %d: lane points at %s band %d", q.name, l, ln.node.name, ln.band)
			}
			if q.leaf && len(ln.kids) > 0 || !q.leaf && len(ln.cqs) > 0 {
				return fmt.Errorf("queue %s (leaf %v) band %d: %d kids, %d class queues", q.name, q.leaf, l, len(ln.kids), len(ln.cqs))
			}
			for i, cq := range ln.cqs {
				if int(cq.hpos) != i || cq.blocked || cq.deferred || cq.size() == 0 || cq.band != l || cq.cls.leaf != q {
					return fmt.Errorf("queue %s band %d lane entry %d inconsistent (hpos %d blocked %v size %d)", q.name, l, i, cq.hpos, cq.blocked, cq.size())
				}
				if i > 0 && qLess(cq, ln.cqs[(i-1)/2]) {
					return fmt.Errorf("queue %s band %d: class order broken at %d", q.name, l, i)
				}
			}
			for i, k := range ln.kids {
				if int(k.pos) != i || k.node.parent != q || int(k.band) != l {
					return fmt.Errorf("queue %s band %d kid %d inconsistent (pos %d)", q.name, l, i, k.pos)
				}
				if i > 0 && !c.qs.dirty && !c.idx.totalChanged && (byFair{}).less(k, ln.kids[(i-1)/2]) {
					return fmt.Errorf("queue %s band %d: fair order broken at %d", q.name, l, i)
				}
			}
			empty := len(ln.cqs) == 0 && len(ln.kids) == 0
			if q.parent != nil && empty != (ln.pos < 0) {
				return fmt.Errorf("queue %s (leaf %v) band %d: empty %v, pos %d", q.name, q.leaf, l, empty, ln.pos)
			}
		}
	}
	return nil
}

// checkGangDomain: the placed members of a gang share one value of its
// required label, and, unless it allows mixed models, the devices they
// hold are all of one model (gangdomain.go).
func checkGangDomain(g *gang) error {
	value, models := "", map[string]string{} // device type -> model
	first := true
	for _, m := range g.members {
		if m.node == nil || m.state != Scheduled && m.state != Running {
			continue
		}
		v, ok := m.node.labels[g.required]
		if g.required != "" && (!ok || !first && v != value) {
			return fmt.Errorf("gang of job %s split across its required %s: member %s on %s (%q, want %q)", g.job.id, g.required, m.id, m.node.name, v, value)
		}
		value, first = v, false
		if g.mixed {
			continue
		}
		for _, ds := range m.devs {
			d := &m.node.devices[ds.dev]
			if was, ok := models[d.Type]; !ok {
				models[d.Type] = d.Model
			} else if d.Model != was {
				return fmt.Errorf("gang of job %s mixes models: member %s holds a %s %s, another member a %s", g.job.id, m.id, d.Type, d.Model, was)
			}
		}
	}
	return nil
}
