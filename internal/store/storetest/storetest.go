// Package storetest is the contract suite every store.Store backend must
// pass (the embedded Pebble store now, the etcd store later).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store"
)

// Opener opens the backend on dir; opening the same dir again must see
// what was committed before.
type Opener func(t *testing.T, dir string) store.Store

// Run runs the whole contract suite.
func Run(t *testing.T, open Opener) {
	t.Run("RoundTrip", func(t *testing.T) { roundTrip(t, open) })
	t.Run("AtomicBatchAndOrder", func(t *testing.T) { atomicBatch(t, open) })
	t.Run("DurableAcrossReopen", func(t *testing.T) { reopen(t, open) })
	t.Run("ConcurrentCommits", func(t *testing.T) { concurrent(t, open) })
	t.Run("BadInput", func(t *testing.T) { badInput(t, open) })
	t.Run("Closed", func(t *testing.T) { closed(t, open) })
	t.Run("KindsAreSeparate", func(t *testing.T) { kinds(t, open) })
	t.Run("ScanRanges", func(t *testing.T) { scanRanges(t, open) })
}

// scanRanges: a Scanner yields [from, to) of one kind in key order, and
// stops when told.
func scanRanges(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	defer s.Close()
	sc, ok := s.(store.Scanner)
	if !ok {
		t.Fatalf("%T is not a store.Scanner", s)
	}
	commit(t, s,
		store.Record{Kind: "acct", Key: "b", Value: []byte("2")},
		store.Record{Kind: "acct", Key: "a", Value: []byte("1")},
		store.Record{Kind: "acct", Key: "c", Value: []byte("3")},
		store.Record{Kind: "acct", Key: "d", Value: []byte("4")},
		store.Record{Kind: "acct0", Key: "a", Value: []byte("x")},
		store.Record{Kind: "acc", Key: "tz", Value: []byte("y")},
	)
	commit(t, s, store.Record{Kind: "acct", Key: "c"})
	scan := func(from, to string, stopAfter int) string {
		t.Helper()
		var got []string
		err := sc.Scan(context.Background(), "acct", from, to, func(k string, v []byte) (bool, error) {
			got = append(got, k+"="+string(v))
			return len(got) < stopAfter, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(got, ",")
	}
	for _, c := range []struct {
		from, to string
		stop     int
		want     string
	}{
		{"", "", 99, "a=1,b=2,d=4"},
		{"b", "", 99, "b=2,d=4"},
		{"a\x00", "d", 99, "b=2"},
		{"", "", 2, "a=1,b=2"},
		{"e", "", 99, ""},
	} {
		if got := scan(c.from, c.to, c.stop); got != c.want {
			t.Errorf("Scan [%q, %q) stopping after %d: %s, want %s", c.from, c.to, c.stop, got, c.want)
		}
	}
}

func load(t *testing.T, s store.Store, kind string) map[string]string {
	t.Helper()
	m := map[string]string{}
	var keys []string
	if err := s.Load(context.Background(), kind, func(k string, v []byte) error {
		m[k] = string(v)
		keys = append(keys, k)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !sort.StringsAreSorted(keys) {
		t.Errorf("Load(%s) not in key order: %v", kind, keys)
	}
	return m
}

func commit(t *testing.T, s store.Store, recs ...store.Record) {
	t.Helper()
	if err := s.Commit(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
}

func roundTrip(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	commit(t, s, store.Record{Kind: "task", Key: "a", Value: []byte("1")}, store.Record{Kind: "task", Key: "b", Value: []byte("2")})
	v, ok, err := s.Get(ctx, "task", "a")
	if err != nil || !ok || string(v) != "1" {
		t.Fatalf("Get a = %q %v %v", v, ok, err)
	}
	commit(t, s, store.Record{Kind: "task", Key: "a", Value: []byte("1b")}, store.Record{Kind: "task", Key: "b"})
	if _, ok, _ := s.Get(ctx, "task", "b"); ok {
		t.Error("b survived its delete")
	}
	if got := load(t, s, "task"); len(got) != 1 || got["a"] != "1b" {
		t.Errorf("Load = %v", got)
	}
	// An empty value is a value, not a delete.
	commit(t, s, store.Record{Kind: "task", Key: "empty", Value: []byte{}})
	if v, ok, _ := s.Get(ctx, "task", "empty"); !ok || len(v) != 0 {
		t.Errorf("empty value: %q %v", v, ok)
	}
	// Deleting what does not exist is fine.
	commit(t, s, store.Record{Kind: "task", Key: "never"})
	// The value returned by Get is the caller's.
	v, _, _ = s.Get(ctx, "task", "a")
	v[0] = 'X'
	if v2, _, _ := s.Get(ctx, "task", "a"); string(v2) != "1b" {
		t.Errorf("Get returned shared memory: %q", v2)
	}
}

func atomicBatch(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	defer s.Close()
	var recs []store.Record
	for i := 0; i < 1000; i++ {
		recs = append(recs, store.Record{Kind: "task", Key: fmt.Sprintf("k%04d", i), Value: []byte(fmt.Sprint(i))})
	}
	// Later records win within one batch.
	recs = append(recs, store.Record{Kind: "task", Key: "k0000", Value: []byte("last")})
	commit(t, s, recs...)
	got := load(t, s, "task")
	if len(got) != 1000 || got["k0000"] != "last" || got["k0999"] != "999" {
		t.Errorf("batch: %d keys, k0000=%q", len(got), got["k0000"])
	}
	// A batch with one bad record writes nothing.
	bad := []store.Record{{Kind: "task", Key: "fine", Value: []byte("x")}, {Kind: "", Key: "x", Value: []byte("x")}}
	if err := s.Commit(context.Background(), bad); err == nil {
		t.Fatal("a batch with an empty kind was accepted")
	}
	if _, ok, _ := s.Get(context.Background(), "task", "fine"); ok {
		t.Error("half of a rejected batch was written")
	}
}

func reopen(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	big := bytes.Repeat([]byte("v"), 1<<20)
	commit(t, s, store.Record{Kind: "node", Key: "n1", Value: []byte("one")}, store.Record{Kind: "node", Key: "big", Value: big})
	commit(t, s, store.Record{Kind: "node", Key: "n2", Value: []byte("two")})
	commit(t, s, store.Record{Kind: "node", Key: "n2"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	defer s.Close()
	got := load(t, s, "node")
	if len(got) != 2 || got["n1"] != "one" || got["big"] != string(big) {
		t.Errorf("after reopen: %d keys, n1=%q", len(got), got["n1"])
	}
}

func concurrent(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := open(t, dir)
	const writers, each = 16, 50
	var wg sync.WaitGroup
	errc := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r := store.Record{Kind: "task", Key: fmt.Sprintf("w%02d-%03d", w, i), Value: []byte(fmt.Sprint(w, i))}
				if err := s.Commit(context.Background(), []store.Record{r}); err != nil {
					errc <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	s.Close()
	s = open(t, dir)
	defer s.Close()
	if got := load(t, s, "task"); len(got) != writers*each {
		t.Errorf("%d of %d concurrent commits survived", len(got), writers*each)
	}
}

func badInput(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	defer s.Close()
	ctx := context.Background()
	cases := []struct {
		rec   store.Record
		field string
		code  errs.Code
	}{
		{store.Record{Kind: "", Key: "k", Value: []byte("v")}, "kind", errs.InvalidArgument},
		{store.Record{Kind: "a/b", Key: "k", Value: []byte("v")}, "kind", errs.InvalidArgument},
		{store.Record{Kind: "task", Key: "", Value: []byte("v")}, "key", errs.InvalidArgument},
		{store.Record{Kind: "task", Key: "a\x00b", Value: []byte("v")}, "key", errs.InvalidArgument},
		{store.Record{Kind: "task", Key: string(bytes.Repeat([]byte("k"), store.MaxKeyLen+1)), Value: []byte("v")}, "key", errs.InvalidArgument},
		{store.Record{Kind: "task", Key: "k", Value: make([]byte, store.MaxValueLen+1)}, "value", errs.TooLarge},
	}
	for _, c := range cases {
		err := s.Commit(ctx, []store.Record{c.rec})
		if errs.CodeOf(err) != c.code || errs.FieldOf(err) != c.field {
			t.Errorf("Commit(%q/%.20q): got %v, want %s on %s", c.rec.Kind, c.rec.Key, err, c.code, c.field)
		}
	}
	if _, _, err := s.Get(ctx, "", "k"); errs.CodeOf(err) != errs.InvalidArgument {
		t.Errorf("Get with empty kind: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Commit(cctx, []store.Record{{Kind: "task", Key: "late", Value: []byte("v")}}); err == nil {
		t.Error("a commit with a cancelled context succeeded")
	}
	if _, ok, _ := s.Get(ctx, "task", "late"); ok {
		t.Error("a cancelled commit was written")
	}
	if err := s.Commit(ctx, nil); err != nil {
		t.Errorf("an empty commit: %v", err)
	}
	stop := errors.New("stop")
	commit(t, s, store.Record{Kind: "task", Key: "a", Value: []byte("1")}, store.Record{Kind: "task", Key: "b", Value: []byte("2")})
	n := 0
	if err := s.Load(ctx, "task", func(string, []byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("Load must stop at fn's error: %v after %d", err, n)
	}
}

func closed(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	ctx := context.Background()
	if err := s.Commit(ctx, []store.Record{{Kind: "task", Key: "k", Value: []byte("v")}}); errs.CodeOf(err) != errs.Unavailable {
		t.Errorf("Commit after Close: %v", err)
	}
	if _, _, err := s.Get(ctx, "task", "k"); errs.CodeOf(err) != errs.Unavailable {
		t.Errorf("Get after Close: %v", err)
	}
	if err := s.Load(ctx, "task", func(string, []byte) error { return nil }); errs.CodeOf(err) != errs.Unavailable {
		t.Errorf("Load after Close: %v", err)
	}
}

func kinds(t *testing.T, open Opener) {
	s := open(t, t.TempDir())
	defer s.Close()
	// "task" and "tasks" must not see each other's keys, nor "task\x01".
	commit(t, s,
		store.Record{Kind: "task", Key: "x", Value: []byte("1")},
		store.Record{Kind: "tasks", Key: "y", Value: []byte("2")},
		store.Record{Kind: "tas", Key: "z", Value: []byte("3")},
	)
	if got := load(t, s, "task"); len(got) != 1 || got["x"] != "1" {
		t.Errorf("task: %v", got)
	}
	if got := load(t, s, "tasks"); len(got) != 1 || got["y"] != "2" {
		t.Errorf("tasks: %v", got)
	}
	if got := load(t, s, "queue"); len(got) != 0 {
		t.Errorf("queue: %v", got)
	}
}
