package core

import (
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// Saved is a task's durable state as a server's store holds it: what
// Restore needs to rebuild the core after a restart.
type Saved struct {
	State   State
	Node    string      // for scheduled and running tasks
	Devices []DeviceRef // the concrete devices held (type, id, share)
	Chosen  int         // -1 for the task's resources, else the alternative
	Attempt int
	Reason  string
	// Started is when a running task started (or a scheduled one was
	// placed); run timeouts and preemption's minimum runtime count from it.
	Started time.Time
	// Job is the job (registered with AddJob before) the task belongs to;
	// Failures how many of its retries it used.
	Job      string
	Failures int
	// Served is the service the task attained in its ended attempts
	// (time placed or running), which time-sharing policies rank by.
	Served time.Duration
	// AnyDevices places a task whose devices are not known (work adopted
	// from elsewhere) on free devices of Node, picked as a placement
	// would pick them; Devices is then ignored. Not part of what a
	// store keeps.
	AnyDevices bool
}

// Restore puts a task back as it was saved, after nodes were restored and
// before the first Tick: terminal tasks stay terminal (so that later tasks
// may depend on them), pending ones wait in their queue, placed ones get
// their node and devices back. Tasks must be restored after the tasks they
// depend on. Restore never places anything (a pending task must not take
// the capacity of a placed task not restored yet); the caller Ticks when
// every task is back.
//
// A placement that cannot be restored (node or device gone, unhealthy, or
// no longer fitting) puts the task back to pending with its attempt
// counted, reported as a Transition. A lease gets a full lease from now,
// since its last renewal is not saved.
func (c *Core) Restore(now time.Time, spec *api.Task, s Saved) error {
	c.advance(now)
	if s.State >= numStates || s.State == Preempted {
		return errs.Invalid("state", "cannot restore a task in state %s", s.State)
	}
	var j *job
	if s.Job != "" {
		if j = c.jb.jobs[s.Job]; j == nil {
			return errs.New(errs.NotFound, "job", "no job %q: restore jobs before their tasks", s.Job)
		}
	}
	t, deps, skipReason, err := c.admit(spec, j)
	if err != nil {
		return err
	}
	t.attempt = int32(s.Attempt)
	t.failures = int32(s.Failures)
	t.served = max(0, int64(s.Served))
	t.lastRun = t.served // its last run is not on record: at most all of it
	defer func() {
		g := t.gang
		switch {
		case g == nil:
		case t.state == Scheduled || t.state == Running:
			g.placed++
			g.started = true
		case t.state == Succeeded:
			g.done++
		case t.state.Terminal():
			g.failed++
			g.dirty = true
		}
	}()
	switch {
	case s.State.Terminal():
		t.state = s.State
		t.reason = s.Reason
		c.jb.ended(t)
	case skipReason != "":
		t.state = Skipped
		t.reason = skipReason
		c.out.Transitions = append(c.out.Transitions, Transition{Task: t.id, From: s.State, To: Skipped, Reason: skipReason, Attempt: int(t.attempt)})
		c.jb.ended(t)
	case len(deps) > 0:
		c.jb.waitFor(t, deps)
	case s.State == Scheduled || s.State == Running:
		if why := c.restorePlacement(t, s); why != "" && t.noRequeue {
			t.state, t.reason = Failed, why+" (requeue: false)"
			c.out.Transitions = append(c.out.Transitions, Transition{Task: t.id, From: s.State, To: Failed, Reason: t.reason, Attempt: int(t.attempt)})
			c.jb.ended(t)
		} else if why != "" {
			t.attempt++
			c.out.Transitions = append(c.out.Transitions, Transition{Task: t.id, From: s.State, To: Pending, Reason: why, Attempt: int(t.attempt)})
			c.enqueue(t)
			t.reason = why
		}
	default:
		c.enqueue(t)
		t.reason = s.Reason
	}
	return nil
}

// restorePlacement puts t back on its saved node and devices, or says why
// it cannot.
func (c *Core) restorePlacement(t *Task, s Saved) string {
	n, ok := c.idx.nodes[s.Node]
	if !ok {
		return "could not restore placement: node " + s.Node + " is gone"
	}
	if n.state == api.NodeNotReady || n.state == api.NodeDraining {
		return "could not restore placement: node " + s.Node + " is " + n.state
	}
	oi := s.Chosen + 1
	if oi < 0 || oi >= len(t.cls.opts) {
		return "could not restore placement: no alternative " + strconv.Itoa(s.Chosen)
	}
	o := &t.cls.opts[oi]
	if s.AnyDevices {
		var cs CycleState
		if st := c.cf.devs.Filter(&cs, t, o, n); st != nil {
			return "could not restore placement: node " + s.Node + ": " + st.Reason
		}
		s.Devices = s.Devices[:0]
		for _, d := range cs.picked {
			dev := &n.devices[d.dev]
			s.Devices = append(s.Devices, DeviceRef{Type: dev.Type, ID: dev.ID, Share: d.milli})
		}
	}
	devs := make([]devShare, 0, len(s.Devices))
	perDim := map[int]int64{}
	seen := map[int]bool{}
	for _, d := range s.Devices {
		j := findDevice(n, d.Type, d.ID)
		if j < 0 || !n.devices[j].Healthy {
			return "could not restore placement: device " + d.Type + " " + d.ID + " on " + s.Node + " is gone or unhealthy"
		}
		if seen[j] {
			return "could not restore placement: device " + d.Type + " " + d.ID + " listed twice"
		}
		seen[j] = true
		if o.req[n.devices[j].dim] == 0 {
			return "could not restore placement: device " + d.Type + " " + d.ID + " was not requested"
		}
		share := d.Share
		if share <= 0 || share > 1000 || int64(n.devices[j].Free()) < int64(share) {
			return "could not restore placement: device " + d.Type + " " + d.ID + " on " + s.Node + " has no room"
		}
		devs = append(devs, devShare{dev: int32(j), milli: share})
		perDim[n.devices[j].dim] += int64(share)
	}
	for _, dr := range o.devs {
		if len(n.byDim[dr.dim]) > 0 && perDim[dr.dim] != dr.milli {
			return "could not restore placement: saved devices do not match the request"
		}
	}
	nd := c.dims.Len()
	for i := 0; i < nd; i++ {
		if o.req[i] > n.capacity[i]-n.alloc[i] {
			return "could not restore placement: node " + s.Node + " has no room for " + string(c.dims.Name(i))
		}
	}
	c.allocate(t, n, o, devs)
	for _, r := range c.policy.Reserve {
		r.Reserve(&c.cs, t, o, n)
	}
	c.cons.reserve(t, n, 1)
	t.state = s.State
	t.started = s.Started.UnixNano()
	if t.started == 0 || t.started > c.now {
		t.started = c.now
	}
	switch {
	case t.lease > 0:
		c.timers.set(t, timerLease, c.now+t.lease)
	case t.state == Running && t.timeout > 0:
		c.timers.set(t, timerRun, t.started+t.timeout)
	}
	return ""
}

// SavedState returns what a server persists for a task so that Restore can
// rebuild it.
func (c *Core) SavedState(id string) (Saved, bool) {
	t, ok := c.tasks[id]
	if !ok {
		return Saved{}, false
	}
	s := Saved{State: t.state, Chosen: int(t.chosen), Attempt: int(t.attempt), Reason: t.ownReason(), Failures: int(t.failures)}
	if t.job != nil {
		s.Job = t.job.id
	}
	if t.node != nil {
		s.Node = t.node.name
		s.Started = time.Unix(0, t.started)
		for _, d := range t.devs {
			dev := &t.node.devices[d.dev]
			s.Devices = append(s.Devices, DeviceRef{Type: dev.Type, ID: dev.ID, Model: dev.Model, Share: d.milli})
		}
	}
	return s, true
}

// Replace cancels the tasks ids (with reason) and restores spec as s in
// the room they leave, before any waiting task may take it: a front end
// whose executor kept work it had been told to end (a pod its disruption
// budget kept) counts that work again in place of what was placed there
// meanwhile. Tasks already finished are skipped. A spec that does not
// validate cancels nothing. As after Restore, the caller Ticks.
func (c *Core) Replace(now time.Time, ids []string, reason string, spec *api.Task, s Saved) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	c.advance(now)
	for _, id := range ids {
		if t, err := c.lookup(id); err == nil && !t.state.Terminal() {
			c.finish(t, Cancelled, reason)
		}
	}
	return c.Restore(now, spec, s)
}
