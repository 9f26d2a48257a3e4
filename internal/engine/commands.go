package engine

import (
	"context"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// A command is one request to the loop. Each kind is its own type, with
// only its own inputs and results, next to the method that sends it:
//
//	tasks.go    submitCmd, cancelCmd, startedCmd, finishedCmd, renewCmd
//	nodes.go    upsertNodeCmd, nodeStateCmd
//	holders.go  releaseNodeCmd
//	queues.go   putQueueCmd, queueViewsCmd
//	jobs.go     submitJobCmd, cancelJobCmd
//	agents.go   registerCmd, heartbeatCmd, agentStatusCmd
//	views.go    summaryCmd, nodeViewsCmd
//
// run executes the command on the loop, within a step: it changes the core
// and the staged records and sets the command's results. It is answered
// once the step's commit is durable and published (step says the order).
type command interface {
	run(e *Engine, now time.Time)
	base() *answer
}

// answer is what every command has (commands embed it): the error it is
// answered with and the channel closed when it is answered. A run sets err
// for its own failure; a failed commit replaces it with the commit's.
type answer struct {
	err  error
	done chan struct{}
}

func (a *answer) base() *answer { return a }

// do sends cmd and waits for its answer.
func (e *Engine) do(ctx context.Context, cmd command) error {
	if err := e.send(ctx, cmd); err != nil {
		return err
	}
	return e.wait(cmd)
}

// send queues cmd for the loop without waiting for its answer.
func (e *Engine) send(ctx context.Context, cmd command) error {
	cmd.base().done = make(chan struct{})
	e.mu.RLock()
	fatal := e.fatal
	e.mu.RUnlock()
	if fatal != nil {
		return ErrStopped
	}
	select {
	case <-e.quit:
		return ErrStopped
	default:
	}
	select {
	case e.cmds <- cmd: // the queue has room (nearly always): no need for ctx's channel
	default:
		select {
		case e.cmds <- cmd:
		case <-e.quit:
			return ErrStopped
		case <-ctx.Done():
			return errs.Wrap(errs.Unavailable, "", ctx.Err())
		}
	}
	return nil
}

// wait is the answer of a command queued by send.
func (e *Engine) wait(cmd command) error {
	// Once queued the command will run; its answer is waited for even if
	// ctx ends, so that "not acknowledged" never hides "done". A command
	// queued after the loop's last drain (the engine was closing) is never
	// run: the loop's end says so.
	a := cmd.base()
	select {
	case <-a.done:
		return a.err
	case <-e.done:
		select {
		case <-a.done: // answered before the loop ended
			return a.err
		default:
			return ErrStopped
		}
	}
}
