package engine

import (
	"slices"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/core"
)

// Retention: finished work is kept (listed, read, its history answered)
// for Config.RetainFinished after it finished, and at most
// Config.RetainFinishedMax items are kept; past either, the loop deletes
// it from memory, the core and the store. An item is a task outside any
// job, or a job with all its tasks (a job is retired once it is finished
// and every task of it is). Deleting is part of an ordinary step (staged,
// committed, then published), at most retireBatch items a step.
//
// The finished items wait in finishOrder, oldest first: a task enters
// when it is published in a final state, a job when its state becomes
// final. Items leave from the front only, so a step's retirement looks at
// what it retires and one more.
type retention struct {
	after time.Duration // 0: no age limit
	max   int           // 0: no count limit
	queue []retiree     // finished items, oldest first; queue[head:] are live
	head  int
	// gone counts the ids left in the listing orders by retired items
	// (order and jobOrder are compacted when they are mostly gone).
	gone, goneJobs int
}

// retiree is one finished item.
type retiree struct {
	id  string
	job bool
	at  time.Time
}

// retireBatch bounds the items one step retires.
const retireBatch = 10_000

func (r *retention) on() bool { return r.after > 0 || r.max > 0 }

// add appends a finished item.
func (r *retention) add(id string, job bool, at time.Time) {
	if r.on() {
		r.queue = append(r.queue, retiree{id: id, job: job, at: at})
	}
}

// next is when the oldest item ages out (ok false: no age limit, or
// nothing finished).
func (r *retention) next() (time.Time, bool) {
	if r.after == 0 || r.head >= len(r.queue) {
		return time.Time{}, false
	}
	return r.queue[r.head].at.Add(r.after), true
}

// due pops the items past the age or count limit at now, at most
// retireBatch.
func (r *retention) due(now time.Time) []retiree {
	var out []retiree
	for r.head < len(r.queue) && len(out) < retireBatch {
		x := r.queue[r.head]
		old := r.after > 0 && now.Sub(x.at) >= r.after
		over := r.max > 0 && len(r.queue)-r.head > r.max
		if !old && !over {
			break
		}
		out = append(out, x)
		r.queue[r.head] = retiree{}
		r.head++
	}
	if r.head > 1024 && r.head > len(r.queue)/2 {
		r.queue = append(r.queue[:0:0], r.queue[r.head:]...)
		r.head = 0
	}
	return out
}

// retire stages the deletion of the finished items due at now (a job
// still running a task of it, which cannot be, waits for its next turn).
func (e *Engine) retire(now time.Time) {
	if !e.ret.on() {
		return
	}
	for _, x := range e.ret.due(now) {
		if x.job {
			j := e.staged.jobView(x.id)
			if j == nil {
				continue
			}
			if err := e.c.ForgetJob(x.id); err != nil {
				e.ret.add(x.id, true, now) // not finished after all: later
				continue
			}
			for _, tid := range j.TaskIDs {
				e.staged.forget[tid] = true
			}
			e.staged.forgetJobs[x.id] = true
			continue
		}
		if r := e.staged.current(x.id); r == nil || inJob(r) {
			continue
		}
		if err := e.c.Forget(x.id); err != nil {
			continue
		}
		e.staged.forget[x.id] = true
	}
}

// finished reports whether state is final.
func finished(state string) bool {
	s, ok := core.ParseState(state)
	return ok && s.Terminal()
}

// noteFinished queues what a published step finished: its standalone
// tasks that entered a final state, its jobs whose state became final.
func (e *Engine) noteFinished(b *commitBatch, now time.Time) {
	if !e.ret.on() {
		return
	}
	for _, c := range b.changes {
		if !inJob(c.r) && finished(c.r.State) && (c.old == nil || !finished(c.old.State)) {
			at := now
			if c.r.Finished != nil {
				at = *c.r.Finished
			}
			e.ret.add(c.id, false, at)
		}
	}
	for _, ev := range b.jobEvents {
		if finished(ev.State) {
			e.ret.add(ev.ID, true, now)
		}
	}
}

// publishForgotten removes the retired records from the published state
// (with mu held), and compacts the listing orders once most of them are
// gone (a cursor held across that compaction may skip or repeat items).
func (e *Engine) publishForgotten() {
	for id := range e.staged.forget {
		if r, ok := e.tasks[id]; ok {
			e.unindexReplica(r)
			delete(e.tasks, id)
			e.ret.gone++
		}
	}
	for id := range e.staged.forgetJobs {
		if _, ok := e.jobs[id]; ok {
			delete(e.jobs, id)
			delete(e.jobLast, id)
			e.ret.goneJobs++
		}
	}
	if e.ret.gone > 4096 && e.ret.gone > len(e.order)/2 {
		e.order = slices.DeleteFunc(slices.Clone(e.order), func(id string) bool { return e.tasks[id] == nil })
		e.ret.gone = 0
	}
	if e.ret.goneJobs > 1024 && e.ret.goneJobs > len(e.jobOrder)/2 {
		e.jobOrder = slices.DeleteFunc(slices.Clone(e.jobOrder), func(id string) bool { return e.jobs[id] == nil })
		e.ret.goneJobs = 0
	}
}

// recoverFinished queues the finished items of a recovered store, oldest
// first (a job by its last task's finish).
func (e *Engine) recoverFinished() {
	if !e.ret.on() {
		return
	}
	var items []retiree
	for id, r := range e.tasks {
		if !inJob(r) && finished(r.State) {
			items = append(items, retiree{id: id, at: finishedAt(r)})
		}
	}
	for id, j := range e.jobs {
		if !finished(e.jobStateNow(j)) {
			continue
		}
		var last time.Time
		for _, tid := range j.TaskIDs {
			if r := e.tasks[tid]; r != nil {
				last = laterOf(last, finishedAt(r))
			}
		}
		items = append(items, retiree{id: id, job: true, at: last})
	}
	slices.SortFunc(items, func(a, b retiree) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.id < b.id {
			return -1
		}
		return 1
	})
	e.ret.queue = items
}

func finishedAt(r *TaskRecord) time.Time {
	if r.Finished != nil {
		return *r.Finished
	}
	return r.Submitted
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// inJob reports whether r is a job's task (as saved() tells).
func inJob(r *TaskRecord) bool {
	j := r.Spec.Metadata[JobMetadataKey]
	return j != "" && strings.HasPrefix(r.Spec.ID, j+".")
}
