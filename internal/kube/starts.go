package kube

import (
	"context"
	"sync"
	"time"
)

// startWindow is how long the tasks of pods bound meanwhile gather before
// they are reported started, in one engine command (startBatch).
const startWindow = 20 * time.Millisecond

// startBatch gathers the tasks of bound pods to report them started to
// the engine together: a Binding is a started task, and one engine step
// per Binding was most of the engine's steps (a `bench kube` run of
// 10,000 pods: 13,654 steps, 10,000 of them a lone Started; batched, 756
// steps had a lone Started).
//
// Reported in order: whoever ends a task (Finished, Cancel) flushes the
// batch first (flush), so that a task is started before it ends.
type startBatch struct {
	mu   sync.Mutex
	ids  []string
	wake chan struct{} // cap 1: ids were added

	// sending is held while a batch is on its way to the engine: a flush
	// waits for the batch in flight as for its own.
	sending sync.Mutex
	send    func(ctx context.Context, ids []string)
}

func newStartBatch(send func(ctx context.Context, ids []string)) *startBatch {
	return &startBatch{wake: make(chan struct{}, 1), send: send}
}

// add queues task id to be reported started.
func (b *startBatch) add(id string) {
	b.mu.Lock()
	b.ids = append(b.ids, id)
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// flush reports the queued tasks now, and returns once they and any batch
// in flight were reported.
func (b *startBatch) flush(ctx context.Context) {
	b.sending.Lock()
	defer b.sending.Unlock()
	b.mu.Lock()
	ids := b.ids
	b.ids = nil
	b.mu.Unlock()
	if len(ids) > 0 {
		b.send(ctx, ids)
	}
}

// run reports queued tasks, each batch startWindow after its first task
// came, until ctx ends.
func (b *startBatch) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(startWindow):
		}
		b.flush(ctx)
	}
}
