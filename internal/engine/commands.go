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

// readWait is how long a reader waits for the loop before it is answered
// from what the loop published last (Summarize), or told the scheduler is
// busy (the other views): a bulk submission's step must not stall reads
// for seconds (issue 41 §3).
const readWait = 250 * time.Millisecond

// viewWait is how long the views built on the loop (nodes, queues, a
// task's place in its queue) wait for it before the reader is told the
// scheduler is busy (errBusy: 503, retry).
const viewWait = 2 * time.Second

// errBusy answers a read the loop could not run within its wait.
var errBusy = errs.New(errs.Unavailable, "", "the scheduler is busy with a long step (a bulk submission?) and could not answer within its read budget: retry")

// read queues a command that only reads (abandoning it changes nothing)
// and waits for its answer at most within, or until ctx ends: then it
// returns errBusy, and the command still runs later, its answer unread.
func (e *Engine) read(ctx context.Context, cmd command, within time.Duration) error {
	if err := e.send(ctx, cmd); err != nil {
		return err
	}
	t := time.NewTimer(within)
	defer t.Stop()
	a := cmd.base()
	select {
	case <-a.done:
		return a.err
	case <-e.done:
		return e.wait(cmd)
	case <-t.C:
		return errBusy
	case <-ctx.Done():
		return errBusy
	}
}

// weighted is a command whose work grows with its size (a submission's
// tasks): a step's commands stay within stepWork, unless its first alone
// exceeds it (loop.go).
type weighted interface{ weight() int }

// stepWork bounds the work of one step's commands: a bulk submission is
// not one step with what was queued before it (an urgent submission, a
// read), nor with another bulk submission, holding them all behind its
// commit.
const stepWork = 20_000

// weightOf is cmd's work (1 unless it is weighted).
func weightOf(cmd command) int {
	if w, ok := cmd.(weighted); ok {
		return max(w.weight(), 1)
	}
	return 1
}
