package core

import (
	"slices"
	"strings"
	"time"

	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// The checks of the tenant-queue property tests (queues_property_test.go).

func (k *qpCase) check(out *Output) {
	c := k.c
	if len(out.Placements) >= k.cfg.MaxPlacementsPerCall {
		k.fail("one input made %d placements (MaxPlacementsPerCall) with %d tasks in the core: tasks placed and evicted over and over (%d preemptions)",
			len(out.Placements), len(k.ids), len(out.Preemptions))
	}
	for _, p := range out.Placements {
		k.chosen[p.Task] = p.Chosen
	}
	if err := checkInvariants(c); err != nil {
		k.fail("invariant: %v", err)
	}
	k.checkQueues()
	k.checkFairShares()
	k.checkPreemptions(out)
	k.checkPlacements(out)
	k.checkBookkeeping(out)
	for _, p := range out.Placements {
		k.startAt[p.Task] = k.now
	}
}

// options lists a task's requests: its own resources, then its
// alternatives'.
func (k *qpCase) options(id string) []resource.List {
	spec := k.specs[id]
	out := []resource.List{spec.Resources}
	for _, a := range spec.Alternatives {
		out = append(out, a.Resources)
	}
	return out
}

// holds is what a placed task holds: the option its latest Placement chose.
func (k *qpCase) holds(id string) resource.List {
	if ch, ok := k.chosen[id]; ok && ch >= 0 && ch < len(k.specs[id].Alternatives) {
		return k.specs[id].Alternatives[ch].Resources
	}
	return k.specs[id].Resources
}

// checkQueues: usage recomputed from the placed tasks' specs is within
// every max and equals QueueUsage.
func (k *qpCase) checkQueues() {
	used := map[string]resource.List{}
	for _, id := range k.ids {
		t, _ := k.c.Task(id)
		if !isPlaced(t.state) {
			continue
		}
		req := k.holds(id)
		for _, q := range k.chain(k.specs[id]) {
			if used[q] == nil {
				used[q] = resource.List{}
			}
			for _, r := range qpQueueRes {
				used[q][r] += req[r]
			}
		}
	}
	for _, q := range k.queues {
		for _, r := range qpQueueRes {
			if m, ok := q.Max[r]; ok && used[q.Name][r] > m {
				k.fail("queue %s holds %d of %s, over its max %d", q.Name, used[q.Name][r], r, m)
			}
		}
		got, ok := k.c.QueueUsage(q.Name)
		if !ok {
			k.fail("QueueUsage: no queue %s", q.Name)
		}
		for _, r := range qpQueueRes {
			if got[r] != used[q.Name][r] {
				k.fail("QueueUsage(%s) says %d of %s, its placed tasks hold %d", q.Name, got[r], r, used[q.Name][r])
			}
		}
	}
}

// checkFairShares: within each max; children's shares within the parent's.
func (k *qpCase) checkFairShares() {
	fs := k.c.FairShares()
	kids := map[string]resource.List{}
	for _, q := range k.queues {
		share, ok := fs[q.Name]
		if !ok {
			k.fail("FairShares: no entry for queue %s", q.Name)
		}
		for _, r := range qpQueueRes {
			if share[r] < 0 {
				k.fail("FairShares: queue %s gets %d of %s", q.Name, share[r], r)
			}
			if m, ok := q.Max[r]; ok && share[r] > m {
				k.fail("FairShares: queue %s gets %d of %s, over its max %d", q.Name, share[r], r, m)
			}
			if q.Parent != "" {
				if kids[q.Parent] == nil {
					kids[q.Parent] = resource.List{}
				}
				kids[q.Parent][r] += share[r]
			}
		}
	}
	for p, sum := range kids {
		for _, r := range qpQueueRes {
			if sum[r] > fs[p][r] {
				k.fail("FairShares: the children of %s get %d of %s, the parent %d", p, sum[r], r, fs[p][r])
			}
		}
	}
}

func (k *qpCase) checkPreemptions(out *Output) {
	c := k.c
	placedAgain := map[string]bool{}
	for _, p := range out.Placements {
		placedAgain[p.Task] = true
	}
	leftPlace := map[string]bool{}
	for _, tr := range out.Transitions {
		if isPlaced(tr.From) {
			leftPlace[tr.Task] = true
		}
	}
	victims := map[string]bool{}
	for _, p := range out.Preemptions {
		victims[p.Victim] = true
	}
	for _, tr := range out.Transitions {
		if tr.To == Preempted && !victims[tr.Task] {
			k.fail("task %s went %s -> preempted with no Preemption naming it", tr.Task, tr.From)
		}
	}
	for _, p := range out.Preemptions {
		v, ok := c.Task(p.Victim)
		if !ok {
			k.fail("preemption victim %s is unknown (lost)", p.Victim)
		}
		if _, ok := c.Task(p.By); !ok {
			k.fail("preemption of %s by unknown task %s", p.Victim, p.By)
		}
		vs, bs := k.specs[p.Victim], k.specs[p.By]
		if !leftPlace[p.Victim] {
			k.fail("preemption victim %s: no transition from scheduled or running (was it placed?)", p.Victim)
		}
		if !vs.IsPreemptible() {
			k.fail("victim %s is not preemptible (preempted by %s, %s)", p.Victim, p.By, p.Reason)
		}
		// The run the eviction ended began before this input, or (placed
		// by this input) now.
		start := k.now
		if isPlaced(k.prev[p.Victim]) {
			start = k.startAt[p.Victim]
		}
		if ran := k.now.Sub(start); ran < k.cfg.PreemptMinRuntime {
			k.fail("victim %s (preempted by %s, %s) ran %s, less than PreemptMinRuntime", p.Victim, p.By, p.Reason, ran)
		}
		switch p.Reason {
		case PreemptPriority:
			if *bs.Priority > 1 || *vs.Priority <= *bs.Priority {
				k.fail("victim %s (priority %d) preempted for priority by %s (priority %d)", p.Victim, *vs.Priority, p.By, *bs.Priority)
			}
		case PreemptReclaim:
			if !k.guaranteed(bs) {
				k.fail("victim %s reclaimed by %s, whose queue %q has no guarantee", p.Victim, p.By, bs.Queue)
			}
		case PreemptGang:
			if !k.gangOf[p.Victim] {
				k.fail("victim %s preempted as a gang member, but it is in no gang", p.Victim)
			}
		default:
			k.fail("victim %s: unknown reason %q", p.Victim, p.Reason)
		}
		switch st := v.state; {
		case st == Pending:
		case isPlaced(st):
			if !placedAgain[p.Victim] {
				k.fail("victim %s is %s with no placement in this input", p.Victim, st)
			}
		case st.Terminal():
			ok := !vs.Requeues()
			for _, id := range k.jobIDs[k.jobOf[p.Victim]] {
				x, _ := c.Task(id)
				ok = ok || victims[id] && !k.specs[id].Requeues() && x.state.Terminal()
			}
			if !ok {
				k.fail("victim %s (preempted by %s) ended %s (%q) though it may be re-queued", p.Victim, p.By, st, v.reason)
			}
		default:
			k.fail("victim %s is %s", p.Victim, st)
		}
	}
}

func (k *qpCase) checkPlacements(out *Output) {
	c := k.c
	last := map[string]string{}
	for _, p := range out.Placements {
		last[p.Task] = p.Node
	}
	leftSched := map[string]bool{}
	for _, tr := range out.Transitions {
		if tr.From == Scheduled {
			leftSched[tr.Task] = true
		}
	}
	for id, node := range last {
		t, ok := c.Task(id)
		if !ok {
			k.fail("placement of unknown task %s", id)
		}
		if t.state != Scheduled {
			if !leftSched[id] {
				k.fail("placed task %s is %s, and no transition of this input moved it", id, t.state)
			}
			continue
		}
		if t.node == nil || t.node.name != node {
			k.fail("task %s placed on %s but is on %v", id, node, t.node)
		}
		if n, ok := c.Node(node); !ok || n.state != api.NodeReady {
			k.fail("task %s placed on %s, which is not a ready node", id, node)
		}
	}
}

func (k *qpCase) checkBookkeeping(out *Output) {
	c := k.c
	if c.NumTasks() != len(k.ids) || c.Stats().Submitted != uint64(len(k.ids)) {
		k.fail("%d tasks submitted, core holds %d, Stats.Submitted %d", len(k.ids), c.NumTasks(), c.Stats().Submitted)
	}
	placedTo := map[string]bool{}
	for _, p := range out.Placements {
		placedTo[p.Task] = true
	}
	movedTo := map[string]map[State]bool{}
	for _, tr := range out.Transitions {
		if movedTo[tr.Task] == nil {
			movedTo[tr.Task] = map[State]bool{}
		}
		to := tr.To
		if to == Preempted {
			to = Pending
		}
		movedTo[tr.Task][to] = true
	}
	var pending, backoff, blocked, placed, terminal int
	for _, id := range k.ids {
		t, ok := c.Task(id)
		if !ok {
			k.fail("task %s lost", id)
		}
		st := t.state
		switch {
		case st == Pending:
			pending++
			if t.backoff {
				backoff++
			}
		case st == Blocked:
			blocked++
		case isPlaced(st):
			placed++
		case st.Terminal():
			terminal++
			if was, ok := k.terminal[id]; ok && was != st {
				k.fail("terminal task %s went from %s to %s", id, was, st)
			}
			k.terminal[id] = st
		default:
			k.fail("task %s in state %s", id, st)
		}
		if was, ok := k.prev[id]; ok && was != st {
			switch {
			case st == Scheduled:
				if !placedTo[id] {
					k.fail("task %s went from %s to scheduled without a placement", id, was)
				}
			case !movedTo[id][st]:
				k.fail("task %s went from %s to %s without a transition saying so", id, was, st)
			}
		}
		k.prev[id] = st
	}
	if pending+blocked+placed+terminal != len(k.ids) {
		k.fail("states: %d pending + %d blocked + %d placed + %d terminal != %d submitted", pending, blocked, placed, terminal, len(k.ids))
	}
	p := c.Pending()
	if sum := p[0] + p[1] + p[2] + p[3]; sum+backoff != pending {
		k.fail("Pending() counts %d, plus %d in backoff, but %d tasks are pending", sum, backoff, pending)
	}
	onNodes := 0
	for _, n := range c.Nodes() {
		onNodes += n.TaskCount()
	}
	if onNodes != placed {
		k.fail("%d tasks placed, nodes hold %d", placed, onNodes)
	}
}

func (k *qpCase) liveness() {
	k.hist = append(k.hist, "--- liveness: every node back and ready, nothing finishes, Tick at NextWakeup")
	for _, n := range k.nodes {
		if !n.present {
			k.input("UpsertNode "+n.name+" (back)", func() error {
				n.present = true
				return k.c.UpsertNode(k.now, n.spec())
			})
		}
		if cur, _ := k.c.Node(n.name); cur.state != api.NodeReady {
			k.input("SetNodeState "+n.name+" ready", func() error { return k.c.SetNodeState(k.now, n.name, api.NodeReady) })
		}
	}
	// Some maxes go up: only SetQueue itself can let in the tasks they
	// refused.
	for _, old := range slices.Clone(k.queues) {
		if len(old.Max) == 0 || rapid.IntRange(0, 3).Draw(k.t, "liveRaise") == 0 {
			continue
		}
		q := *old
		q.Max = resource.List{}
		for r, v := range old.Max {
			q.Max[r] = v + int64(rapid.IntRange(1, 3).Draw(k.t, "liveRaiseBy"))*1000
		}
		k.replaceQueue(&q)
	}
	k.settle(time.Minute, false)
	k.hist = append(k.hist, "--- quiescence: another minute of Ticks must neither place nor evict")
	k.settle(time.Minute, true)
	k.checkNothingFitsLeft()
}

// settle ticks at NextWakeup for d; with quiet, a Tick that places or
// evicts fails: nothing finished, no input came, every timer of the case
// (retry backoff, PreemptMinRuntime, PreemptRetry, batch windows, aging)
// is due within seconds, so work still moving after a minute is a
// livelock (tasks evicting each other in turn).
func (k *qpCase) settle(d time.Duration, quiet bool) {
	end := k.now.Add(d)
	for i := 0; i < 1000; i++ {
		next, ok := k.c.NextWakeup()
		if !ok || next.After(end) {
			break
		}
		if next.After(k.now) {
			k.now = next
		}
		k.input("Tick (NextWakeup)", func() error {
			k.c.Tick(k.now)
			if out := k.c.out; quiet && (len(out.Placements) > 0 || len(out.Preemptions) > 0) {
				var parts []string
				for _, p := range out.Preemptions {
					parts = append(parts, p.By+" evicts "+p.Victim+" ("+string(p.Reason)+")")
				}
				k.fail("still placing (%d) and evicting after a minute without inputs: %s", len(out.Placements), strings.Join(parts, ", "))
			}
			return nil
		})
	}
	k.now = end
}

// checkNothingFitsLeft: no pending task (outside gangs and backoff) fits a
// ready node's free cpu and GPUs under every max above it.
func (k *qpCase) checkNothingFitsLeft() {
	c := k.c
	freeCPU := map[string]int64{}
	freeGPU := map[string]int64{}
	used := map[string]resource.List{}
	for _, n := range k.nodes {
		freeCPU[n.name], freeGPU[n.name] = n.cpu, int64(n.gpus)*1000
	}
	for _, id := range k.ids {
		t, _ := c.Task(id)
		if !isPlaced(t.state) {
			continue
		}
		req := k.holds(id)
		freeCPU[t.node.name] -= req[resource.CPU]
		freeGPU[t.node.name] -= req[gpuRes]
		for _, q := range k.chain(k.specs[id]) {
			if used[q] == nil {
				used[q] = resource.List{}
			}
			for _, r := range qpQueueRes {
				used[q][r] += req[r]
			}
		}
	}
	for _, id := range k.ids {
		t, _ := c.Task(id)
		if t.state != Pending || t.backoff || k.gangOf[id] {
			continue
		}
		for oi, req := range k.options(id) {
			underMax := true
			for _, q := range k.chain(k.specs[id]) {
				for _, r := range qpQueueRes {
					if m, ok := k.qmap[q].Max[r]; ok && used[q][r]+req[r] > m {
						underMax = false
					}
				}
			}
			if !underMax {
				continue
			}
			for _, n := range k.nodes {
				if cn, _ := c.Node(n.name); cn != nil && cn.hold != nil && cn.hold.r.g != t.gang && t.prio >= cn.hold.r.prio {
					continue // held for a gang's reservation (gangreserve.go; TestGangReservationBound)
				}
				if freeCPU[n.name] >= req[resource.CPU] && freeGPU[n.name] >= req[gpuRes] {
					k.fail("task %s stays pending (%q) though its option %d fits node %s now (free cpu %dm, GPUs %d) under every max",
						id, t.Reason(), oi-1, n.name, freeCPU[n.name], freeGPU[n.name]/1000)
				}
			}
		}
	}
}
