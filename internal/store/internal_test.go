package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
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

// replayedLogs opens dir read-only and returns the numbers of the logs
// Pebble replays (its "[JOB n] WAL ... stopped reading" lines).
func replayedLogs(t *testing.T, dir string) []uint64 {
	t.Helper()
	lg := &infoLogger{}
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	return lg.logs
}

type infoLogger struct {
	mu   sync.Mutex
	logs []uint64
}

func (l *infoLogger) Infof(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	_, rest, ok := strings.Cut(msg, "] WAL ")
	if !ok || !strings.Contains(msg, "stopped reading") {
		return
	}
	num, _, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil {
		panic(msg)
	}
	l.mu.Lock()
	l.logs = append(l.logs, n)
	l.mu.Unlock()
}
func (l *infoLogger) Errorf(string, ...any) {}
func (l *infoLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

// TestManifestLogNumberMatchesPebble checks the MANIFEST decoder against
// Pebble itself: after flushes, compactions and reopens, the logs it calls
// live are exactly those Pebble replays.
func TestManifestLogNumberMatchesPebble(t *testing.T) {
	dir := t.TempDir()
	for cycle := range 8 {
		d, err := OpenDisk(dir, DiskOptions{})
		if err != nil {
			t.Fatal(err)
		}
		commitKeys(t, d, fmt.Sprintf("c%d", cycle), 100+cycle*50)
		switch cycle % 4 {
		case 1:
			if err := d.db.Flush(); err != nil {
				t.Fatal(err)
			}
			commitKeys(t, d, fmt.Sprintf("after-flush-%d", cycle), 20)
		case 2:
			if err := d.db.Compact(context.Background(), []byte("a"), []byte("z"), false); err != nil {
				t.Fatal(err)
			}
		case 3:
			if _, err := d.db.AsyncFlush(); err != nil { // a rotation, maybe a flush in flight at close
				t.Fatal(err)
			}
			commitKeys(t, d, fmt.Sprintf("after-rotate-%d", cycle), 20)
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		sf, err := readStore(vfs.Default, dir)
		if err != nil || !sf.MinLogKnown {
			t.Fatalf("cycle %d: %v %+v", cycle, err, sf)
		}
		var ours []uint64
		for _, l := range sf.live() {
			ours = append(ours, l.Num)
		}
		if theirs := replayedLogs(t, dir); !slices.Equal(ours, theirs) {
			t.Fatalf("cycle %d: live logs %v, Pebble replays %v (all logs %+v, MANIFEST log number %d)", cycle, ours, theirs, sf.Logs, sf.MinLog)
		}
	}
}

// TestDamagedOlderLog builds two live logs (a flush that fails keeps the
// older one live), cuts the older one: OpenDisk refuses it although it is
// not the newest (Pebble would too, but without naming it), and Repair
// keeps its records before the cut and sets the newer log aside: its
// commits came after the lost ones.
func TestDamagedOlderLog(t *testing.T) {
	dir := t.TempDir()
	f := &faults{match: ".sst", err: syscall.ENOSPC, kinds: writeKinds}
	d, err := OpenDisk(dir, DiskOptions{FS: errorfs.Wrap(vfs.Default, f)})
	if err != nil {
		t.Fatal(err)
	}
	older := commitKeys(t, d, "old", 200)
	f.on.Store(true)
	if _, err := d.db.AsyncFlush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a failed flush", func() bool { return f.hits.Load() > 0 })
	newer := commitKeys(t, d, "new", 50)
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	sf, err := readStore(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	live := sf.live()
	if len(live) < 2 {
		t.Fatalf("want two live logs, have %+v (min %d)", sf.Logs, sf.MinLog)
	}
	oldPath := filepath.Join(dir, live[len(live)-2].Name)
	newPath := filepath.Join(dir, live[len(live)-1].Name)
	st, _ := os.Stat(oldPath)
	if err := os.Truncate(oldPath, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	_, err = OpenDisk(dir, DiskOptions{})
	var de *DamageError
	if !errors.As(err, &de) || de.File != filepath.Base(oldPath) || !strings.Contains(err.Error(), "not the newest") {
		t.Fatalf("OpenDisk with a cut older log: %v", err)
	}
	r, err := Check(dir, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Opens || len(r.Plan) != 3 || !strings.Contains(r.Plan[0], "set "+filepath.Base(newPath)+" aside") || !strings.Contains(r.Plan[2], "set ACKED aside") {
		t.Fatalf("check:\n%s", r)
	}
	kept := 0
	for _, w := range r.WALs {
		if w.File == filepath.Base(oldPath) {
			kept = w.Records
		}
	}
	fixed, err := Repair(dir, RepairOptions{Yes: true})
	if err != nil || !fixed.Opens {
		t.Fatalf("repair: %v\n%s", err, fixed)
	}
	t.Logf("repair:\n%s", fixed)
	if m, _ := filepath.Glob(newPath + ".damaged-*"); len(m) != 1 {
		t.Errorf("the newer log is not kept aside: %v", m)
	}
	d, err = OpenDisk(dir, DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i, k := range append(older, newer...) {
		_, ok, err := d.Get(context.Background(), "task", k)
		if err != nil || ok != (i < kept) {
			t.Fatalf("record %d (%s): present %v, want %v (%v)", i, k, ok, i < kept, err)
		}
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

// TestRecycledLogsAreNotTorn flushes often, so that Pebble recycles log
// files (a new log overwrites an old one's file, whose older data remains
// past the new log's end), and takes crash images: a log ending in a
// recycled file's old data lost nothing, so it must open with no torn tail
// reported and no damage.
func TestRecycledLogsAreNotTorn(t *testing.T) {
	mem := vfs.NewCrashableMem()
	statfs := func(string) (uint64, uint64, error) { return 1 << 40, 1 << 41, nil }
	d, err := OpenDisk("/db", DiskOptions{FS: mem, StatFS: statfs})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	recycled := 0
	for round := range 12 {
		commitKeys(t, d, fmt.Sprintf("r%d", round), 2000-round*150)
		if err := d.db.Flush(); err != nil {
			t.Fatal(err)
		}
		commitKeys(t, d, fmt.Sprintf("after%d", round), 1+round*7)
		for _, pct := range []int{0, 100} {
			clone := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(uint64(round), 1))})
			sf, err := readStore(clone, "/db")
			if err != nil {
				t.Fatal(err)
			}
			live := sf.live()
			newest := scanWAL(clone, "/db", live[len(live)-1].Name, live[len(live)-1].Num)
			if newest.End == endStale {
				recycled++
			}
			c, err := OpenDisk("/db", DiskOptions{FS: clone, StatFS: statfs})
			if err != nil {
				t.Fatalf("round %d, %d%% unsynced kept: %v", round, pct, err)
			}
			if rec := c.Recovery(); rec.TornTail {
				t.Errorf("round %d, %d%%: torn tail reported, newest log %+v", round, pct, newest)
			}
			c.Close()
		}
	}
	if recycled == 0 {
		t.Error("no crash image ended in a recycled file's old data: the test does not test that")
	}
	t.Logf("%d of 24 images ended in a recycled file's old data", recycled)
}

// TestCheckFindsDamagedTable flips bytes in a table: Check reports it.
func TestCheckFindsDamagedTable(t *testing.T) {
	dir := t.TempDir()
	d, err := OpenDisk(dir, DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	commitKeys(t, d, "t", 2000)
	if err := d.db.Flush(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	r, err := Check(dir, CheckOptions{})
	if err != nil || !r.OK() || r.Tables.Files == 0 {
		t.Fatalf("a sound store: %v\n%s", err, r)
	}
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	b, err := os.ReadFile(tables[0])
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 120; i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(tables[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err = Check(dir, CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.OK() || r.Tables.Err == "" || !strings.Contains(r.String(), "DAMAGED") {
		t.Fatalf("a damaged table is not reported:\n%s", r)
	}
	t.Logf("%s", r)
}

// TestApplyAfterCloseDoesNotPanic: once the store failed, Commit returns
// before its helper goroutine has run, and Close may close Pebble first;
// Pebble's Commit on a closed database panics, and that must come back as
// an error, never end the process (it did, once in three runs of the
// tmpfs fill test).
func TestApplyAfterCloseDoesNotPanic(t *testing.T) {
	d, err := OpenDisk(t.TempDir(), DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := d.db.NewBatch()
	if err := b.Set([]byte("task\x00k"), []byte("v"), nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.apply(b); err == nil {
		t.Fatal("a commit on a closed store returned nil")
	}
}
