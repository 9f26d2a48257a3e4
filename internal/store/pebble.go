package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hetsched/hetsched/internal/errs"
)

// Disk is the embedded Pebble-backed store in one directory.
type Disk struct {
	mu     sync.RWMutex // held shared by operations, exclusively by Close
	db     *pebble.DB
	lock   *pebble.Lock
	closed bool

	dir      string
	fail     *failure
	guard    *guard
	space    *spaceWatch
	recovery Recovery
	marks    *marks // the commits' numbers and the acknowledged high-water mark (hwm.go)
}

var _ Store = (*Disk)(nil)

// DiskOptions tune the embedded store.
type DiskOptions struct {
	// Logger receives the store's and Pebble's messages (nil: discarded).
	// Pebble's are rate-limited: one per kind per 10 s.
	Logger *slog.Logger
	// Reserve is the free-space reserve in bytes (--disk-reserve): below it
	// Space().Low is true and the engine refuses API writes. 0: the default,
	// min(1 GiB, 5 % of the filesystem's size). Negative is invalid.
	Reserve int64
	// FS is the filesystem the store lives on (nil: the real disk). Tests
	// inject faults with pebble's vfs/errorfs.
	FS vfs.FS
	// StatFS reports free and total bytes of the data dir's filesystem
	// (nil: statfs through FS). Tests fake a full disk with it.
	StatFS StatFS
}

// Recovery is what opening the store found at the end of the newest
// write-ahead log. A torn tail (the normal result of a crash in the middle
// of a write: never acknowledged, since a commit is acknowledged only
// after its fsync) is truncated before Pebble replays the log.
type Recovery struct {
	TornTail       bool
	File           string // the log's file name in the data dir
	Offset         int64  // where the log now ends (the end of its last complete record)
	BytesDropped   int64  // bytes of the incomplete record removed
	RecordsDropped int    // records they belonged to (0 or 1)
}

// Commit implements Store. The batch is synced to the write-ahead log
// before Commit returns; Pebble groups the fsyncs of concurrent commits.
//
// After the store failed (Err), Commit returns that failure at once. A
// Commit in flight when it fails returns it too, without waiting for the
// Pebble goroutine that will never finish: its batch may or may not be in
// the log (as for a crash), so the caller must treat the error as "outcome
// unknown" and report nothing as done. Commit does not refuse writes below
// the free-space reserve: the engine does that for API writes (Space).
func (d *Disk) Commit(ctx context.Context, recs []Record) error {
	if err := validateCommit(ctx, recs); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	if err := d.fail.get(); err != nil {
		return err
	}
	size := 0
	for _, r := range recs {
		size += len(r.Kind) + len(r.Key) + len(r.Value) + 16
	}
	b := d.db.NewBatchWithSize(size)
	var scratch [128]byte // the batch copies each key: one buffer serves them all
	for _, r := range recs {
		k := appendDataKey(scratch[:0], r.Kind, r.Key)
		var err error
		if r.Value == nil {
			err = b.Delete(k, nil)
		} else {
			err = b.Set(k, r.Value, nil)
		}
		if err != nil {
			b.Close()
			return errs.Wrap(errs.Unavailable, "", err)
		}
	}
	n, err := d.marks.number(b)
	if err != nil {
		b.Close()
		return errs.Wrap(errs.Unavailable, "", err)
	}
	if err := d.apply(b); err != nil {
		return err
	}
	d.marks.acknowledged(n)
	return nil
}

// apply commits b on a helper goroutine and waits for it or for the
// store's failure, whichever comes first: a Pebble goroutine that hit a
// failed write never returns (guardFS), and neither may this caller wait
// for it. b belongs to the helper once apply starts.
func (d *Disk) apply(b *pebble.Batch) error {
	done := make(chan error, 1)
	go func() {
		// Once the store failed, apply may have returned (and Close run)
		// before this goroutine starts: Pebble's Commit on a closed
		// database panics, which must not end the process.
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("pebble: %v", r)
			}
		}()
		if err := d.fail.get(); err != nil {
			b.Close()
			done <- err
			return
		}
		err := b.Commit(pebble.Sync)
		b.Close()
		done <- err
	}()
	select {
	case err := <-done:
		return commitErr(err)
	case <-d.fail.ch:
		select {
		case err := <-done: // it finished too: its own result stands
			return commitErr(err)
		default:
			return d.fail.err
		}
	}
}

// commitErr classes a commit's error: the store's own failure (sent by
// the helper when the store had failed before it ran) keeps its class,
// anything from Pebble is Unavailable.
func commitErr(err error) error {
	var own *errs.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &own) && own == err:
		return err
	}
	return errs.Wrap(errs.Unavailable, "", fmt.Errorf("commit: %w", err))
}

// Get implements Store.
func (d *Disk) Get(ctx context.Context, kind, key string) ([]byte, bool, error) {
	if err := ValidateRecord(Record{Kind: kind, Key: key}); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, errs.Wrap(errs.Unavailable, "", err)
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return nil, false, ErrClosed
	}
	v, closer, err := d.db.Get(dataKey(kind, key))
	if err == pebble.ErrNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, errs.Wrap(errs.Unavailable, "", err)
	}
	out := append([]byte(nil), v...)
	closer.Close()
	return out, true, nil
}

// Load implements Store. fn's value is valid only during the call.
func (d *Disk) Load(ctx context.Context, kind string, fn func(key string, value []byte) error) error {
	return d.Scan(ctx, kind, "", "", func(k string, v []byte) (bool, error) { return true, fn(k, v) })
}

// Scan implements Scanner.
func (d *Disk) Scan(ctx context.Context, kind, from, to string, fn func(key string, value []byte) (bool, error)) error {
	if err := ValidateRecord(Record{Kind: kind, Key: "-"}); err != nil {
		return err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	lo, hi := kindBounds(kind)
	start, end := lo, hi
	if from != "" {
		start = dataKey(kind, from)
	}
	if to != "" {
		end = dataKey(kind, to)
	}
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return errs.Wrap(errs.Unavailable, "", err)
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return errs.Wrap(errs.Unavailable, "", err)
			}
		}
		more, err := fn(string(it.Key()[len(lo):]), it.Value())
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return errs.Wrap(errs.Unavailable, "", err)
	}
	return nil
}

// Err returns the store's sticky failure (an *errs.Error: code
// insufficient_storage when a write hit a full disk, unavailable
// otherwise), or nil while the store is healthy. Once set, every Commit
// fails with it until the process restarts; reads go on.
func (d *Disk) Err() error { return d.fail.get() }

// Space returns the data dir's free space against the reserve. It reads a
// cached statfs, at most ~100 ms old (fresh after a failed write): cheap
// enough for every API write.
func (d *Disk) Space() Space { return d.space.get() }

// Recovery returns what opening found at the newest log's end.
func (d *Disk) Recovery() Recovery { return d.recovery }

// failedCloseWait bounds how long Close waits for Pebble once the store
// failed: Pebble's Close then waits for goroutines that will never return.
var failedCloseWait = 2 * time.Second

// Close flushes nothing extra (every commit is already durable) and closes
// the database. It is safe to call twice. Once the store failed, Close
// waits at most a few seconds and then returns an error saying the
// process should exit (which releases the directory's lock).
func (d *Disk) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	close(d.guard.closing)
	if err := d.marks.close(); err != nil {
		d.fail.log.Warn("store: could not record the acknowledged commits' high-water mark at close", "dir", d.dir, "err", err)
	}
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("pebble panicked while closing: %v", r)
			}
		}()
		err := d.db.Close()
		if lerr := d.lock.Close(); err == nil {
			err = lerr
		}
		done <- err
	}()
	select {
	case err := <-done:
		return closeErr(d.dir, err)
	case <-d.fail.ch:
	}
	t := time.NewTimer(failedCloseWait)
	defer t.Stop()
	select {
	case err := <-done:
		return closeErr(d.dir, err)
	case <-t.C:
		return errs.New(errs.Unavailable, "data-dir", "%s: the store failed (%v) and did not shut down within %s: exit the process, which releases the store's lock",
			d.dir, d.fail.err.Err, failedCloseWait)
	}
}

func closeErr(dir string, err error) error {
	if err == nil {
		return nil
	}
	return errs.Wrap(errs.Unavailable, "data-dir", fmt.Errorf("close store in %s: %w", dir, err))
}
