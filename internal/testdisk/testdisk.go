// Package testdisk gives tests real small filesystems (a tmpfs mounted for
// one test, as root, filled or freed by the test) and damages a store's
// write-ahead logs as a crash or a bad disk would. A test that cannot run
// here skips with the reason, except under CI=true, where it fails: CI
// must run it.
package testdisk

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// SkipOrFail skips t with the reason, or fails it under CI=true.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: this test must run, but: %s", msg)
	}
	t.Skip(msg)
}

// MountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted
// in t.Cleanup.
func MountTmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		SkipOrFail(t, "mounting a tmpfs needs root (running as uid %d): run the tests as root", os.Geteuid())
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		SkipOrFail(t, "cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Free is the free bytes of dir's filesystem for an unprivileged writer.
func Free(t testing.TB, dir string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// Fill writes a file in dir that leaves about leave bytes free (0: fills
// the filesystem) and returns its path; removing it frees the space.
func Fill(t testing.TB, dir string, leave int64) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	budget := Free(t, dir) + 1<<20 // bounds the loop even if free space did not drop
	for {
		left := Free(t, dir) - leave
		if left <= 0 || budget <= 0 {
			return path
		}
		budget -= int64(len(buf))
		n := min(int64(len(buf)), left)
		if _, err := f.Write(buf[:n]); err != nil {
			return path // full
		}
	}
}

// Logs are the write-ahead logs (*.log) of a store's data dir, oldest
// first (Pebble numbers them in order, zero-padded).
func Logs(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// NewestLog is the path of a store's newest write-ahead log.
func NewestLog(t testing.TB, dir string) string {
	t.Helper()
	l := Logs(t, dir)
	if len(l) == 0 {
		t.Fatalf("no write-ahead log in %s", dir)
	}
	return l[len(l)-1]
}

// Damage writes b at the middle of the file at path and returns the offset.
func Damage(t testing.TB, path string, b []byte) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	off := fi.Size() / 2
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	return off
}

// CutToHalf truncates the file at path to half its size.
func CutToHalf(t testing.TB, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()/2); err != nil {
		t.Fatal(err)
	}
}
