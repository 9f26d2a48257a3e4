package core

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// Jobs: what the core knows of a job beyond its tasks' dependencies.
//
//   - Retries: a job task that fails or times out goes back to pending
//     after a backoff (RetryBackoff, doubling each time) until it has been
//     retried RetryLimit times; its attempt counts each run.
//   - Failure policy: with FailFast, a task that ends failed, timed out or
//     expired (retries spent) cancels every unfinished task of its job;
//     otherwise only its dependents are skipped and independent branches
//     run on.
//   - Gangs: the members are placed all at once or not at all. A gang is
//     tried when enough members are pending and capacity changed since its
//     last failed try; a try places members one by one with a score bonus
//     for nodes sharing the gang's topology labels with the members placed
//     so far, and rolls every placement back (checkpoint, rollback) unless
//     at least MinMember end up placed. Nothing is held between tries. A
//     gang whose try failed may start over evictions, as one
//     (gangpreempt.go). A member that stops without success restarts the
//     gang (the others are re-queued); a gang that has not started within
//     Timeout fails saying what blocked it (topology is a preference:
//     named only as one it could not meet). The waiting members of a gang
//     share one reason, set from gang-level state at the end of each
//     schedule pass; when it changes, the output names every waiting
//     member (gangReport).

// JobSpec is what the core needs of a job; its tasks are submitted after
// it with SubmitJobTask.
type JobSpec struct {
	ID           string
	FailFast     bool
	RetryLimit   int
	RetryBackoff time.Duration // the first retry's delay; doubles per retry
	Gang         *GangSpec
}

// GangSpec is a job's gang.
type GangSpec struct {
	Members   []string // task ids
	MinMember int
	Timeout   time.Duration
	Topology  []string // node label keys, best first
	// RequiredTopology is a node label key whose value every member's node
	// must share ("": none); MixedModels lets members take devices of
	// different models (gangdomain.go).
	RequiredTopology string
	MixedModels      bool
	// EvictMembers preempts members one by one (disruption "member"):
	// the others run on, and the gang is not restarted when a member is
	// preempted; otherwise a gang is evicted whole.
	EvictMembers bool
}

type job struct {
	id         string
	failFast   bool
	retryLimit int32
	backoff    int64
	tasks      []*Task
	failed     bool // fail-fast already cancelled the rest
	gang       *gang
	// open counts its tasks not ended, bad whether one ended without
	// success; dependent are the tasks waiting on it (depends.go).
	open      int32
	bad       bool
	dependent []depEdge
}

type gang struct {
	job      *job
	members  []*Task
	want     map[string]bool // member ids not submitted yet
	min      int
	timeout  int64
	topology []string
	required string  // GangSpec.RequiredTopology
	mixed    bool    // GangSpec.MixedModels
	byMember bool    // GangSpec.EvictMembers
	ready    []*Task // pending members (in no class queue)
	placed   int     // members scheduled or running
	started  bool    // reached min since the last (re)start
	since    int64   // when it began waiting
	tried    uint64  // capSeq at the last failed try
	dirty    bool    // a member became ready since the last try
	waiting  bool    // in Core.gangWait
	failed   int     // members that ended without success for good
	done     int     // members that succeeded (they count towards minMember)
	deferred int     // consecutive tries cut short by the search budget
	// reason is the gang's own verdict (its last failed try, or why it
	// restarted), "" for none; it is dropped when the ready list changes.
	reason string
	// shown is what every ready member shows (Task.Reason), set at the end
	// of each schedule pass (gangShow) from gang-level state only; shownWhy
	// and shownN are the reason and placed+done+len(ready) it was made
	// from.
	shown     string
	shownWhy  string
	shownN    int
	shownResv *gangReservation
	told      bool // in Core.gangTold
	restart   bool // restarting: members leaving now do not restart it again
	failing   bool // failing its members: no second verdict per member
	// The last failed try since the gang last started or restarted:
	// lastFit of lastOf pending members could be placed together,
	// lastNeed were needed (lastOf 0: none).
	lastFit, lastOf, lastNeed int
	// tryReason is the verdict string made for tryFit, tryOf, tryNeed (a
	// gang retried with the same outcome reuses it).
	tryReason              string
	tryFit, tryOf, tryNeed int
	// least is, per resource, the least any option of any ready member
	// asked at the last failed try (gangMayFit's bound, valid while the
	// ready list is the one tried: while reason is tryReason).
	least resource.Vector
	// devDims is gangDeviceDims of the ready members at the last failed
	// try (with least).
	devDims []int
	// resv is its reservation (gangreserve.go), nil for none; resvTried
	// the capSeq at its last reservation plan.
	resv      *gangReservation
	resvTried uint64
}

// maxGangTries bounds the gangs tried per schedule call;
// maxGangDeferrals the retries of a gang whose tries ran out of search
// budget without a change of capacity; maxGangPreempts the gangs whose
// start over evictions is planned per schedule call (a plan walks the
// nodes' victims once per member).
const (
	maxGangTries     = 64
	maxGangDeferrals = 3
	maxGangPreempts  = 8
)

// AddJob registers a job before its tasks are submitted (and, after a
// restart, before they are restored).
func (c *Core) AddJob(now time.Time, spec JobSpec) error {
	c.advance(now)
	if spec.ID == "" {
		return errs.Invalid("id", "a job needs an id")
	}
	if c.jobs[spec.ID] != nil {
		return errs.New(errs.AlreadyExists, "id", "job %q already exists", spec.ID)
	}
	if spec.RetryLimit < 0 || spec.RetryBackoff < 0 {
		return errs.Invalid("retries", "limit and backoff must not be negative")
	}
	j := &job{id: spec.ID, failFast: spec.FailFast, retryLimit: int32(spec.RetryLimit), backoff: int64(spec.RetryBackoff)}
	if gs := spec.Gang; gs != nil {
		if gs.MinMember < 1 || gs.MinMember > len(gs.Members) {
			return errs.Invalid("gang.minMember", "must be 1..%d, got %d", len(gs.Members), gs.MinMember)
		}
		g := &gang{job: j, want: make(map[string]bool, len(gs.Members)), min: gs.MinMember,
			timeout: int64(gs.Timeout), topology: gs.Topology, required: gs.RequiredTopology, mixed: gs.MixedModels, byMember: gs.EvictMembers}
		for _, m := range gs.Members {
			g.want[m] = true
		}
		j.gang = g
	}
	c.jobs[spec.ID] = j
	return nil
}

// SubmitJobTask submits a task of a registered job.
func (c *Core) SubmitJobTask(now time.Time, jobID string, spec *api.Task) error {
	j := c.jobs[jobID]
	if j == nil {
		return errs.New(errs.NotFound, "job", "no job %q", jobID)
	}
	return c.submit(now, spec, j)
}

// attachJob links a task being admitted to its job j (nil for none).
func (c *Core) attachJob(t *Task, j *job) {
	if j == nil {
		return
	}
	t.job = j
	j.tasks = append(j.tasks, t)
	j.open++
	if g := j.gang; g != nil && g.want[t.id] {
		delete(g.want, t.id)
		t.gang = g
		g.members = append(g.members, t)
	}
}

func isFailure(s State) bool { return s == Failed || s == Timeout || s == Expired }

// retry takes over a job task's failure while retries remain: the task
// goes back to pending after the backoff. It reports whether it did.
func (c *Core) retry(t *Task, from, to State, reason string) bool {
	j := t.job
	if j == nil || (to != Failed && to != Timeout) || (from != Scheduled && from != Running) ||
		t.noRequeue || t.failures >= j.retryLimit || (t.gang != nil && t.gang.failing) {
		return false
	}
	c.release(t, true)
	c.timers.cancel(t)
	t.failures++
	t.attempt++
	delay := j.backoff
	if delay <= 0 {
		delay = int64(time.Second)
	}
	for i := int32(1); i < t.failures && delay < int64(time.Hour); i++ {
		delay *= 2
	}
	delay = min(delay, int64(time.Hour))
	t.state = Pending
	t.backoff = true
	t.leaf.backoff++
	t.reason = fmt.Sprintf("retry %d/%d in %s: %s", t.failures, j.retryLimit, durString(delay), to)
	if reason != "" {
		t.reason += " (" + reason + ")"
	}
	c.timers.set(t, timerRetry, c.now+delay)
	c.out.Transitions = append(c.out.Transitions, Transition{Task: t.id, From: from, To: Pending, Reason: t.reason, Attempt: int(t.attempt)})
	if t.gang != nil {
		c.gangMemberLeft(t, to, reason)
	}
	return true
}

// jobTaskEnded runs after a job task reached a terminal state.
func (c *Core) jobTaskEnded(t *Task, from State) {
	if g := t.gang; g != nil {
		if t.state == Succeeded {
			g.done++
		} else {
			g.failed++
		}
		if from == Scheduled || from == Running {
			c.gangMemberLeft(t, t.state, t.reason)
		}
		c.gangCheckReachable(g)
	}
	j := t.job
	if !isFailure(t.state) || !j.failFast || j.failed {
		return
	}
	j.failed = true
	why := "job " + j.id + " failed fast: task " + t.id + " " + t.state.String()
	for _, x := range j.tasks {
		if x != t && !x.state.Terminal() {
			c.finish(x, Cancelled, why)
		}
	}
}

// gangMemberLeft accounts for a placed member leaving its placement; one
// that did not succeed restarts the gang: the other placed members go back
// to pending.
func (c *Core) gangMemberLeft(t *Task, to State, reason string) {
	g := t.gang
	g.placed--
	if to == Succeeded || g.restart || g.byMember && to == Preempted {
		return // a member preempted alone (disruption "member") leaves the others running
	}
	why := "gang restart: member " + t.id + " " + to.String()
	if reason != "" {
		why += ": " + reason
	}
	c.gangRestart(g, why)
}

// gangCheckReachable fails the gang's unfinished members once too many
// ended without success for MinMember ever to run (or have run) together.
func (c *Core) gangCheckReachable(g *gang) {
	if g.failing {
		return
	}
	total := len(g.members) + len(g.want)
	if total-g.failed >= g.min {
		return
	}
	why := fmt.Sprintf("gang of job %s can no longer reach minMember %d: %d of its %d members ended without success", g.job.id, g.min, g.failed, total)
	g.failing = true
	for _, m := range append([]*Task(nil), g.members...) {
		if !m.state.Terminal() {
			c.finish(m, Failed, why)
		}
	}
	g.failing = false
}

// gangEnqueue makes a pending member wait for its gang.
func (c *Core) gangEnqueue(t *Task) {
	g := t.gang
	t.gready = true
	g.ready = append(g.ready, t)
	g.dirty = true
	g.reason = "" // a verdict on the ready list before t joined
	if !g.waiting {
		g.waiting = true
		g.since = c.now
		c.gangWait = append(c.gangWait, g)
	}
}

// gangWaitReason is the one reason every ready member of g shows: the
// gang's own verdict, else how many members are there to start it. It
// reads gang-level state only.
func (c *Core) gangWaitReason(g *gang) string {
	if g.reason != "" {
		if g.resv != nil {
			return g.reason + g.resv.describe()
		}
		return g.reason
	}
	return fmt.Sprintf("waiting for its gang: %d of %d members pending, placed or done (minMember %d)", g.placed+g.done+len(g.ready), len(g.members)+len(g.want), g.min)
}

// gangShow sets the reason every ready member of g shows (Task.Reason:
// one for all of them, so that they say the same at the same moment),
// when its inputs changed.
func (c *Core) gangShow(g *gang) {
	n := g.placed + g.done + len(g.ready)
	if g.shown != "" && n == g.shownN && g.reason == g.shownWhy && g.resv == g.shownResv {
		return
	}
	r := c.gangWaitReason(g)
	if r != g.shown && !g.told {
		g.told = true
		c.gangTold = append(c.gangTold, g)
	}
	g.shown, g.shownWhy, g.shownN, g.shownResv = r, g.reason, n, g.resv
}

// gangReport adds to the output, for each gang whose members' reason
// changed since the last TakeOutput, one UnschedulableClass per waiting
// member: the reason changed for all of them, not only for those a
// transition names.
func (c *Core) gangReport() {
	for i, g := range c.gangTold {
		g.told = false
		c.gangTold[i] = nil
		for _, t := range g.ready {
			c.out.Unschedulable = append(c.out.Unschedulable, UnschedulableClass{Sample: t.id, Count: len(g.ready), Reason: g.shown})
		}
	}
	c.gangTold = c.gangTold[:0]
}

// showGangReasons ends a schedule pass: the waiting gangs' members show
// their gang's reason as it is now.
func (c *Core) showGangReasons() {
	for _, g := range c.gangWait {
		c.gangShow(g)
	}
}

// gangUnqueue takes a ready member out of its gang's ready list.
func (c *Core) gangUnqueue(t *Task) {
	g := t.gang
	t.gready = false
	for i, m := range g.ready {
		if m == t {
			g.ready = append(g.ready[:i], g.ready[i+1:]...)
			break
		}
	}
	g.reason = "" // a verdict on the ready list t was part of
}

// placeGangs tries the waiting gangs that could start now. Gangs left
// untried by the per-call limits, or whose try ran out of search budget,
// get a retry soon (as deferred class queues do).
func (c *Core) placeGangs() {
	waiting := c.gangWait
	// Gangs that begin waiting during the loop (a gang preemption's
	// victims) gather in a list of their own, kept after the loop.
	c.gangWait = nil
	keep := waiting[:0]
	tries, preempts := 0, 0
	for _, g := range waiting {
		if len(g.ready) > 0 {
			// A member joined or left since: the gang may be out of reach.
			c.gangCheckReachable(g)
		}
		if len(g.ready) == 0 {
			g.waiting = false
			continue
		}
		keep = append(keep, g)
		if g.started && g.placed+g.done < g.min && !g.byMember {
			// Started, but its placements were not all restored: start
			// over rather than hold part of it.
			c.gangRestart(g, "gang restart: members lost their placements")
		}
		if g.placed+g.done+len(g.ready) < g.min || (!g.dirty && g.tried == c.capSeq) {
			continue
		}
		if g.reason != "" && g.reason == g.tryReason && !c.gangMayFit(g) {
			// Its last try failed, and the schedulable nodes could not
			// hold the members it needs now (gangMayFit): no try (it
			// keeps that try's verdict) until capacity changes again.
			g.dirty = false
			g.tried = c.capSeq
			continue
		}
		if tries >= maxGangTries || c.callPlaced >= c.cfg.MaxPlacementsPerCall {
			c.retrySoon()
			continue
		}
		tries++
		c.tryGang(g)
		if g.placed+g.done < g.min && preempts < maxGangPreempts && slices.ContainsFunc(g.ready, c.mayPreempt) {
			preempts++
			c.gp.start(c, g) // over evictions (gangpreempt.go)
		}
	}
	for i := len(keep); i < len(waiting); i++ {
		waiting[i] = nil
	}
	c.gangWait = append(keep, c.gangWait...)
	c.gr.pass(c) // reservations for gangs that waited long (gangreserve.go)
}

// gangMayFit reports whether the schedulable nodes could hold the members
// g still needs to start (as many as it lacks of MinMember): their free
// capacity all together, each member asking at least the least any ready
// member's options ask of each resource, and the nodes with room for one
// member (gangSlots). A bound: false means no try could start it.
// It reads g.least: call it only while the ready list is the one its
// last failed try had.
func (c *Core) gangMayFit(g *gang) bool {
	k := int64(g.min - g.placed - g.done)
	if k <= 0 || len(g.ready) == 0 {
		return true
	}
	nd := c.dims.Len()
	for d := 0; d < nd; d++ {
		if l := g.least[d]; l > 0 && k*l > c.idx.free[d] {
			return false
		}
	}
	// Other gangs' reservations keep room from it (gangreserve.go).
	holding := c.gr.holdingFrom(c, g)
	if len(holding) > 0 {
		held := c.gr.heldRoom(c, holding)
		for d := 0; d < nd; d++ {
			if l := g.least[d]; l > 0 && k*l > c.idx.free[d]-held[d] {
				return false
			}
		}
	}
	return c.gangSlots(g, holding) >= int(k)
}

// gangSlots bounds how many of g's ready members the schedulable nodes
// could hold now, when they are all of one class: over the class's
// options and their groups, each node with free primary resource enough
// for one member (its bucket, index.go) holds at most the group's largest
// capacity over the member's request, less the nodes other gangs'
// reservations keep from it (heldSlots); members that share one device
// model count one model's nodes. Members of several classes, an
// option that asks none of its group's primary resource, or groups that
// changed since the last search give no bound (math.MaxInt).
func (c *Core) gangSlots(g *gang, holding []*gangReservation) int {
	cls := g.ready[0].cls
	for _, t := range g.ready[1:] {
		if t.cls != cls {
			return math.MaxInt
		}
	}
	// Members that must share a device model (gangdomain.go) count the
	// slots of one model at a time: the bound is the best model's.
	var dims []int
	if !g.mixed {
		dims = g.devDims
	}
	byModel := c.slotsBuf[:0]
	defer func() { c.slotsBuf = byModel[:0] }()
	for oi := range cls.opts {
		o := &cls.opts[oi]
		if !o.groupsOK || o.groupsVer != c.idx.version {
			return math.MaxInt
		}
		for _, grp := range o.groups {
			r := o.req[grp.primary]
			if r <= 0 {
				return math.MaxInt
			}
			per := int(max(1, grp.maxCap[grp.primary]/r))
			nb := grp.needBucket(r)
			n := 0
			for b := nb; b <= grp.max; b++ {
				n += len(grp.buckets[b]) * per
			}
			n -= heldSlots(c, holding, o, grp, nb) * per
			models := ""
			if len(dims) > 0 {
				models = groupModels(grp, dims)
			}
			i := slices.IndexFunc(byModel, func(m modelSlots) bool { return m.models == models })
			if i < 0 {
				byModel = append(byModel, modelSlots{models: models})
				i = len(byModel) - 1
			}
			byModel[i].n += n
		}
	}
	slots := 0
	for _, m := range byModel {
		slots = max(slots, m.n)
	}
	return slots
}

// leastAsked sets g.least from its ready members.
func (c *Core) leastAsked(g *gang) {
	nd := c.dims.Len()
	for d := 0; d < nd; d++ {
		least := int64(-1)
		for _, t := range g.ready {
			for oi := range t.cls.opts {
				if r := t.cls.opts[oi].req[d]; least < 0 || r < least {
					least = r
				}
			}
		}
		g.least[d] = max(0, least)
	}
	g.devDims = gangDeviceDims(g.ready)
}

// modelSlots is gangSlots' count of the slots of one device model (the
// groups whose devices of the gang's dims are these models).
type modelSlots struct {
	models string
	n      int
}

// retrySoon asks for a Tick after the retry interval.
func (c *Core) retrySoon() {
	if !c.retrySet {
		c.retryAt, c.retrySet = c.now+int64(c.cfg.RetryInterval), true
	}
}

// gangRestart sends a gang's placed members back to pending.
func (c *Core) gangRestart(g *gang, why string) {
	g.restart = true
	g.started = false
	g.since = c.now
	for _, m := range g.members {
		if m.state == Scheduled || m.state == Running {
			c.requeue(m, Pending, why)
		}
	}
	g.restart = false
	g.reason = why // what its members show until the next try
	g.lastOf = 0
}

// gangAffinity steers a gang try's placements towards nodes that share
// topology labels with the members placed before them.
type gangAffinity struct {
	keys   []string
	anchor *Node
	g      *gang // its nodes held by a reservation come first
}

// gangBonus dominates every policy score: a node sharing the first key's
// value with the anchor beats one sharing only the second's, and so on.
const gangBonus = int64(1) << 50

// heldBonus puts a gang's members on the nodes its reservation holds
// first, above the topology bonus (the plan kept to its domain).
const heldBonus = gangBonus << 2

func (a *gangAffinity) bonus(n *Node) int64 {
	var held int64
	if h := n.hold; h != nil && h.r.g == a.g {
		held = heldBonus
	}
	if a.anchor == nil {
		return held
	}
	for i, k := range a.keys {
		v, ok := a.anchor.labels[k]
		if ok && n.labels[k] == v {
			return held + gangBonus>>(2*i)
		}
	}
	return held
}

// gangTryStart returns a copy of g's ready members in submission order
// (placing a member takes it out of g.ready; the list is the core's
// scratch: tries do not nest, and gangTryEnd gives it back) and the
// affinity steering the try's members to the topology of the members
// placed already.
func (c *Core) gangTryStart(g *gang) ([]*Task, *gangAffinity) {
	ready := append(c.gangReady[:0], g.ready...)
	if !slices.IsSortedFunc(ready, bySeq) {
		slices.SortFunc(ready, bySeq)
	}
	keys := g.topology
	if keys == nil {
		keys = defaultGangTopology
	}
	aff := &gangAffinity{keys: keys, g: g}
	for _, m := range g.members {
		if m.node != nil && (m.state == Scheduled || m.state == Running) {
			aff.anchor = m.node
			break
		}
	}
	return ready, aff
}

// gangTryEnd gives gangTryStart's list back.
func (c *Core) gangTryEnd(ready []*Task) {
	clear(ready)
	c.gangReady = ready[:0]
}

// tryGang places as many ready members as fit, under a checkpoint that it
// keeps only if the gang then has MinMember placed; otherwise it rolls
// every placement of this try back (journal.go).
func (c *Core) tryGang(g *gang) {
	if g.tried != c.capSeq {
		g.deferred = 0
	}
	ready, aff := c.gangTryStart(g)
	defer c.gangTryEnd(ready)
	// Gang tries search completely (no MaxVisit budget) and leave the
	// class's search state as they found it: a gang member shares its
	// class with plain tasks, and a try that changed that state could
	// keep their searches, and its own, from ever completing.
	sc := c.beginSearch(true, aff)
	newly, deferredTry, kept := c.placeGangMembers(g, sc, ready, aff)
	sc.endSearch()
	g.dirty = false
	if kept {
		c.stats.Attempts += uint64(len(ready))
		g.placed += newly
		g.started = true
		g.reason = ""
		g.lastOf = 0
		if len(g.ready) > 0 {
			g.tried = c.capSeq // the rest wait for capacity
		}
		return
	}
	// Rolled back; the attempts happened all the same.
	c.stats.Attempts += uint64(len(ready))
	g.tried = c.capSeq
	if deferredTry && g.deferred < maxGangDeferrals {
		// The search ran out of budget, not of nodes: try again soon (a
		// few times: members of one class share its search state, so a
		// try can keep cutting itself short; then the gang waits for
		// capacity to change, like an unfit class).
		g.deferred++
		g.dirty = true
		c.retrySoon()
	}
	g.lastFit, g.lastOf, g.lastNeed = newly, len(ready), g.min-g.placed-g.done
	c.leastAsked(g)
	if g.tryReason == "" || g.tryFit != g.lastFit || g.tryOf != g.lastOf || g.tryNeed != g.lastNeed {
		g.tryFit, g.tryOf, g.tryNeed = g.lastFit, g.lastOf, g.lastNeed
		g.tryReason = fmt.Sprintf("gang of job %s: %d of %d pending members fit together now, %d needed to start", g.job.id, g.lastFit, g.lastOf, g.lastNeed)
	}
	g.reason = g.tryReason
}

// bySeq orders tasks by submission.
func bySeq(a, b *Task) int { return cmp.Compare(a.seq, b.seq) }

var defaultGangTopology = []string{"nvlink", "ici", "rack"}

// gangTimeouts fails the gangs that did not start within their timeout,
// naming the shortfall.
func (c *Core) gangTimeouts() {
	for _, g := range c.gangWait {
		if g.started || g.timeout <= 0 || len(g.ready) == 0 || c.now < g.since+g.timeout {
			continue
		}
		why := c.gangShortfall(g)
		g.failing = true
		for _, m := range append([]*Task(nil), g.ready...) {
			if !m.state.Terminal() {
				c.finish(m, Failed, why)
			}
		}
		g.failing = false
	}
}

// nextGangTimeout is the earliest gang deadline.
func (c *Core) nextGangTimeout() (int64, bool) {
	var best int64
	ok := false
	for _, g := range c.gangWait {
		if g.started || g.timeout <= 0 || len(g.ready) == 0 {
			continue
		}
		if d := g.since + g.timeout; !ok || d < best {
			best, ok = d, true
		}
	}
	return best, ok
}

// gangShortfall explains why a gang could not start: too few members to
// reach MinMember, or what its last try could place; then what its
// pending members ask in all of the resource they ask most, against what
// the whole cluster and its freest node have free. Topology is only a
// preference: the largest free domain of the first topology key the
// nodes carry is named when no domain could hold all the pending members
// (a preference it could not meet), never as a requirement. It walks
// every node once; it runs only when a gang times out.
func (c *Core) gangShortfall(g *gang) string {
	var need resource.Vector
	for _, t := range g.ready {
		o := &t.cls.opts[t.cls.optOrder[0]]
		for i := range o.req {
			need[i] += o.req[i]
		}
	}
	// The resource to report: the device type needed most, else cpu.
	dim := -1
	for i := 0; i < c.dims.Len(); i++ {
		if strings.Contains(string(c.dims.Name(i)), "/") && need[i] > 0 && (dim < 0 || need[i] > need[dim]) {
			dim = i
		}
	}
	if dim < 0 {
		dim = 0
	}
	keys := g.topology
	if keys == nil {
		keys = defaultGangTopology
	}
	// One walk: free capacity in all, on the freest node, and per domain
	// of every key.
	byKey := make([]map[string]int64, len(keys))
	for i := range byKey {
		byKey[i] = map[string]int64{}
	}
	var total, node int64
	for _, n := range c.idx.order {
		if !n.Schedulable() {
			continue
		}
		f := n.capacity[dim] - n.alloc[dim]
		total += f
		node = max(node, f)
		for i, k := range keys {
			if v, ok := n.labels[k]; ok {
				byKey[i][v] += f
			}
		}
	}
	name := string(c.dims.Name(dim))
	var parts []string
	switch have := g.placed + g.done + len(g.ready); {
	case have < g.min:
		parts = append(parts, fmt.Sprintf("%d of its %d members pending, placed or done, minMember %d",
			have, len(g.members)+len(g.want), g.min))
	case g.lastOf > 0:
		parts = append(parts, fmt.Sprintf("%d of %d pending members could be placed together at its last try, %d needed to start",
			g.lastFit, g.lastOf, g.lastNeed))
	}
	parts = append(parts, fmt.Sprintf("its %d pending members ask %s %s in all, the cluster has %s free (at most %s on one node)",
		len(g.ready), c.formatQty(dim, need[dim]), name, c.formatQty(dim, total), c.formatQty(dim, node)))
	for i, k := range keys {
		if len(byKey[i]) == 0 {
			continue
		}
		var largest int64
		for _, v := range byKey[i] {
			largest = max(largest, v)
		}
		if largest < need[dim] {
			parts = append(parts, fmt.Sprintf("its preference for one %s domain could not be met either: the largest free %s domain has %s",
				k, k, c.formatQty(dim, largest)))
		}
		break
	}
	return fmt.Sprintf("gang of job %s did not start within %s: %s", g.job.id, durString(g.timeout), strings.Join(parts, "; "))
}

func (c *Core) formatQty(dim int, v int64) string {
	switch c.dims.Name(dim) {
	case resource.Memory:
		return resource.FormatBytes(v)
	default:
		return resource.FormatMilli(v)
	}
}

// gangPending counts the members waiting for their gangs, per level.
func (c *Core) gangPending(p *[4]int) {
	for _, g := range c.gangWait {
		for _, t := range g.ready {
			p[t.prio]++
		}
	}
}

// Failures returns how many times a task failed and was retried.
func (t *Task) Failures() int { return int(t.failures) }

// searchState is a class's search state, saved around a gang member's
// try (its buffers are reused from one save to the next).
type searchState struct {
	rr    bool
	scans [][]scanState
}

func (s *searchState) save(cls *class) {
	s.rr = cls.rrExhaustive
	for len(s.scans) < len(cls.opts) {
		s.scans = append(s.scans, nil)
	}
	for i := range cls.opts {
		s.scans[i] = append(s.scans[i][:0], cls.opts[i].scans...)
	}
}

func (s *searchState) restore(cls *class) {
	cls.rrExhaustive = s.rr
	for i := range cls.opts {
		cls.opts[i].scans = append(cls.opts[i].scans[:0], s.scans[i]...)
	}
}
