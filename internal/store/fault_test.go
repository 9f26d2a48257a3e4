package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store"
)

// injector fails the operations of the given kinds on paths containing
// match with err, while on; it counts what it failed.
type injector struct {
	on    atomic.Bool
	kinds map[errorfs.OpKind]bool
	match string
	err   error
	hits  atomic.Int64
}

func (in *injector) String() string { return "test injector" }

func (in *injector) MaybeError(op errorfs.Op) error {
	if !in.on.Load() || !in.kinds[op.Kind] || !strings.Contains(op.Path, in.match) {
		return nil
	}
	in.hits.Add(1)
	return in.err
}

var (
	writeOps = map[errorfs.OpKind]bool{errorfs.OpFileWrite: true, errorfs.OpFileWriteAt: true}
	syncOps  = map[errorfs.OpKind]bool{errorfs.OpFileSync: true, errorfs.OpFileSyncData: true, errorfs.OpFileSyncTo: true}
)

// within runs f; if it has not returned after d, it marks the test failed
// and returns ok false (it may be called from any goroutine).
func within[T any](t *testing.T, d time.Duration, what string, f func() T) (v T, ok bool) {
	t.Helper()
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v := <-ch:
		return v, true
	case <-time.After(d):
		t.Errorf("%s did not return within %s", what, d)
		return v, false
	}
}

// TestFailedLogWriteFailsTheStore fails the write-ahead log's writes or
// syncs (ENOSPC, EIO) under a running store: the Commit that hits it and
// every later one return an error (never nil), nothing panics, Err() is
// set with the right code, reads go on, and Close returns within seconds.
func TestFailedLogWriteFailsTheStore(t *testing.T) {
	cases := []struct {
		name string
		ops  map[errorfs.OpKind]bool
		err  error
		code errs.Code
	}{
		{"write-ENOSPC", writeOps, syscall.ENOSPC, errs.InsufficientStorage},
		{"write-EIO", writeOps, syscall.EIO, errs.Unavailable},
		{"sync-EIO", syncOps, syscall.EIO, errs.Unavailable},
		{"sync-ENOSPC", syncOps, syscall.ENOSPC, errs.InsufficientStorage},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer store.SetFailedCloseWait(200 * time.Millisecond)()
			inj := &injector{kinds: c.ops, match: ".log", err: c.err}
			rec := &logRecorder{}
			dir := t.TempDir()
			d, err := store.OpenDisk(dir, store.DiskOptions{FS: errorfs.Wrap(vfs.Default, inj), Logger: slog.New(rec)})
			if err != nil {
				t.Fatal(err)
			}
			keys := commitN(t, d, "ok", 20, 100)
			inj.on.Store(true)

			// 8 commits race into the failure: each returns, none with a
			// nil error unless it was durable before the fault.
			var wg sync.WaitGroup
			var failed atomic.Int64
			var mu sync.Mutex
			acked := append([]string(nil), keys...)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					key := fmt.Sprintf("racer-%d", w)
					err, ok := within(t, 10*time.Second, "Commit during a log failure", func() error {
						return d.Commit(context.Background(), []store.Record{{Kind: "task", Key: key, Value: value(key, 100)}})
					})
					if !ok {
						return
					}
					if err != nil {
						failed.Add(1)
						if errs.CodeOf(err) != c.code {
							t.Errorf("commit error code %s, want %s: %v", errs.CodeOf(err), c.code, err)
						}
						return
					}
					mu.Lock()
					acked = append(acked, key)
					mu.Unlock()
				}()
			}
			wg.Wait()
			if failed.Load() == 0 {
				t.Fatal("every commit succeeded although the log fails")
			}
			if inj.hits.Load() == 0 {
				t.Fatal("the fault was never hit")
			}
			checkFailed(t, d, keys, c.code, c.err, rec)
			// What the files hold now is what a kill -9 would leave: every
			// commit that returned nil must be in it.
			image := copyDir(t, dir)
			cerr, _ := within(t, 5*time.Second, "Close of a failed store", d.Close)
			if cerr == nil || !strings.Contains(cerr.Error(), "exit the process") {
				t.Errorf("Close of a failed store: %v", cerr)
			}
			s := openDisk(t, image)
			defer s.Close()
			found := loadTasks(t, s)
			for _, k := range acked {
				if !found[k] {
					t.Errorf("%s was acknowledged but is not on disk", k)
				}
			}
		})
	}
}

// checkFailed checks a store whose log failed with cause: Err() says so
// with code, later commits fail fast, reads go on, one log line says it.
func checkFailed(t *testing.T, d *store.Disk, keys []string, code errs.Code, cause error, rec *logRecorder) {
	t.Helper()
	err := d.Err()
	if err == nil || errs.CodeOf(err) != code || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("Err() = %v, want code %s saying to restart", err, code)
	}
	var ee *errs.Error
	if !errors.As(err, &ee) {
		t.Errorf("Err() is not an *errs.Error: %T", err)
	}
	if !errors.Is(err, cause) {
		t.Errorf("Err() does not wrap %v: %v", cause, err)
	}
	start := time.Now()
	if err := d.Commit(context.Background(), []store.Record{{Kind: "task", Key: "later", Value: []byte("x")}}); err == nil || errs.CodeOf(err) != code {
		t.Errorf("a commit after the failure: %v", err)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("a commit after the failure took %s", el)
	}
	for _, k := range keys {
		v, ok, err := d.Get(context.Background(), "task", k)
		if err != nil || !ok || !strings.HasPrefix(string(v), k) {
			t.Fatalf("Get(%s) after the failure: %q %v %v", k, v, ok, err)
		}
	}
	if found := loadTasks(t, d); len(found) < len(keys) {
		t.Errorf("Load after the failure found %d records, want at least %d", len(found), len(keys))
	}
	if n := len(rec.find(slog.LevelError, "the store failed")); n != 1 {
		t.Errorf("%d log lines saying the store failed, want 1", n)
	}
}

// TestOpenDiskReadOnlyInjected opens on a filesystem that refuses every
// write with EROFS: one clear error, fast.
func TestOpenDiskReadOnlyInjected(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir)
	commitN(t, s, "ro", 5, 10)
	s.Close()
	inj := &injector{match: "", err: syscall.EROFS, kinds: map[errorfs.OpKind]bool{}}
	for k := errorfs.OpCreate; k <= errorfs.OpFileFlush; k++ {
		if k.ReadOrWrite() == errorfs.OpIsWrite {
			inj.kinds[k] = true
		}
	}
	inj.on.Store(true)
	start := time.Now()
	_, err := store.OpenDisk(dir, store.DiskOptions{FS: errorfs.Wrap(vfs.Default, inj)})
	el := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "read-only") || errs.FieldOf(err) != "data-dir" {
		t.Fatalf("OpenDisk on a read-only filesystem: %v", err)
	}
	if el > 2*time.Second {
		t.Errorf("OpenDisk took %s to fail", el)
	}
	t.Logf("failed in %s: %v", el, err)
}
