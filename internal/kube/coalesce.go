package kube

import (
	"context"
	"sync"
)

// latest runs one write at a time per key in the background, a value set
// while one runs replacing any not written yet: the last write of a key
// is of its latest value. The pods' PodScheduled=False conditions and
// the PodGroups' PodGroupScheduled go through one each.
type latest[T any] struct {
	mu   sync.Mutex
	want map[string]T    // the value to write next, per key
	busy map[string]bool // keys with a writer running
}

// set records v as key's latest value and starts a writer for key unless
// one runs (counted in bg). The writer calls write until no value waits,
// or ctx ends.
func (l *latest[T]) set(ctx context.Context, bg *sync.WaitGroup, key string, v T, write func(ctx context.Context, key string, v T)) {
	l.mu.Lock()
	if l.want == nil {
		l.want, l.busy = map[string]T{}, map[string]bool{}
	}
	l.want[key] = v
	if l.busy[key] {
		l.mu.Unlock()
		return
	}
	l.busy[key] = true
	l.mu.Unlock()
	bg.Add(1)
	go func() {
		defer bg.Done()
		for {
			l.mu.Lock()
			v, ok := l.want[key]
			delete(l.want, key)
			if !ok || ctx.Err() != nil {
				delete(l.busy, key)
				l.mu.Unlock()
				return
			}
			l.mu.Unlock()
			write(ctx, key, v)
		}
	}()
}
