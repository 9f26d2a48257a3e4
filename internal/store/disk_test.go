package store_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store"
	"github.com/hetsched/hetsched/internal/testdisk"
)

// fakeDisk is a StatFS whose numbers the test sets.
type fakeDisk struct {
	free, total atomic.Uint64
	fail        atomic.Bool
}

func (f *fakeDisk) statfs(string) (uint64, uint64, error) {
	if f.fail.Load() {
		return 0, 0, errors.New("statfs: injected failure")
	}
	return f.free.Load(), f.total.Load(), nil
}

// waitSpace polls Space until cond holds (the cache refreshes every
// ~100 ms), failing after 5 s.
func waitSpace(t *testing.T, d *store.Disk, what string, cond func(store.Space) bool) store.Space {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := d.Space()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: Space() still %+v", what, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestSpaceReserve: Low follows free space against the reserve without a
// reopen, the default reserve is min(1 GiB, 5 %), and Commit itself does
// not refuse below the reserve.
func TestSpaceReserve(t *testing.T) {
	fd := &fakeDisk{}
	fd.total.Store(100 << 30)
	fd.free.Store(50 << 30)
	rec := &logRecorder{}
	d, err := store.OpenDisk(t.TempDir(), store.DiskOptions{StatFS: fd.statfs, Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if s := d.Space(); s.Low || s.Reserve != 1<<30 || s.Free != 50<<30 || s.Total != 100<<30 || s.Err != nil {
		t.Fatalf("Space() = %+v", s)
	}
	fd.free.Store(512 << 20)
	waitSpace(t, d, "free below the reserve", func(s store.Space) bool { return s.Low })
	if err := d.Commit(context.Background(), []store.Record{{Kind: "task", Key: "k", Value: []byte("v")}}); err != nil {
		t.Errorf("Commit below the reserve: %v (the engine refuses API writes, not the store)", err)
	}
	if n := len(rec.find(slog.LevelWarn, "below the reserve")); n != 1 {
		t.Errorf("%d Warn lines about the reserve, want 1", n)
	}
	fd.free.Store(2 << 30)
	waitSpace(t, d, "space freed", func(s store.Space) bool { return !s.Low })
	fd.fail.Store(true)
	s := waitSpace(t, d, "statfs failing", func(s store.Space) bool { return s.Err != nil })
	if s.Free != 2<<30 || s.Low {
		t.Errorf("a failed statfs must keep the last numbers: %+v", s)
	}
	fd.fail.Store(false)
	waitSpace(t, d, "statfs back", func(s store.Space) bool { return s.Err == nil })
}

func TestSpaceReserveSettings(t *testing.T) {
	fd := &fakeDisk{}
	fd.total.Store(1 << 30)
	fd.free.Store(1 << 29)
	for _, c := range []struct {
		reserve int64
		want    uint64
	}{{0, 53687090}, {10 << 20, 10 << 20}} {
		d, err := store.OpenDisk(t.TempDir(), store.DiskOptions{StatFS: fd.statfs, Reserve: c.reserve})
		if err != nil {
			t.Fatal(err)
		}
		if s := d.Space(); s.Reserve != c.want {
			t.Errorf("Reserve %d on a 1 GiB disk: %d, want %d", c.reserve, s.Reserve, c.want)
		}
		d.Close()
	}
	_, err := store.OpenDisk(t.TempDir(), store.DiskOptions{Reserve: -1})
	if errs.CodeOf(err) != errs.InvalidArgument || errs.FieldOf(err) != "disk-reserve" {
		t.Errorf("negative reserve: %v", err)
	}
	fd.fail.Store(true)
	d, err := store.OpenDisk(t.TempDir(), store.DiskOptions{StatFS: fd.statfs})
	if err != nil {
		t.Fatalf("a store whose free space cannot be read must still open: %v", err)
	}
	if s := d.Space(); s.Err == nil || s.Low {
		t.Errorf("Space() with statfs failing: %+v", s)
	}
	d.Close()
}

// TestOpenDiskFullFake: OpenDisk refuses at once when (fake) statfs says
// 12 KiB are free.
func TestOpenDiskFullFake(t *testing.T) {
	fd := &fakeDisk{}
	fd.total.Store(20 << 20)
	fd.free.Store(12 << 10)
	start := time.Now()
	_, err := store.OpenDisk(t.TempDir(), store.DiskOptions{StatFS: fd.statfs})
	if errs.CodeOf(err) != errs.InsufficientStorage || !strings.Contains(err.Error(), "the disk is full (12.0 KiB free") {
		t.Fatalf("OpenDisk on a full disk: %v", err)
	}
	t.Logf("refused in %s: %v", time.Since(start), err)
}

// TestOpenDiskOnFullTmpfs fills a real 4 MiB filesystem under a closed
// store (and an empty dir): OpenDisk fails within seconds with one clear
// message, and opens once space is freed.
func TestOpenDiskOnFullTmpfs(t *testing.T) {
	mnt := testdisk.MountTmpfs(t, 4<<20)
	dir := filepath.Join(mnt, "db")
	s := openDisk(t, dir)
	keys := commitN(t, s, "full", 50, 200)
	s.Close()
	filler := testdisk.Fill(t, mnt, 0)
	for _, d := range []string{dir, filepath.Join(mnt, "fresh")} {
		start := time.Now()
		_, err := store.OpenDisk(d, store.DiskOptions{})
		el := time.Since(start)
		if errs.CodeOf(err) != errs.InsufficientStorage || !strings.Contains(err.Error(), "the disk is full") || !strings.Contains(err.Error(), "free space") {
			t.Fatalf("OpenDisk(%s) on a full disk: %v", d, err)
		}
		if el > 3*time.Second {
			t.Errorf("OpenDisk took %s to refuse", el)
		}
		t.Logf("OpenDisk(%s) refused in %s: %v", filepath.Base(d), el, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s = openDisk(t, dir)
	defer s.Close()
	checkPrefix(t, loadTasks(t, s), keys, len(keys))
}

// TestOpenDiskReadOnly: a read-only data dir fails fast with one clear
// message. As root (who ignores permissions) the dir is a tmpfs remounted
// read-only; otherwise it is chmod 0555.
func TestOpenDiskReadOnly(t *testing.T) {
	var dir, want string
	if os.Geteuid() == 0 {
		mnt := testdisk.MountTmpfs(t, 4<<20)
		dir, want = filepath.Join(mnt, "db"), "read-only"
		s := openDisk(t, dir)
		commitN(t, s, "ro", 5, 10)
		s.Close()
		if out, err := exec.Command("mount", "-o", "remount,ro", mnt).CombinedOutput(); err != nil {
			testdisk.SkipOrFail(t, "cannot remount read-only: %v: %s", err, out)
		}
	} else {
		dir, want = t.TempDir(), "not writable"
		s := openDisk(t, dir)
		s.Close()
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	start := time.Now()
	_, err := store.OpenDisk(dir, store.DiskOptions{})
	el := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), want) || errs.FieldOf(err) != "data-dir" {
		t.Fatalf("OpenDisk on a read-only dir: %v", err)
	}
	if el > 3*time.Second {
		t.Errorf("OpenDisk took %s to refuse", el)
	}
	t.Logf("refused in %s: %v", el, err)
}

// fillChildEnv makes the test binary fill a disk by committing (TestMain).
const fillChildEnv = "HETSCHED_STORE_FILL_CHILD"

// fillChild commits 4 KiB random values from 4 goroutines until commits
// fail, printing "ack KEY" for each success, then checks the failed store
// and prints what it saw; it exits 0 unless something is wrong.
func fillChild(dir string) {
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
		mu.Unlock()
	}
	d, err := store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		say("open %v", err)
		os.Exit(2)
	}
	start := time.Now()
	var wg sync.WaitGroup
	var first atomic.Int64
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				key := fmt.Sprintf("w%d-%06d", w, i)
				v := make([]byte, 4096) // incompressible, naming its key
				rand.Read(v)
				copy(v, key)
				if err := d.Commit(context.Background(), []store.Record{{Kind: "task", Key: key, Value: v}}); err != nil {
					first.CompareAndSwap(0, int64(time.Since(start)))
					say("fail %s %v", errs.CodeOf(err), err)
					return
				}
				say("ack %s", key)
			}
		}()
	}
	wg.Wait()
	say("first-failure-after %s", time.Duration(first.Load()))
	say("err %s", errs.CodeOf(d.Err()))
	if _, ok, err := d.Get(context.Background(), "task", "w0-000000"); err != nil || !ok {
		say("get failed %v %v", ok, err)
	} else {
		say("get ok")
	}
	say("later %s", errs.CodeOf(d.Commit(context.Background(), []store.Record{{Kind: "task", Key: "later", Value: []byte("x")}})))
	s := d.Space()
	say("space free=%d low=%v", s.Free, s.Low)
	cs := time.Now()
	cerr := d.Close()
	say("close %s %v", time.Since(cs).Round(time.Millisecond), cerr)
	say("done")
}

// TestFillDiskWhileCommitting fills a real 32 MiB filesystem (20 MiB of it
// taken by a ballast file) by committing in a child process: commits fail
// with insufficient_storage, the process does not crash and its reads still
// work; once the ballast is removed, the store opens with every commit that
// was acknowledged.
func TestFillDiskWhileCommitting(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fills a disk from a child process")
	}
	mnt := testdisk.MountTmpfs(t, 32<<20)
	ballast := filepath.Join(mnt, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 20<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "db")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), fillChildEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the child failed: %v\nstderr: %s\nstdout tail: %s", err, stderr.String(), tail(string(out), 2000))
	}
	if strings.Contains(stderr.String(), "panic") {
		t.Fatalf("the child panicked:\n%s", stderr.String())
	}
	var acked []string
	lines := map[string]string{}
	for _, l := range strings.Split(string(out), "\n") {
		word, rest, _ := strings.Cut(l, " ")
		if word == "ack" {
			acked = append(acked, rest)
		} else if word != "" {
			lines[word] = rest
		}
	}
	t.Logf("child: %d commits acknowledged; %v", len(acked), lines)
	for word, want := range map[string]string{"fail": "insufficient_storage", "err": "insufficient_storage", "get": "ok", "later": "insufficient_storage", "close": "", "done": ""} {
		got, ok := lines[word]
		if !ok || !strings.HasPrefix(got, want) {
			t.Errorf("child line %q = %q, want it to start with %q", word, got, want)
		}
	}
	if len(acked) < 100 {
		t.Fatalf("only %d commits before the disk was full", len(acked))
	}
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	rec := &logRecorder{}
	d, err := store.OpenDisk(dir, store.DiskOptions{Logger: slog.New(rec)})
	if err != nil {
		t.Fatalf("reopen after freeing space: %v", err)
	}
	defer d.Close()
	t.Logf("reopened: recovery %+v", d.Recovery())
	found := loadTasks(t, d)
	for _, k := range acked {
		if !found[k] {
			t.Fatalf("acknowledged %s lost (%d of %d present)", k, len(found), len(acked))
		}
	}
	if err := d.Commit(context.Background(), []store.Record{{Kind: "task", Key: "after", Value: []byte("x")}}); err != nil {
		t.Errorf("commit after freeing space and reopening: %v", err)
	}
}

func tail(s string, n int) string { return s[max(0, len(s)-n):] }
