package store

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// guardFS is the filesystem Pebble writes through. It keeps a failed write
// from turning into a crash or a false acknowledgement.
//
// Pebble v2.1.7 handles a failed write to a table (flush, compaction) by
// deleting the output and retrying: guardFS lets that error through, but
// first re-reads free space and waits (an exponential backoff, up to
// tableBackoffMax) so that the flush that Pebble reschedules at once
// (Pebble's compaction.go retries a failed flush at once, without a
// backoff) cannot spin a core and flood the log on a full disk.
//
// A failed write, sync or create of a write-ahead log, a MANIFEST, a marker
// file or a directory sync has no safe continuation in Pebble: the commit
// pipeline panics (db.go commitWrite, rotateWAL: with DB.mu unlocked, so
// the unwinding unlocks an unlocked mutex, an unrecoverable fatal error),
// or calls Logger.Fatalf and returns nil to the committer, or panics on a
// directory fsync (atomicfs.Marker.Move). Once the store is open, guardFS
// therefore never returns such an error: it records the store's failure
// and parks the goroutine (the LogWriter's flusher, a committer rotating
// the log, a flush writing the MANIFEST) with no Pebble mutex held beyond
// the commit pipeline's. Every Commit waiting on it then returns the
// failure (Disk.Commit waits on both), nothing written after is
// acknowledged, and reads, which need none of these goroutines, go on.
// While Pebble opens, errors are returned: Open fails cleanly with them.
type guardFS struct {
	vfs.FS
	g *guard
}

type guard struct {
	fail    *failure
	space   func()        // invalidates the cached free space
	open    atomic.Bool   // Pebble is open: park on critical failures
	closing chan struct{} // closed by Disk.Close: stops backoffs

	mu      sync.Mutex
	backoff time.Duration // next wait after a failed table write
}

// Table write backoff: the wait after a failed table write doubles from
// tableBackoffMin up to tableBackoffMax and resets after a table is synced.
const (
	tableBackoffMin = 100 * time.Millisecond
	tableBackoffMax = 10 * time.Second
)

// fileKind is what a file is to Pebble.
type fileKind int

const (
	kindOther    fileKind = iota
	kindCritical          // WAL, MANIFEST, marker: a failed write is fatal
	kindTable             // sstable or blob file: Pebble retries
)

func classify(name string) fileKind {
	base := name[strings.LastIndexByte(name, '/')+1:]
	if _, _, ok := wal.ParseLogFilename(base); ok {
		return kindCritical
	}
	switch {
	case strings.HasPrefix(base, "MANIFEST-"), strings.HasPrefix(base, "marker."):
		return kindCritical
	case strings.HasSuffix(base, ".sst"), strings.HasSuffix(base, ".blob"):
		return kindTable
	}
	return kindOther
}

// failed handles err from op on a file of kind k. It returns the error
// Pebble should see, or does not return at all (critical, once open).
func (g *guard) failed(k fileKind, op, name string, err error) error {
	if err == nil {
		return nil
	}
	if g.space != nil {
		g.space()
	}
	switch k {
	case kindCritical:
		if g.open.Load() {
			if !strings.Contains(err.Error(), name) {
				err = fmt.Errorf("%s %s: %w", op, name, err)
			}
			g.fail.set(err)
			park()
		}
	case kindTable:
		g.wait()
	}
	return err
}

// wait sleeps for the current backoff (or until the store closes) and
// doubles it.
func (g *guard) wait() {
	g.mu.Lock()
	d := max(g.backoff, tableBackoffMin)
	g.backoff = min(2*d, tableBackoffMax)
	g.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-g.closing:
	}
}

func (g *guard) resetBackoff() {
	g.mu.Lock()
	g.backoff = 0
	g.mu.Unlock()
}

func (fs guardFS) wrap(f vfs.File, name string, k fileKind, writable bool) vfs.File {
	return &guardFile{File: f, g: fs.g, name: fs.PathBase(name), kind: k, writable: writable}
}

func (fs guardFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	k := classify(name)
	f, err := fs.FS.Create(name, c)
	if err != nil {
		return nil, fs.g.failed(k, "create", fs.PathBase(name), err)
	}
	return fs.wrap(f, name, k, true), nil
}

func (fs guardFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	k := classify(newname)
	f, err := fs.FS.ReuseForWrite(oldname, newname, c)
	if err != nil {
		return nil, fs.g.failed(k, "reuse", fs.PathBase(newname), err)
	}
	return fs.wrap(f, newname, k, true), nil
}

func (fs guardFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	k := classify(name)
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, fs.g.failed(k, "open", fs.PathBase(name), err)
	}
	return fs.wrap(f, name, k, true), nil
}

// OpenDir wraps directories: a failed directory sync is critical.
func (fs guardFS) OpenDir(name string) (vfs.File, error) {
	f, err := fs.FS.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &guardFile{File: f, g: fs.g, name: name, kind: kindCritical, writable: true}, nil
}

func (fs guardFS) Unwrap() vfs.FS { return fs.FS }

// guardFile routes a file's write errors through guard.failed.
type guardFile struct {
	vfs.File
	g        *guard
	name     string
	kind     fileKind
	writable bool
}

func (f *guardFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.g.failed(f.kind, "write", f.name, err)
}

func (f *guardFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.g.failed(f.kind, "write", f.name, err)
}

// Preallocate errors are not failures: Pebble ignores them (syncingFile),
// and a full disk shows on the write that follows.
func (f *guardFile) Preallocate(off, length int64) error {
	err := f.File.Preallocate(off, length)
	if err != nil && f.g.space != nil {
		f.g.space()
	}
	return err
}

func (f *guardFile) Sync() error { return f.synced(f.File.Sync()) }

func (f *guardFile) SyncData() error { return f.synced(f.File.SyncData()) }

func (f *guardFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.synced(err)
}

func (f *guardFile) synced(err error) error {
	if err == nil && f.kind == kindTable {
		f.g.resetBackoff()
	}
	return f.g.failed(f.kind, "sync", f.name, err)
}

func (f *guardFile) Close() error {
	err := f.File.Close()
	if !f.writable {
		return err
	}
	return f.g.failed(f.kind, "close", f.name, err)
}

var (
	_ vfs.FS   = guardFS{}
	_ vfs.File = (*guardFile)(nil)
)
