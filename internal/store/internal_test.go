package store

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/hetsched/hetsched/internal/errs"
)

// faults fails writes to paths containing match while on.
type faults struct {
	on    atomic.Bool
	match string
	err   error
	kinds map[errorfs.OpKind]bool
	hits  atomic.Int64
}

func (f *faults) String() string { return "faults" }

func (f *faults) MaybeError(op errorfs.Op) error {
	if f.on.Load() && f.kinds[op.Kind] && strings.Contains(op.Path, f.match) {
		f.hits.Add(1)
		return f.err
	}
	return nil
}

var writeKinds = map[errorfs.OpKind]bool{errorfs.OpFileWrite: true, errorfs.OpFileWriteAt: true,
	errorfs.OpFileSync: true, errorfs.OpFileSyncData: true, errorfs.OpFileSyncTo: true}

func commitKeys(t *testing.T, d *Disk, prefix string, n int) []string {
	t.Helper()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%05d", prefix, i)
		if err := d.Commit(context.Background(), []Record{{Kind: "task", Key: keys[i], Value: []byte(strings.Repeat("v", 200))}}); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// waitFor polls cond until it holds, failing after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestFailedTableWriteBacksOff fails every table write (a flush on a full
// disk): the store does not fail, commits go on, Pebble's immediate flush
// retries are slowed by the backoff, and the flush succeeds once space is
// back, without a restart.
func TestFailedTableWriteBacksOff(t *testing.T) {
	f := &faults{match: ".sst", err: syscall.ENOSPC, kinds: writeKinds}
	d, err := OpenDisk(t.TempDir(), DiskOptions{FS: errorfs.Wrap(vfs.Default, f)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	commitKeys(t, d, "a", 50)
	f.on.Store(true)
	start := time.Now()
	flushed, err := d.db.AsyncFlush()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "three failed flush attempts", func() bool { return f.hits.Load() >= 3 })
	if el := time.Since(start); el < tableBackoffMin*3 {
		t.Errorf("three flush attempts in %s: no backoff", el)
	}
	if d.Err() != nil {
		t.Fatalf("a failed table write failed the store: %v", d.Err())
	}
	commitKeys(t, d, "b", 10)
	f.on.Store(false)
	select {
	case <-flushed:
	case <-time.After(30 * time.Second):
		t.Fatal("the flush did not succeed after space came back")
	}
	if d.Err() != nil {
		t.Fatal(d.Err())
	}
}

// TestFailedManifestWriteFailsTheStore fails the MANIFEST's writes during a
// flush: Pebble would call Fatalf with DB.mu held and a half-written
// MANIFEST; the store fails instead, reads go on.
func TestFailedManifestWriteFailsTheStore(t *testing.T) {
	defer SetFailedCloseWait(100 * time.Millisecond)()
	f := &faults{match: "MANIFEST-", err: syscall.EIO, kinds: writeKinds}
	d, err := OpenDisk(t.TempDir(), DiskOptions{FS: errorfs.Wrap(vfs.Default, f)})
	if err != nil {
		t.Fatal(err)
	}
	keys := commitKeys(t, d, "m", 20)
	f.on.Store(true)
	if _, err := d.db.AsyncFlush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-d.fail.ch:
	case <-time.After(10 * time.Second):
		t.Fatal("a failed MANIFEST write did not fail the store")
	}
	if err := d.Commit(context.Background(), []Record{{Kind: "task", Key: "x", Value: []byte("x")}}); err == nil || errs.CodeOf(err) != errs.Unavailable {
		t.Errorf("commit after the MANIFEST failed: %v", err)
	}
	for _, k := range keys {
		if _, ok, err := d.Get(context.Background(), "task", k); err != nil || !ok {
			t.Fatalf("Get(%s) after the failure: %v %v", k, ok, err)
		}
	}
	if err := d.Close(); err == nil {
		t.Error("Close of a failed store returned nil")
	}
}

// TestFatalfParks checks Fatalf records the failure and never returns.
func TestFatalfParks(t *testing.T) {
	f := newFailure(slog.New(slog.DiscardHandler))
	lg := pebbleLogger{l: slog.New(slog.DiscardHandler), lim: newLimiter(), fail: f}
	var returned atomic.Bool
	go func() {
		lg.Fatalf("pebble: fatal commit error: %v", syscall.ENOSPC)
		returned.Store(true)
	}()
	select {
	case <-f.ch:
	case <-time.After(5 * time.Second):
		t.Fatal("Fatalf did not set the failure")
	}
	if err := f.get(); errs.CodeOf(err) != errs.Unavailable || !strings.Contains(err.Error(), "fatal commit error") {
		t.Errorf("failure %v", err)
	}
	for range 100 {
		runtime.Gosched()
	}
	if returned.Load() {
		t.Fatal("Fatalf returned")
	}
}

// TestLimiter lets one message of a kind through per 10 s and counts the
// others.
func TestLimiter(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLimiter()
	l.now = func() time.Time { return now }
	logged := 0
	for i := range 1000 {
		if _, ok := l.allow("[JOB %d] flush error: %s", []any{i, "write 000123.sst: no space left on device"}); ok {
			logged++
		}
	}
	if logged != 1 {
		t.Errorf("%d of 1000 identical messages logged in one window, want 1", logged)
	}
	if _, ok := l.allow("compaction error: %s", []any{"EIO"}); !ok {
		t.Error("a different message was suppressed")
	}
	now = now.Add(logEvery)
	if _, ok := l.allow("[JOB %d] flush error: %s", []any{7, "x"}); !ok {
		t.Error("a message with other text is another kind, but it was suppressed")
	}
	msg, ok := l.allow("[JOB %d] flush error: %s", []any{7, "write 000124.sst: no space left on device"})
	if !ok || !strings.Contains(msg, "999 similar messages suppressed") {
		t.Errorf("after the window: %q %v", msg, ok)
	}
	for i := range 2 * maxLimiterKeys {
		l.allow("kind %s", []any{strings.Repeat("x", i)})
	}
	if len(l.seen) > maxLimiterKeys {
		t.Errorf("limiter holds %d kinds, bound %d", len(l.seen), maxLimiterKeys)
	}
}

// TestFailedLogRotation fails the log rotation of a flush (creating the
// next log, or syncing the old one as it is closed). Pebble panics there
// with DB.mu unlocked, which would end the process with "unlock of
// unlocked mutex"; the store fails instead and reads go on.
func TestFailedLogRotation(t *testing.T) {
	for name, kinds := range map[string]map[errorfs.OpKind]bool{
		"create": {errorfs.OpCreate: true, errorfs.OpReuseForWrite: true},
		"sync":   {errorfs.OpFileSync: true, errorfs.OpFileSyncData: true, errorfs.OpFileSyncTo: true},
	} {
		t.Run(name, func(t *testing.T) {
			defer SetFailedCloseWait(100 * time.Millisecond)()
			f := &faults{match: ".log", err: syscall.ENOSPC, kinds: kinds}
			d, err := OpenDisk(t.TempDir(), DiskOptions{FS: errorfs.Wrap(vfs.Default, f)})
			if err != nil {
				t.Fatal(err)
			}
			keys := commitKeys(t, d, "r", 30)
			f.on.Store(true)
			go d.db.AsyncFlush() // rotates the log on this goroutine, which the fault parks
			select {
			case <-d.fail.ch:
			case <-time.After(10 * time.Second):
				t.Fatal("a failed log rotation did not fail the store")
			}
			if errs.CodeOf(d.Err()) != errs.InsufficientStorage {
				t.Errorf("Err() = %v", d.Err())
			}
			if err := d.Commit(context.Background(), []Record{{Kind: "task", Key: "x", Value: []byte("x")}}); err == nil {
				t.Error("commit after a failed rotation succeeded")
			}
			for _, k := range keys {
				if _, ok, err := d.Get(context.Background(), "task", k); err != nil || !ok {
					t.Fatalf("Get(%s) after the failure: %v %v", k, ok, err)
				}
			}
			if err := d.Close(); err == nil {
				t.Error("Close of a failed store returned nil")
			}
		})
	}
}
