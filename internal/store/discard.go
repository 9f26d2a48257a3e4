package store

import (
	"context"
	"sync/atomic"
)

// Discard is a Store that keeps nothing: commits succeed at once, reads
// find nothing. It is for an engine whose state is held elsewhere and
// rebuilt from there after a restart — the Kubernetes front end's, whose
// record is the cluster (a Binding in the API server is what
// acknowledged means there). Nothing may use it where acknowledged must
// mean durable.
type Discard struct{ closed atomic.Bool }

// Volatile reports that the store keeps nothing: its users need not
// encode what they commit.
func (d *Discard) Volatile() bool { return true }

// Commit implements Store: it keeps nothing.
func (d *Discard) Commit(ctx context.Context, recs []Record) error {
	if d.closed.Load() {
		return ErrClosed
	}
	return ctx.Err()
}

// Get implements Store: nothing is ever found.
func (d *Discard) Get(context.Context, string, string) ([]byte, bool, error) {
	if d.closed.Load() {
		return nil, false, ErrClosed
	}
	return nil, false, nil
}

// Load implements Store: there is nothing to load.
func (d *Discard) Load(context.Context, string, func(string, []byte) error) error {
	if d.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Close implements Store.
func (d *Discard) Close() error {
	d.closed.Store(true)
	return nil
}
