// Package store keeps hetsched's acknowledged state durable: an API call
// succeeds only after its change is on disk.
//
// The embedded backend is Pebble (cockroachdb/pebble/v2): every Commit is one
// atomic batch appended to Pebble's write-ahead log and fsynced before
// Commit returns; concurrent commits share one fsync (Pebble's commit
// pipeline groups them), so concurrency makes each commit cheaper, not
// slower. Start-up reads the state back from Pebble's tables plus the log
// it replays (snapshot + log). Pebble was chosen over bbolt for its write
// path: on the development VM bbolt took 31k random 400-byte records/s in
// transactions of 1,000 (each transaction rewrites B+tree pages; a
// throwaway program, see BENCHMARKS.md), while Pebble commits 460k such
// records/s from one committer (BenchmarkCommit in this package), and the
// control plane's target is 300k tasks/s acknowledged durably.
//
// A failing disk degrades the store, it does not crash the process. Space
// reports the data dir's free space against a reserve (DiskOptions.Reserve,
// default min(1 GiB, 5 %)); below it the engine refuses API writes (507)
// while its own small commits go on into the reserve. A write that fails
// anyway (ENOSPC, EIO, in the log, the MANIFEST or a directory sync) makes
// the store fail for good (Err): Pebble has no safe way to continue after
// one, so the goroutine that hit it is parked (never told), every Commit
// from then on returns the failure, nothing unacknowledged is reported
// done, and reads go on until a restart. A failed table write (a flush or
// compaction) is retried by Pebble, with a backoff. OpenDisk on a full or
// read-only disk fails at once with one clear message.
//
// A damaged log is reported, never silently shortened. Pebble's replay
// treats the first invalid record of a log as its end, so before Pebble
// opens, OpenDisk reads every log it will replay: a torn tail of the newest
// (a crash mid-write, never acknowledged) is truncated and reported
// (Recovery); damage anywhere else (valid records after an invalid one, or
// an unclean end of an older log) refuses to open, naming the file and
// byte offset. Check and Repair, behind `hetsched store check|repair`,
// print a Report of every log (and table) and, with consent, salvage the
// records before the damage, keeping the damaged files aside.
//
// An etcd backend (package etcdstore, for HA) implements the same Store
// interface and passes the same contract suite (package storetest).
//
// Glossary:
//   - Record: one object, by kind (task, node, queue, job, acct, meta …)
//     and key; a nil value deletes it.
//   - Commit: records applied atomically and made durable (fsynced) before
//     it returns: "acknowledged" means a commit returned nil.
//   - Disk: the Pebble backend; Discard: a store that keeps nothing (a
//     volatile engine).
//   - Reserve: the free space below which the engine refuses API writes
//     (507) while its own small commits go on.
//   - Mark (ACKED): the acknowledged high-water mark, so that a restart
//     can tell a torn tail from lost acknowledged commits (hwm.go).
//   - Scanner: a store that reads a range of one kind's keys in order.
package store

import (
	"context"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
)

// Record is one object: Kind names its collection ("task", "node",
// "queue", "job", "meta"), Key its id within the kind. A nil Value deletes
// the object.
type Record struct {
	Kind  string
	Key   string
	Value []byte
}

// Store is the durable state of one control plane.
//
// Contract:
//   - Commit applies recs atomically (all or none) in order and returns nil
//     only once they are durable (fsync). A Commit that returned nil is
//     never lost, whatever happens to the process afterwards.
//   - Commit keeps no reference to recs or their keys and values once it
//     returns: the caller may reuse their memory.
//   - After a crash, the store holds every Commit that returned nil and,
//     all or none, each Commit that was in flight.
//   - Get and Load see every Commit that returned before they started.
//   - Load yields the live objects of one kind in key order.
//   - Every method is safe for concurrent use; after Close they return
//     ErrClosed.
type Store interface {
	Commit(ctx context.Context, recs []Record) error
	Get(ctx context.Context, kind, key string) (value []byte, ok bool, err error)
	Load(ctx context.Context, kind string, fn func(key string, value []byte) error) error
	Close() error
}

// Scanner is a Store that reads a range of one kind's records.
//
// Contract: Scan yields the live records of kind whose keys k hold
// from <= k < to (to "": to the kind's end) in key order, as Load does,
// until fn returns false or an error (which Scan returns); fn's value is
// valid only during the call. It sees every Commit that returned before
// it started.
type Scanner interface {
	Scan(ctx context.Context, kind, from, to string, fn func(key string, value []byte) (more bool, err error)) error
}

// ErrClosed is returned by a store that was closed.
var ErrClosed = errs.New(errs.Unavailable, "", "store is closed")

// Limits on what one commit may carry.
const (
	MaxKindLen       = 64
	MaxKeyLen        = 1024
	MaxValueLen      = 16 << 20
	MaxRecordsCommit = 1 << 20
)

// ValidateRecord checks a record's kind and key.
func ValidateRecord(r Record) error {
	if r.Kind == "" || len(r.Kind) > MaxKindLen || strings.ContainsAny(r.Kind, "\x00/") {
		return errs.Invalid("kind", "must be 1-%d characters without '/' or NUL, got %q", MaxKindLen, r.Kind)
	}
	if r.Key == "" || len(r.Key) > MaxKeyLen || strings.ContainsRune(r.Key, 0) {
		return errs.Invalid("key", "must be 1-%d bytes without NUL", MaxKeyLen)
	}
	if len(r.Value) > MaxValueLen {
		return errs.New(errs.TooLarge, "value", "at most %d bytes, got %d", MaxValueLen, len(r.Value))
	}
	return nil
}

// validateCommit checks a whole commit before anything is written.
func validateCommit(ctx context.Context, recs []Record) error {
	if len(recs) > MaxRecordsCommit {
		return errs.New(errs.TooLarge, "", "at most %d records per commit, got %d", MaxRecordsCommit, len(recs))
	}
	for _, r := range recs {
		if err := ValidateRecord(r); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return errs.Wrap(errs.Unavailable, "", err)
	}
	return nil
}

// dataKey is the on-disk key of a record: kind, NUL, key. Keys of one kind
// are contiguous and sorted.
func dataKey(kind, key string) []byte {
	return appendDataKey(make([]byte, 0, len(kind)+1+len(key)), kind, key)
}

// appendDataKey appends the on-disk key of a record to b.
func appendDataKey(b []byte, kind, key string) []byte {
	b = append(b, kind...)
	b = append(b, 0)
	return append(b, key...)
}

// kindBounds returns the key range [lo, hi) of a kind.
func kindBounds(kind string) (lo, hi []byte) {
	lo = append([]byte(kind), 0)
	hi = append([]byte(kind), 1)
	return lo, hi
}
