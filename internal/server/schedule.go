package server

import (
	"net/http"
	"time"

	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
)

// POST /api/v1/schedule?wait=D answers once the tasks it submitted are
// placed (200) or D has passed (202). The wait is not a blocked handler:
// the handler returns, and ServeHTTP finishes the request in a shallow
// frame, so that a million waiting requests keep small stacks.
//
//	ServeHTTP
//	  serve ─▶ mux ─▶ schedule          validate wait; submit (durable);
//	  │                                 sw.waiting = &scheduleWait{ids, deadline}
//	  └─ answerWhenPlaced(sw)           loop while sw.waiting != nil:
//	       tryAnswer(sw) ──────────────▶ every id placed, or the wait over,
//	       │                             or the engine stopped: write the
//	       │                             answer, leave admission,
//	       │                             sw.waiting = nil, return nil
//	       │ else: the change channel of the first task still waiting
//	       ▼
//	     awaitChange(wait, changed)     select: the task changed │ deadline
//	                                    │ client gone │ engine stopped
//	                                    (the last three set over/stopped)
//
// scheduleWait holds what the request waits for and what it has read so
// far (ids[:next] are answered in recs), so a loop turn re-reads only the
// tasks not placed yet.

// schedule is POST /api/v1/schedule?wait=2s: 200 when every task is
// placed (or finished), 202 with those still pending when wait runs out.
// Once the tasks are durable, ServeHTTP waits for their placements and
// answers (statusWriter.waiting; the diagram above).
func (s *Server) schedule(w http.ResponseWriter, r *http.Request) {
	wait := 2 * time.Second
	if v := queryGet(r.URL.RawQuery, "wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > 10*time.Minute {
			writeError(w, errs.Invalid("wait", "must be a duration from 0 to 10m, got %q", v))
			return
		}
		wait = d
	}
	ids, batch, leave, ok := s.submitTasks(w, r)
	if !ok {
		return
	}
	p := &scheduleWait{ids: ids, batch: batch, leave: leave, wait: wait, deadline: s.expiry.deadline(wait), status: http.StatusOK}
	if len(ids) == 1 {
		p.recs = p.one[:]
	} else {
		p.recs = make([]*engine.TaskRecord, len(ids))
	}
	if sw, ok := w.(*statusWriter); ok && sw.waiting == nil {
		sw.waiting = p
		return
	}
	// Not under ServeHTTP (a handler called directly): finish here.
	s.answerWhenPlaced(&statusWriter{ResponseWriter: w, code: http.StatusOK, start: time.Now(), waiting: p}, r)
}

// scheduleWait is a schedule request whose tasks are durable, waiting
// for their placements until deadline.
type scheduleWait struct {
	ids      []string
	batch    bool
	leave    func() // admission: the request's place, held until answered
	wait     time.Duration
	deadline time.Duration // on the expiry clock
	expired  <-chan struct{}
	over     bool // the wait is over (deadline, client gone): answer with what is there
	stopped  bool // the engine stopped
	next     int  // ids[:next] are answered in recs
	recs     []*engine.TaskRecord
	one      [1]*engine.TaskRecord
	status   int
}

// answerWhenPlaced answers the schedule request left in sw.waiting,
// waiting in this shallow frame between checks (so the stack stays
// small).
func (s *Server) answerWhenPlaced(sw *statusWriter, r *http.Request) {
	for sw.waiting != nil {
		changed := s.tryAnswer(sw, r)
		if changed == nil {
			return
		}
		s.awaitChange(sw.waiting, changed, r)
	}
}

// tryAnswer answers sw's pending schedule if it can (every task
// placed, or the wait over) and returns nil, or returns the channel that
// closes at the next change of the task it waits for.
func (s *Server) tryAnswer(sw *statusWriter, r *http.Request) <-chan struct{} {
	defer s.finish(sw, r)
	p := sw.waiting
	if p.stopped {
		writeError(sw, engine.ErrStopped)
		p.leave()
		sw.waiting = nil
		return nil
	}
	for p.next < len(p.ids) {
		id := p.ids[p.next]
		rec, ok := s.eng.Task(id)
		if !ok {
			writeError(sw, errs.New(errs.NotFound, "id", "no task %q", id))
			p.leave()
			sw.waiting = nil
			return nil
		}
		if rec.Waiting() && !p.over {
			if p.expired == nil {
				p.expired = s.expiry.at(p.deadline, p.wait)
			}
			if isClosed(p.expired) {
				p.over = true
				continue
			}
			// Register, then read again: a commit publishes a task's new
			// record before it wakes the registered waiters.
			changed := s.eng.WaitChange(id)
			if rec, ok = s.eng.Task(id); !ok || rec.Waiting() {
				return changed
			}
		}
		if rec.Waiting() {
			p.status = http.StatusAccepted
		}
		p.recs[p.next] = rec
		p.next++
	}
	writeTasks(sw, p.status, engine.LocalRecords(principalOf(sw, r).scope(), p.recs), p.batch)
	p.leave()
	sw.waiting = nil
	return nil
}

// park waits for the next change of the task p waits for, p's deadline,
// the client's leaving or the engine's stop. Its frame is kept small: it
// is on the stack of every waiting request.
func (s *Server) awaitChange(p *scheduleWait, changed <-chan struct{}, r *http.Request) {
	select {
	case <-changed:
	case <-p.expired:
		p.over = true
	case <-r.Context().Done():
		p.over = true
	case <-s.eng.Stopped():
		p.stopped = true
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
