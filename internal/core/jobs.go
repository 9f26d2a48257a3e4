package core

import (
	"cmp"
	"fmt"
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

// jobBook holds the jobs: their tasks, retries and failure policy, and
// the dependencies between tasks and jobs (depends.go). The core calls it
// at named points: attachJob and resolveDeps when a task is admitted,
// retry and jobTaskEnded when a job task stops, ended when any task ends.
type jobBook struct {
	c    *Core
	jobs map[string]*job
}

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
	waiting  bool    // in gangs.wait
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
	told      bool // in gangs.told
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
	if c.jb.jobs[spec.ID] != nil {
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
	c.jb.jobs[spec.ID] = j
	return nil
}

// SubmitJobTask submits a task of a registered job.
func (c *Core) SubmitJobTask(now time.Time, jobID string, spec *api.Task) error {
	j := c.jb.jobs[jobID]
	if j == nil {
		return errs.New(errs.NotFound, "job", "no job %q", jobID)
	}
	return c.submit(now, spec, j)
}

// attachJob links a task being admitted to its job j (nil for none).
func (jb *jobBook) attachJob(t *Task, j *job) {
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
func (jb *jobBook) retry(t *Task, from, to State, reason string) bool {
	c := jb.c
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
		c.gs.gangMemberLeft(t, to, reason)
	}
	return true
}

// jobTaskEnded runs after a job task reached a terminal state.
func (jb *jobBook) jobTaskEnded(t *Task, from State) {
	c := jb.c
	if g := t.gang; g != nil {
		if t.state == Succeeded {
			g.done++
		} else {
			g.failed++
		}
		if from == Scheduled || from == Running {
			c.gs.gangMemberLeft(t, t.state, t.reason)
		}
		c.gs.gangCheckReachable(g)
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

// bySeq orders tasks by submission.
func bySeq(a, b *Task) int { return cmp.Compare(a.seq, b.seq) }

var defaultGangTopology = []string{"nvlink", "ici", "rack"}

func (c *Core) formatQty(dim int, v int64) string {
	switch c.dims.Name(dim) {
	case resource.Memory:
		return resource.FormatBytes(v)
	default:
		return resource.FormatMilli(v)
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
