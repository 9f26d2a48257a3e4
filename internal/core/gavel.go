package core

import (
	"cmp"
	"slices"

	"github.com/hetsched/hetsched/internal/api"
)

// gavel-rounds: heterogeneity-aware rounds (Gavel, OSDI'20).
//
// Every Config.GavelRound (6 minutes by default) the round:
//
//  1. takes the device tasks that run or wait (gang members and tasks in
//     a retry backoff aside), the GPU models of the schedulable nodes and
//     their device counts. The program holds at most gavelMaxJobs tasks:
//     the waiting ones in queue order take up to half of it when the
//     running ones would fill it, the running ones the rest. A running
//     task left out holds its devices (the models' capacity for the
//     program is what it leaves); a waiting one left out (overflow) is
//     placed as by any policy until the next round, so no device idles
//     while a task that fits it waits (before, once 256 tasks ran, no
//     waiting task was ever considered, and the gate held them all);
//  2. computes each task's share of each model X[j][m] from its expected
//     throughput there (1 / its expected run time on the model: declared
//     profiles, core.ObserveRuntime, or learned from finished attempts),
//     normalised by what an even mix of the fleet would give it, by a
//     linear program: Gavel's heterogeneity-aware max-min fairness
//     (maximise the smallest normalised throughput, then a little of the
//     total), or with Config.GavelObjective "throughput" the total
//     normalised throughput (Gavel's max-sum-throughput, for short JCTs),
//     or "agnostic" max-min fairness with every model taken as equally
//     fast (Gavel's heterogeneity-agnostic baseline, LAS);
//  3. ranks each (task, model) by X[j][m] over the share of the model's
//     time the task received since the allocation last changed (Gavel's
//     round-based mechanism: the counts restart, each task and model
//     seeded with half a round, whenever the set of tasks changes; a task
//     seen since starts from the seed too), the pairs with no share
//     after, so that no device idles while a task could use it;
//  4. assigns models greedily, model by model (as Gavel lists each
//     worker type's entries in turn: the fastest model first, by the
//     candidates' summed normalised throughput; the agnostic baseline,
//     which takes all models for equally fast, rotates the order each
//     round, where Gavel shuffles it), within each model by that rank,
//     urgent and high work first (and never swapped out);
//  5. swaps out running tasks assigned no model or another model than the
//     one they run on ("swapped out by the gavel round"; they resume from
//     their checkpoint), then places the assigned waiting tasks on nodes
//     of their model. A running task without a checkpoint (Task.checkpoint)
//     is never swapped out: it would start over, and a long one would
//     never end (on Philly jobs without resuming, GPU use fell to 3 %);
//     it keeps its devices, as a non-preemptible one does.
//
// Between rounds no device task the last round considered or that arrived
// since is placed (the plugin's Filter): work waits for the next round, as
// in Gavel; urgent and high tasks wait too. The overflow of step 1 does
// not.
// Tasks without devices in their own request, tasks with alternatives
// and gang members are placed as by any policy. The round is the
// core's own work on time passed in (Tick), so the server and the
// simulator run it alike; its cost is one walk over the nodes and the
// active tasks and one linear program per round, never per placement.

// GavelWaitReason is what a task that waits for gavel-rounds' next round
// is told.
const GavelWaitReason = "waits for the next gavel round"

// SwappedOutPrefix starts the reason of a task a round swapped out (it
// has no preemptor to name).
const SwappedOutPrefix = "swapped out by "

// gavelMaxJobs bounds the tasks one round's program considers.
const gavelMaxJobs = 256

// gavelMaxModels bounds the device models a round tells apart.
const gavelMaxModels = 16

// gavelJob is what the rounds remember of a task: how long it ran on
// each model since the allocation last changed (seeded with half a
// round per model).
type gavelJob struct {
	recv map[string]int64
}

// GavelRounds is gavel-rounds' round plugin and gate.
type GavelRounds struct {
	c    *Core
	next int64 // the next round's time
	// placing is set while a round places: its gate is open.
	placing bool
	jobs    map[*Task]*gavelJob
	last    int64 // the previous round's time (0: none yet)
	// worker is, per model, the time the tasks received on it since the
	// allocation last changed (the seeds of the tasks there then
	// included); rounds counts the agnostic baseline's rounds (its order).
	worker map[string]int64
	rounds int
	// overflow is the waiting tasks the last round left out of its
	// program (step 1): placed as by any policy until the next round.
	overflow     map[*Task]bool
	overflowList []*Task // the same, in the order they were left out
}

// Name implements Plugin.
func (*GavelRounds) Name() string { return "GavelRounds" }

// manages reports whether the rounds place t: no gang member, no
// alternatives (the rounds choose among device models, not options), and
// its own
// request asks for devices of a kind the last round saw as device
// objects on some node (GPUs; not a countable resource without device
// ids). Others are placed as by any policy.
func (g *GavelRounds) manages(t *Task) bool {
	if t.gang != nil || len(t.cls.opts) != 1 {
		return false // gangs and tasks with alternatives: placed as usual
	}
	devs := t.cls.opts[0].devs
	for _, d := range devs {
		if !g.c.deviceDims[d.dim] || d.dim != devs[0].dim {
			return false // one kind of device, with device objects
		}
	}
	return len(devs) > 0
}

// Gate implements RoundPolicy: outside a round, a task the rounds manage
// waits, but for the last round's overflow.
func (g *GavelRounds) Gate(t *Task) bool { return !g.placing && g.manages(t) && !g.overflow[t] }

// Next implements RoundPolicy: a round is due every Config.GavelRound
// while tasks wait or run.
func (g *GavelRounds) Next(now int64) (int64, bool) {
	if !g.busy() {
		return 0, false
	}
	return max(g.next, now), true
}

// busy reports whether a round has work: tasks wait or run.
func (g *GavelRounds) busy() bool {
	c := g.c
	if c.placedN > 0 {
		return true
	}
	for i := range c.lv.tiers {
		if c.lv.tiers[i].count > 0 {
			return true
		}
	}
	return false
}

// Filter implements FilterPlugin: outside a round, no task the rounds
// manage fits.
func (g *GavelRounds) Filter(_ *CycleState, t *Task, _ *Option, _ *Node) *Status {
	if !g.Gate(t) {
		return nil
	}
	return NewUnschedulable(GavelWaitReason + " (every " + g.c.cfg.GavelRound.String() + ")")
}

// gavelModel is one device model of the fleet in a round.
type gavelModel struct {
	name  string
	dim   int
	total int64   // devices, whole
	held  int64   // devices of running tasks left out of the program
	free  int64   // devices left to assign this round
	nodes []*Node // schedulable nodes with devices of the model
}

// gavelCand is one task of a round.
type gavelCand struct {
	t      *Task
	o      *Option
	scale  int64     // devices it holds or asks for
	rate   []float64 // normalised throughput per model (0: cannot use it)
	x      []float64 // its share of each model
	model  int       // the model it runs on (-1: waiting)
	assign int       // the model the round gives it (-1: none)
	pinned bool      // running and not preemptible, or with no checkpoint: keeps its place
}

// Round implements RoundPolicy: it runs one round at now (the core's
// time) and sets the next one Config.GavelRound later.
func (g *GavelRounds) Round(now int64) {
	c := g.c
	g.next = now + int64(c.cfg.GavelRound)
	models, byName := g.models()
	cands := g.candidates(models, byName)
	g.account(cands, models)
	if len(cands) > 0 && len(models) > 0 {
		g.allocate(cands, models)
		choices := g.assign(cands, models)
		g.execute(cands, models, choices)
	}
	// The overflow waited behind the gate: its queues try again now (in
	// the order the round left them out, the list, not the map: the core
	// stays deterministic).
	for _, t := range g.overflowList {
		if q := t.cq; q != nil && q.blocked {
			c.wk.unblock(q)
		}
	}
	g.last = c.now
}

// models lists the device models of the schedulable nodes.
func (g *GavelRounds) models() ([]*gavelModel, map[string]int) {
	var models []*gavelModel
	byName := map[string]int{}
	for _, n := range g.c.idx.order {
		if n.state != api.NodeReady || n.group == nil {
			continue
		}
		for i := range n.devices {
			d := &n.devices[i]
			if !d.Healthy {
				continue
			}
			k := d.Model
			mi, ok := byName[k]
			if !ok {
				if len(models) == gavelMaxModels {
					continue
				}
				mi = len(models)
				byName[k] = mi
				models = append(models, &gavelModel{name: k, dim: d.dim})
			}
			m := models[mi]
			m.total++
			if len(m.nodes) == 0 || m.nodes[len(m.nodes)-1] != n {
				m.nodes = append(m.nodes, n)
			}
		}
	}
	return models, byName
}

// candidates collects the round's program: running device tasks and
// waiting ones in queue order, at most gavelMaxJobs (step 1 of the
// package comment); it sets the models' held devices and g.overflow.
func (g *GavelRounds) candidates(models []*gavelModel, byName map[string]int) []*gavelCand {
	c := g.c
	var out []*gavelCand
	add := func(t *Task, model int) *gavelCand {
		if !g.manages(t) {
			return nil
		}
		o := &t.cls.opts[0]
		if t.node != nil {
			o = &t.cls.opts[optIndex(t.chosen)]
		}
		if len(o.devs) == 0 {
			return nil
		}
		var milli int64
		for _, d := range o.devs {
			milli += d.milli
		}
		k := &gavelCand{t: t, o: o, scale: max(1, (milli+999)/1000), model: model, assign: -1,
			pinned: model >= 0 && (!t.preemptible || !t.resumable || t.prio <= api.PriorityHigh)}
		if model < 0 && t.node != nil {
			k.pinned = true // runs on a model the round does not know
		}
		k.rate, k.x = make([]float64, len(models)), make([]float64, len(models))
		c.pl.refreshGroups(t, o)
		var even, sum float64
		for mi, m := range models {
			if !g.usable(o, m) {
				continue
			}
			if rt := c.lr.expectedOnModel(t, o, m.name); rt > 0 {
				k.rate[mi] = 1 / rt
				if c.cfg.GavelObjective == "agnostic" {
					k.rate[mi] = 1 // every model as fast as any
				}
				even += k.rate[mi] * float64(m.total)
			}
			sum += float64(m.total)
		}
		if even <= 0 {
			if model >= 0 || t.node != nil {
				k.pinned = true
				return k
			}
			return nil
		}
		even /= sum
		for mi := range k.rate {
			k.rate[mi] /= even
		}
		return k
	}
	var running, waiting []*gavelCand
	for _, n := range c.idx.order {
		for _, t := range n.tasks {
			if t.state != Scheduled && t.state != Running {
				continue
			}
			model := -1
			if len(t.devs) > 0 {
				if mi, ok := byName[n.devices[t.devs[0].dev].Model]; ok {
					model = mi
				}
			}
			if k := add(t, model); k != nil {
				running = append(running, k)
			}
		}
	}
	clear(g.overflow)
	clear(g.overflowList)
	g.overflowList = g.overflowList[:0]
	for l := range c.lv.tiers {
		for li := range c.lv.tiers[l].aging {
			for t := c.lv.tiers[l].aging[li].head; t != nil; t = t.lnext {
				if t.state != Pending || t.backoff || t.gready || t.cq == nil {
					continue
				}
				if len(waiting) < gavelMaxJobs {
					if k := add(t, -1); k != nil {
						waiting = append(waiting, k)
					}
				} else if g.manages(t) {
					g.overflowed(t)
				}
			}
		}
	}
	keepRun := min(len(running), gavelMaxJobs-min(len(waiting), gavelMaxJobs/2))
	for _, k := range running[keepRun:] {
		if k.model >= 0 {
			models[k.model].held += k.scale
		}
	}
	keepWait := min(len(waiting), gavelMaxJobs-keepRun)
	for _, k := range waiting[keepWait:] {
		g.overflowed(k.t)
	}
	out = append(append(out, running[:keepRun]...), waiting[:keepWait]...)
	return out
}

// overflowed marks t as left out of the round's program.
func (g *GavelRounds) overflowed(t *Task) {
	if g.overflow == nil {
		g.overflow = map[*Task]bool{}
	}
	g.overflow[t] = true
	g.overflowList = append(g.overflowList, t)
}

// usable reports whether o may run on some node of model m (its static
// filters pass that node's group).
func (g *GavelRounds) usable(o *Option, m *gavelModel) bool {
	for _, d := range o.devs {
		if d.dim != m.dim {
			return false
		}
	}
	for _, n := range m.nodes {
		if n.group != nil && n.group.id < len(o.groupSet) && o.groupSet[n.group.id] {
			return true
		}
	}
	return false
}

// account adds the time since the last round to what each running task
// received on its model, and forgets the tasks that left. When the set of
// tasks changed (the allocation changes with it), every count restarts
// from the seed, half a round per task and model, as Gavel's
// _reset_time_run_so_far does; a task new since the last restart starts
// from the seed without adding it to the models' totals.
func (g *GavelRounds) account(cands []*gavelCand, models []*gavelModel) {
	c := g.c
	half := int64(c.cfg.GavelRound) / 2
	if g.worker == nil {
		g.worker = map[string]int64{}
	}
	jobs := make(map[*Task]*gavelJob, len(cands))
	changed := false
	for _, k := range cands {
		j := g.jobs[k.t]
		if j == nil {
			changed = true
			j = &gavelJob{recv: make(map[string]int64, len(models))}
			for _, m := range models {
				j.recv[m.name] = half
			}
		}
		if k.model >= 0 && g.last > 0 {
			d := c.now - max(g.last, k.t.started)
			j.recv[models[k.model].name] += d
			g.worker[models[k.model].name] += d
		}
		jobs[k.t] = j
	}
	changed = changed || len(jobs) != len(g.jobs)
	g.jobs = jobs
	if !changed {
		return
	}
	clear(g.worker)
	for _, j := range jobs {
		clear(j.recv)
		for _, m := range models {
			j.recv[m.name] = half
			g.worker[m.name] += half
		}
	}
}

// allocate computes each candidate's share of each model (the linear
// program of the package comment); pinned tasks hold their devices.
func (g *GavelRounds) allocate(cands []*gavelCand, models []*gavelModel) {
	capLeft := make([]float64, len(models))
	for mi, m := range models {
		capLeft[mi] = float64(m.total - m.held)
	}
	var free []*gavelCand
	for _, k := range cands {
		if k.pinned {
			if k.model >= 0 {
				capLeft[k.model] -= float64(k.scale)
			}
			continue
		}
		free = append(free, k)
	}
	if len(free) == 0 {
		return
	}
	// Variables: x[k][m] for the usable pairs, then t (max-min only).
	type pair struct{ k, m int }
	var pairs []pair
	for ki, k := range free {
		for mi := range models {
			if k.rate[mi] > 0 {
				pairs = append(pairs, pair{ki, mi})
			}
		}
	}
	fair := g.c.cfg.GavelObjective != "throughput"
	nv := len(pairs)
	if fair {
		nv++
	}
	p := &lpProblem{c: make([]float64, nv)}
	eps := 3 / float64(len(free))
	for v, pr := range pairs {
		if fair {
			p.c[v] = eps * free[pr.k].rate[pr.m]
		} else {
			p.c[v] = free[pr.k].rate[pr.m]
		}
	}
	if fair {
		p.c[nv-1] = 1
	}
	// Each task's shares add to at most 1.
	byTask := make([][]int, len(free))
	for v, pr := range pairs {
		byTask[pr.k] = append(byTask[pr.k], v)
	}
	for ki := range free {
		r := make([]float64, nv)
		for _, v := range byTask[ki] {
			r[v] = 1
		}
		p.a, p.b = append(p.a, r), append(p.b, 1)
	}
	// Each model's devices.
	for mi := range models {
		r := make([]float64, nv)
		for v, pr := range pairs {
			if pr.m == mi {
				r[v] = float64(free[pr.k].scale)
			}
		}
		p.a, p.b = append(p.a, r), append(p.b, max(capLeft[mi], 0))
	}
	// Max-min: t ≤ each task's normalised throughput.
	if fair {
		for ki := range free {
			r := make([]float64, nv)
			r[nv-1] = 1
			for _, v := range byTask[ki] {
				r[v] = -free[ki].rate[pairs[v].m]
			}
			p.a, p.b = append(p.a, r), append(p.b, 0)
		}
	}
	x, _ := solveLP(p, 20*(len(p.b)+nv))
	for v, pr := range pairs {
		free[pr.k].x[pr.m] = x[v]
	}
}

// assign gives models to the candidates by Gavel's priorities.
func (g *GavelRounds) assign(cands []*gavelCand, models []*gavelModel) []gavelChoice {
	for _, m := range models {
		m.free = m.total - m.held
	}
	var choices []gavelChoice
	for _, k := range cands {
		if k.pinned {
			if k.model >= 0 {
				k.assign = k.model
				models[k.model].free -= k.scale
			}
			continue
		}
		j := g.jobs[k.t]
		for mi, m := range models {
			if k.rate[mi] <= 0 {
				continue
			}
			pr := 0.0
			if k.x[mi] > 1e-6 {
				// The share it should have over the share of the model's
				// time it had (Gavel's 1e9 where it had none).
				if f, w := float64(j.recv[m.name]), float64(g.worker[m.name]); f > 0 && w > 0 {
					pr = k.x[mi] / (f / w)
				} else {
					pr = k.x[mi] * 1e9
				}
			}
			choices = append(choices, gavelChoice{k, mi, pr})
		}
	}
	rank := g.modelOrder(cands, models)
	slices.SortStableFunc(choices, func(a, b gavelChoice) int {
		switch {
		case a.k.t.prio != b.k.t.prio:
			return int(a.k.t.prio) - int(b.k.t.prio) // tiers first
		case rank[a.m] != rank[b.m]:
			return rank[a.m] - rank[b.m] // model by model
		case a.priority != b.priority:
			if a.priority > b.priority {
				return -1
			}
			return 1
		case a.k.rate[a.m] != b.k.rate[b.m]:
			if a.k.rate[a.m] > b.k.rate[b.m] {
				return -1
			}
			return 1
		case (a.k.model == a.m) != (b.k.model == b.m):
			// Keep what runs where it runs, all else equal.
			if a.k.model == a.m {
				return -1
			}
			return 1
		}
		if a.k.t.seq < b.k.t.seq {
			return -1
		}
		return 1
	})
	for _, ch := range choices {
		k, m := ch.k, models[ch.m]
		if k.assign >= 0 || m.free < k.scale {
			continue
		}
		k.assign = ch.m
		m.free -= k.scale
	}
	return choices
}

// modelOrder ranks the models for assign: the fastest first, by the
// candidates' summed normalised throughput on each (ties: the model seen
// first); the agnostic baseline takes every model for equally fast and
// rotates the order each round instead (Gavel shuffles it).
func (g *GavelRounds) modelOrder(cands []*gavelCand, models []*gavelModel) []int {
	order := make([]int, len(models))
	for i := range order {
		order[i] = i
	}
	if g.c.cfg.GavelObjective == "agnostic" {
		g.rounds++
		for i := range order {
			order[i] = (i + g.rounds) % len(models)
		}
	} else {
		speed := make([]float64, len(models))
		for _, k := range cands {
			for mi := range models {
				speed[mi] += k.rate[mi]
			}
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(speed[b], speed[a]) })
	}
	rank := make([]int, len(models))
	for r, mi := range order {
		rank[mi] = r
	}
	return rank
}

// gavelChoice is one (task, model) pair of a round with its priority.
type gavelChoice struct {
	k        *gavelCand
	m        int
	priority float64
}

// execute swaps out what the round moves and places what it assigned;
// then, so that no device idles while a task could use it (a model-level
// assignment the nodes could not honour, a task that fits nowhere), it
// offers what is left to the waiting tasks in the order of choices.
func (g *GavelRounds) execute(cands []*gavelCand, models []*gavelModel, choices []gavelChoice) {
	c := g.c
	for _, k := range cands {
		if k.pinned || k.model < 0 || k.assign == k.model {
			continue
		}
		why := SwappedOutPrefix + "the gavel round: no share of the devices this round"
		if k.assign >= 0 {
			why = SwappedOutPrefix + "the gavel round: moved to " + models[k.assign].name
		}
		n := k.t.node
		c.stats.Preempted++
		c.out.Preemptions = append(c.out.Preemptions, Preemption{Victim: k.t.id, Node: n.name, Reason: PreemptShare})
		c.requeue(k.t, Preempted, why)
	}
	g.placing = true
	defer func() { g.placing = false }()
	for _, k := range cands {
		if k.assign >= 0 && k.model < 0 {
			g.place(k, models[k.assign])
		}
	}
	for _, ch := range choices {
		g.place(ch.k, models[ch.m]) // the swapped out too: better run than idle
	}
	// A placement may depend on one made after it (a required affinity
	// with a task the loops above placed later): the assigned tasks still
	// waiting are tried once more.
	for _, k := range cands {
		if k.assign >= 0 && k.model < 0 && k.t.state == Pending {
			g.place(k, models[k.assign])
		}
	}
}

// place places waiting candidate k on the first node of model m that
// takes it; it reports whether it did.
func (g *GavelRounds) place(k *gavelCand, m *gavelModel) bool {
	c, t := g.c, k.t
	if t.state != Pending || t.cq == nil {
		return false
	}
	sc := c.pl.beginSearch(true, nil)
	for _, n := range m.nodes {
		if n.group == nil || n.group.id >= len(k.o.groupSet) || !k.o.groupSet[n.group.id] {
			continue // its static filters (selectors, taints) refuse the node
		}
		if c.pl.checkNode(sc, t, k.o, n) == nil {
			c.commit(t, k.o, n, sc.cs.picked)
			return true
		}
	}
	return false
}
