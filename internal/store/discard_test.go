package store

import (
	"context"
	"errors"
	"testing"
)

// Discard keeps nothing: a commit succeeds and is not found again; once
// closed every call says so.
func TestDiscardKeepsNothing(t *testing.T) {
	ctx := context.Background()
	d := &Discard{}
	if err := d.Commit(ctx, []Record{{Kind: "task", Key: "a", Value: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := d.Get(ctx, "task", "a"); ok || err != nil {
		t.Errorf("Get after a commit: found %v, err %v; want nothing", ok, err)
	}
	n := 0
	if err := d.Load(ctx, "task", func(string, []byte) error { n++; return nil }); err != nil || n != 0 {
		t.Errorf("Load: %d records, err %v", n, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := d.Commit(cancelled, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("a commit with its context cancelled: %v", err)
	}
	d.Close()
	if err := d.Commit(ctx, nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit after Close: %v, want ErrClosed", err)
	}
	if _, _, err := d.Get(ctx, "task", "a"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if err := d.Load(ctx, "task", nil); !errors.Is(err, ErrClosed) {
		t.Errorf("Load after Close: %v, want ErrClosed", err)
	}
}
