package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hetsched/hetsched/internal/errs"
)

// openMinFree is the free space OpenDisk wants beyond the logs it replays:
// a new log, a MANIFEST and an OPTIONS file. Replaying flushes the logs'
// data to tables, which needs up to their size again.
const openMinFree = 1 << 20

// OpenMinFree is the least free space the store opens with (plus the log
// it replays).
const OpenMinFree = openMinFree

// probeName is the file OpenDisk writes, syncs and removes to learn whether
// the data dir takes writes.
const probeName = ".hetsched-probe"

// OpenDisk opens (creating if needed) the store in dir. Opening replays the
// write-ahead log, so every commit acknowledged before a crash is there.
//
// Before Pebble opens, OpenDisk checks that dir takes writes (a probe
// write, fsync and remove: read-only and full disks fail within
// milliseconds with one clear message), that it has the space to replay
// the logs, and reads every log Pebble will replay: a torn tail of the
// newest (a crash) is truncated and reported (Recovery, a log line at
// Warn); any other damage refuses to open with a *DamageError naming the
// file and byte offset, since Pebble's replay would stop there and
// silently drop every later commit.
func OpenDisk(dir string, opt DiskOptions) (*Disk, error) {
	if dir == "" {
		return nil, errs.Invalid("data-dir", "a directory is required")
	}
	if opt.Reserve < 0 {
		return nil, errs.Invalid("disk-reserve", "must be 0 (the default) or a positive number of bytes, got %d", opt.Reserve)
	}
	lg := opt.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	fs := opt.FS
	if fs == nil {
		fs = vfs.Default
	}
	statfs := opt.StatFS
	if statfs == nil {
		statfs = fsStatFS(fs)
	}
	if err := prepareDir(fs, dir); err != nil {
		return nil, err
	}
	lock, err := lockDir(fs, dir)
	if err != nil {
		return nil, err
	}
	d, err := openLocked(dir, fs, statfs, uint64(opt.Reserve), lg, lock)
	if err != nil {
		lock.Close()
		return nil, err
	}
	return d, nil
}

func openLocked(dir string, fs vfs.FS, statfs StatFS, reserve uint64, lg *slog.Logger, lock *pebble.Lock) (*Disk, error) {
	if err := probe(fs, dir); err != nil {
		return nil, dirErr(dir, "write to", err, statfs)
	}
	rec, replay, err := checkLogs(fs, dir, lg)
	if err != nil {
		return nil, err
	}
	if free, _, err := statfs(dir); err == nil && free < openMinFree+replay {
		return nil, errs.New(errs.InsufficientStorage, "data-dir",
			"%s: the disk is full (%s free; the store needs at least %s to start, to replay %s of log): free space and start again",
			dir, FormatBytes(free), FormatBytes(openMinFree+replay), FormatBytes(replay))
	}
	d := &Disk{dir: dir, fail: newFailure(lg), lock: lock, recovery: rec}
	d.space = newSpaceWatch(dir, statfs, reserve, lg)
	d.guard = &guard{fail: d.fail, space: d.space.invalidate, closing: make(chan struct{})}
	d.fail.onFail = d.space.invalidate
	plog := pebbleLogger{l: lg, lim: newLimiter(), fail: d.fail}
	opts := &pebble.Options{
		Logger:        plog,
		EventListener: eventListener(plog, d.space.invalidate),
		FS:            fs,
		Lock:          lock,
		// A task record is rewritten as the task moves (pending, placed,
		// ended), usually within seconds. A 64 MiB memtable (Pebble's
		// default is 4 MiB) absorbs those rewrites before a flush, so
		// fewer versions reach L0 and are compacted again. The cost is up
		// to that much WAL to replay on a restart.
		MemTableSize:                64 << 20,
		MemTableStopWritesThreshold: 4,
	}
	opts.WithFSDefaults() // disk-health checks, as Pebble does for a nil FS
	opts.FS = guardFS{FS: opts.FS, g: d.guard}
	type opened struct {
		db  *pebble.DB
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		db, err := pebble.Open(dir, opts)
		ch <- opened{db, err}
	}()
	select {
	case o := <-ch:
		if o.err != nil {
			return nil, dirErr(dir, "open the store in", o.err, statfs)
		}
		d.db = o.db
	case <-d.fail.ch:
		return nil, errs.New(d.fail.err.Code, "data-dir", "%s: opening the store failed: %v", dir, d.fail.err.Err)
	}
	m, err := checkMarks(fs, dir, d.db, lg)
	if err != nil {
		d.db.Close()
		return nil, err
	}
	d.marks = m
	d.guard.open.Store(true)
	return d, nil
}

// prepareDir creates dir and checks it is a directory.
func prepareDir(fs vfs.FS, dir string) error {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return dirErr(dir, "create", err, nil)
	}
	st, err := fs.Stat(dir)
	if err != nil {
		return dirErr(dir, "read", err, nil)
	}
	if !st.IsDir() {
		return errs.Invalid("data-dir", "%s is not a directory", dir)
	}
	return nil
}

// lockDir takes the store's LOCK file, as Pebble does, so that nothing else
// opens the store while OpenDisk, Check or Repair read and fix its logs.
func lockDir(fs vfs.FS, dir string) (*pebble.Lock, error) {
	lock, err := pebble.LockDirectory(dir, fs)
	if err == nil {
		return lock, nil
	}
	switch {
	case strings.Contains(err.Error(), "lock held by current process"):
		return nil, errs.New(errs.Conflict, "data-dir", "%s: the store is already open in this process (pid %d)", dir, os.Getpid())
	case isLockConflict(err):
		holder := ""
		if pid := lockHolder(fs.PathJoin(dir, "LOCK")); pid > 0 {
			holder = fmt.Sprintf(" (pid %d)", pid)
		}
		return nil, errs.New(errs.Conflict, "data-dir", "%s: the store is in use by another process%s, e.g. a running server: stop it first", dir, holder)
	}
	return nil, dirErr(dir, "lock", err, nil)
}

// isLockConflict reports whether err is fcntl(F_SETLK) refusing a lock
// another process holds (EAGAIN or EACCES, not wrapped in a PathError as
// the LOCK file's open would be).
func isLockConflict(err error) bool {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return false
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES)
}

// probe writes, syncs and removes a small file in dir.
func probe(fs vfs.FS, dir string) error {
	path := fs.PathJoin(dir, probeName)
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, 4096))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := fs.Remove(path); err == nil {
		err = rerr
	}
	return err
}

// dirErr turns a failure to use dir into one clear *errs.Error.
func dirErr(dir, what string, err error, statfs StatFS) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	switch {
	case errors.Is(err, syscall.EROFS):
		return errs.New(errs.Unavailable, "data-dir", "%s is on a read-only filesystem (%v): remount it read-write or choose another --data-dir", dir, err)
	case isNoSpace(err):
		free := ""
		if statfs != nil {
			if f, _, serr := statfs(dir); serr == nil {
				free = fmt.Sprintf(" (%s free)", FormatBytes(f))
			}
		}
		return &errs.Error{Code: errs.InsufficientStorage, Field: "data-dir", Err: err,
			Message: fmt.Sprintf("%s: the disk is full%s: free space and start again (%v)", dir, free, err)}
	case errors.Is(err, os.ErrPermission):
		return errs.New(errs.Unavailable, "data-dir", "%s is not writable by this process (%v): fix its permissions or choose another --data-dir", dir, err)
	case errors.Is(err, syscall.EIO):
		return errs.New(errs.Unavailable, "data-dir", "%s: the disk reports an I/O error (%v): check the disk", dir, err)
	case errors.Is(err, pebble.ErrCorruption):
		return errs.New(errs.Unavailable, "data-dir", "%s: the store is damaged (%v): run `hetsched store check --data-dir %s`", dir, err, dir)
	}
	return &errs.Error{Code: errs.Unavailable, Field: "data-dir", Err: err, Message: fmt.Sprintf("cannot %s %s: %v", what, dir, err)}
}
