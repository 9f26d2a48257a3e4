package core

import (
	"strconv"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// Dependencies (api.ParseDependency): a task may wait, blocked, for tasks
// and jobs to end. Each edge has a kind saying which end releases it:
// afterok a success, afterany any end, afternotok any end but a success.
// An end of the other kind skips the waiting task ("can never run"),
// which ends it in turn: what waits on it by afterok is skipped too, and
// what waits on it by afterany or afternotok is released.
//
// A job ends when every task of it has ended (a task that will be retried
// has not), and succeeded when every one did; its dependents settle then.
// Settling is a worklist over what just ended, so that skips cascade
// through tasks and jobs without recursion: work proportional to the
// edges settled.

// depKind is an edge's kind.
type depKind uint8

const (
	afterOK depKind = iota
	afterAny
	afterNotOK
)

var depKinds = map[string]depKind{api.AfterOK: afterOK, api.AfterAny: afterAny, api.AfterNotOK: afterNotOK}

// releasedBy reports whether an end (a success or not) releases the edge.
func (k depKind) releasedBy(succeeded bool) bool {
	switch k {
	case afterAny:
		return true
	case afterNotOK:
		return !succeeded
	}
	return succeeded
}

// depEdge is a task waiting on a task or job by kind.
type depEdge struct {
	t    *Task
	kind depKind
}

// depWait is one dependency of a task being admitted that has not ended:
// a task or a job.
type depWait struct {
	task *Task
	job  *job
	kind depKind
}

// resolveDeps finds spec's dependencies: waits are those not ended yet;
// skip is set (to why) when one ended the wrong way. Nothing changes.
func (jb *jobBook) resolveDeps(spec *api.Task) (waits []depWait, skip string, err error) {
	c := jb.c
	for i, d := range spec.Depends {
		f := "depends[" + strconv.Itoa(i) + "]"
		typ, id, err := api.ParseDependency(d)
		if err != nil {
			return nil, "", errs.Invalid(f, "%v", err)
		}
		k := depKinds[typ]
		dt, isTask := c.tasks[id]
		dj, isJob := jb.jobs[id]
		var ended, ok bool
		var how string
		switch {
		case isTask && isJob:
			return nil, "", errs.Invalid(f, "%q names both a task and a job", id)
		case isTask:
			if !dt.state.Terminal() {
				waits = append(waits, depWait{task: dt, kind: k})
				continue
			}
			ended, ok, how = true, dt.state == Succeeded, dt.state.String()
		case isJob:
			if !dj.ended() {
				waits = append(waits, depWait{job: dj, kind: k})
				continue
			}
			ended, ok, how = true, !dj.bad, dj.outcome()
		default:
			return nil, "", errs.New(errs.InvalidArgument, f, "unknown task or job %q", id)
		}
		if ended && !k.releasedBy(ok) && skip == "" {
			skip = depSkipReason(d, how)
		}
	}
	return waits, skip, nil
}

// depSkipReason is why a task is skipped: dependency d ended as how.
func depSkipReason(d, how string) string { return "dependency " + d + " " + how }

// waitFor makes t wait for waits (state blocked).
func (jb *jobBook) waitFor(t *Task, waits []depWait) {
	t.state = Blocked
	t.unmet = int32(len(waits))
	for _, w := range waits {
		e := depEdge{t: t, kind: w.kind}
		if w.task != nil {
			w.task.dependent = append(w.task.dependent, e)
		} else {
			w.job.dependent = append(w.job.dependent, e)
		}
	}
}

// ended settles what waits on t, which just entered a terminal state, and
// on its job if that ended with it; skips cascade (the worklist holds
// only what a settle skipped, so an ending with nothing to skip
// allocates nothing).
func (jb *jobBook) ended(t *Task) {
	var stack []*Task
	for x := t; x != nil; {
		edges := x.dependent
		x.dependent = nil
		stack = jb.settle(edges, x.state == Succeeded, x.id, x.state.String(), stack)
		if j := x.job; j != nil {
			j.open--
			j.bad = j.bad || x.state != Succeeded
			if j.ended() {
				edges := j.dependent
				j.dependent = nil
				stack = jb.settle(edges, !j.bad, j.id, j.outcome(), stack)
			}
		}
		x = nil
		if n := len(stack); n > 0 {
			x, stack = stack[n-1], stack[:n-1]
		}
	}
}

// settle releases or skips the tasks of edges on src, which ended as how
// (a success or not), and returns stack with the tasks it skipped.
func (jb *jobBook) settle(edges []depEdge, succeeded bool, src, how string, stack []*Task) []*Task {
	c := jb.c
	for _, e := range edges {
		d := e.t
		if d.state != Blocked {
			continue
		}
		if e.kind.releasedBy(succeeded) {
			d.unmet--
			if d.unmet == 0 {
				c.enqueue(d)
				c.out.Transitions = append(c.out.Transitions, Transition{Task: d.id, From: Blocked, To: Pending})
			}
			continue
		}
		d.state = Skipped
		d.reason = depSkipReason(src, how)
		if e.kind == afterNotOK {
			d.reason = depSkipReason(api.AfterNotOK+":"+src, how)
		}
		c.out.Transitions = append(c.out.Transitions, Transition{Task: d.id, From: Blocked, To: Skipped, Reason: d.reason})
		stack = append(stack, d)
		if d.gang != nil {
			d.gang.failed++ // counted now, judged by placeGangs
			d.gang.dirty = true
		}
	}
	return stack
}

// ended reports whether every task of j has ended (and it has one).
func (j *job) ended() bool { return j.open == 0 && len(j.tasks) > 0 }

// outcome is how an ended job ended, for a skip reason.
func (j *job) outcome() string {
	if j.bad {
		return "(a job) ended without success"
	}
	return "(a job) succeeded"
}
