package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hetsched/hetsched/internal/errs"
)

// Disk is the embedded Pebble-backed store in one directory.
type Disk struct {
	mu     sync.RWMutex // held shared by operations, exclusively by Close
	db     *pebble.DB
	closed bool
}

var _ Store = (*Disk)(nil)

// DiskOptions tune the embedded store.
type DiskOptions struct {
	// Logger receives Pebble's messages (nil: discarded below warnings).
	Logger *slog.Logger
}

// OpenDisk opens (creating if needed) the store in dir. Opening replays the
// write-ahead log, so every commit acknowledged before a crash is there.
func OpenDisk(dir string, opt DiskOptions) (*Disk, error) {
	if dir == "" {
		return nil, errs.Invalid("data-dir", "a directory is required")
	}
	lg := opt.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	db, err := pebble.Open(dir, &pebble.Options{
		Logger: pebbleLogger{lg},
		// A task record is rewritten as the task moves (pending, placed,
		// ended), usually within seconds. A 64 MiB memtable (Pebble's
		// default is 4 MiB) absorbs those rewrites before a flush, so
		// fewer versions reach L0 and are compacted again. The cost is up
		// to that much WAL to replay on a restart.
		MemTableSize:                64 << 20,
		MemTableStopWritesThreshold: 4,
	})
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, "data-dir", fmt.Errorf("open store in %s: %w", dir, err))
	}
	return &Disk{db: db}, nil
}

// Commit implements Store. The batch is synced to the write-ahead log
// before Commit returns; Pebble groups the fsyncs of concurrent commits.
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
	size := 0
	for _, r := range recs {
		size += len(r.Kind) + len(r.Key) + len(r.Value) + 16
	}
	b := d.db.NewBatchWithSize(size)
	defer b.Close()
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
			return errs.Wrap(errs.Unavailable, "", err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return errs.Wrap(errs.Unavailable, "", fmt.Errorf("commit: %w", err))
	}
	return nil
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
	if err := ValidateRecord(Record{Kind: kind, Key: "-"}); err != nil {
		return err
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return ErrClosed
	}
	lo, hi := kindBounds(kind)
	it, err := d.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
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
		if err := fn(string(it.Key()[len(lo):]), it.Value()); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return errs.Wrap(errs.Unavailable, "", err)
	}
	return nil
}

// Close flushes nothing extra (every commit is already durable) and closes
// the database. It is safe to call twice.
func (d *Disk) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return d.db.Close()
}

// pebbleLogger sends Pebble's messages to slog. Fatalf means Pebble found
// the store unusable (corruption, I/O failure): it logs and panics, since
// continuing could acknowledge writes that are not durable.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	panic("store: " + msg)
}
