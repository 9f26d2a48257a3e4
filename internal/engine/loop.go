package engine

import (
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// loop is the engine's one goroutine: it takes a batch of commands (or
// wakes for the core's timers, the liveness check or a due gauge refresh),
// runs a step and answers the batch, until Close or a failed commit.
func (e *Engine) loop() {
	defer close(e.done)
	timer := time.NewTimer(0) // a first step at once: liveness and the core's timers after a restart
	defer timer.Stop()
	batch := make([]command, 0, e.cfg.MaxBatch)
	// carry is a command taken from the queue that would have made the
	// step's work exceed stepWork: it starts the next step.
	var carry command
	for {
		batch = batch[:0]
		work := 0
		if carry != nil {
			batch, work, carry = append(batch, carry), weightOf(carry), nil
		} else {
			select {
			case cmd := <-e.cmds:
				batch = append(batch, cmd)
				work = weightOf(cmd)
			case <-timer.C:
			case <-e.nudge: // lane heartbeats' samples wait (live.go)
			case <-e.quit:
				e.failPending(ErrStopped)
				return
			}
		}
	drain:
		for len(batch) < e.cfg.MaxBatch && carry == nil {
			select {
			case cmd := <-e.cmds:
				if w := weightOf(cmd); len(batch) > 0 && work+w > stepWork {
					carry = cmd // a bulk submission does not hold up what came before it
				} else {
					batch = append(batch, cmd)
					work += w
				}
			default:
				break drain
			}
		}
		if err := e.step(batch); err != nil {
			if carry != nil {
				batch = append(batch, carry) // answered with the failure too
			}
			e.stop(batch, err)
			return
		}
		answerAll(batch, nil)
		clear(batch) // the answered commands are their callers' now
		e.gauge(e.cfg.Now())
		e.rearm(timer)
	}
}

// step is one turn of the loop over a batch of commands. A change goes
// through five steps, each with its one obligation:
//
//  1. stage: the commands run (command.run), then the liveness check and
//     the core's timers, and the core's decisions become staged records
//     (stageOutput). Only the core and the staging change; nothing durable
//     is visible outside the loop. (Soft state — registrations' sessions,
//     heartbeats' usage — is never in the store and changes here.)
//  2. encode: the staged records become store records, and the events
//     they publish are decided, so that the store's event high-water mark
//     commits with them (encode).
//  3. durable commit: all of them in one store commit (commitDurable). If
//     it fails, step returns its error; nothing of the batch is published
//     or acknowledged, and the engine stops (stop): memory and disk could
//     differ.
//  4. publish: readers, agents' assignment feeds, event clients and the
//     waiters of the changed tasks see the changes (publish).
//  5. answer: the commands' callers are answered (answerAll, in loop).
//
// This is where the engine's ordering guarantee is enforced, and the one
// place it is stated: nothing is answered or sent to an agent before its
// commit is durable. Publish and answer run only after commitDurable
// returned nil, and they are the only ways a change leaves the loop.
func (e *Engine) step(batch []command) error {
	now := e.cfg.Now()
	e.observeSamples(now)
	for _, cmd := range batch {
		cmd.run(e, now)
	}
	e.checkLiveness(now)
	e.c.Tick(now)
	e.retire(now)
	e.acct.purge(now)
	return e.commitStaged(now)
}

// answerAll answers each command of batch: with err when it is not nil (the
// step failed), else with what its run said.
func answerAll(batch []command, err error) {
	for _, cmd := range batch {
		a := cmd.base()
		if err != nil {
			a.err = err
		}
		close(a.done)
	}
}

// stop ends the loop after a failed commit: the batch is answered with the
// failure, queued commands with ErrStopped, and readers see Err.
func (e *Engine) stop(batch []command, err error) {
	e.log.Error("engine stopped: store commit failed", "err", err)
	e.mu.Lock()
	e.fatal = err
	e.mu.Unlock()
	failed := err // the store's own class (507 for a full disk) when it has one
	if errs.CodeOf(err) == errs.Internal {
		failed = errs.Wrap(errs.Unavailable, "", err)
	}
	answerAll(batch, failed)
	e.failPending(ErrStopped)
}

// failPending answers every queued command with err.
func (e *Engine) failPending(err error) {
	for {
		select {
		case cmd := <-e.cmds:
			a := cmd.base()
			a.err = err
			close(a.done)
		default:
			return
		}
	}
}

// rearm sets timer for the loop's next wakeup without a command: the
// core's next timer, the next liveness check, a due gauge refresh, the
// next finished item to retire (an hour at most).
func (e *Engine) rearm(timer *time.Timer) {
	if !timer.Stop() {
		select {
		case <-timer.C:
		default:
		}
	}
	d := time.Hour
	now := e.cfg.Now()
	if next, ok := e.c.NextWakeup(); ok {
		d = next.Sub(now)
	}
	if next, ok := e.live.next(); ok {
		d = min(d, next.Sub(now))
	}
	if next, ok := e.gauges.next(); ok {
		d = min(d, next.Sub(now))
	}
	if next, ok := e.ret.next(); ok {
		d = min(d, next.Sub(now))
	}
	timer.Reset(max(d, 0))
}
