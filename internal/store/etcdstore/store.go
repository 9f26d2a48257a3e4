package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/s2"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store"
)

// Options configure a Store.
type Options struct {
	// Prefix is the key prefix of this control plane's keys (default
	// DefaultPrefix); two control planes on one etcd need two prefixes.
	Prefix string
	// ChunkBytes is the largest value written to etcd (default
	// DefaultChunkBytes); it must stay below etcd's --max-request-bytes.
	ChunkBytes int
	// SnapshotMinBytes is the log size after which a snapshot is written,
	// when the log has also outgrown the last snapshot (default
	// DefaultSnapshotMinBytes).
	SnapshotMinBytes int64
	// DefragMinFree is the space a member's database must be able to give
	// back (and at least half of it) before it is defragmented after a
	// compaction (default DefaultDefragMinFree; negative: never).
	DefragMinFree int64
	// RequestTimeout bounds each read and cleanup call to etcd (default
	// DefaultRequestTimeout).
	RequestTimeout time.Duration
	// AttemptTimeout bounds one attempt of a commit's write, and
	// CommitTimeout all of them (defaults DefaultAttemptTimeout and
	// DefaultCommitTimeout): a write that gets no answer (etcd electing
	// its leader) is tried again until then.
	AttemptTimeout, CommitTimeout time.Duration
	// SpaceEvery is how often a leader reads the members' sizes against
	// their quota (default DefaultSpaceEvery; space.go).
	SpaceEvery time.Duration
	Logger     *slog.Logger
}

// Defaults.
const (
	DefaultPrefix           = "/hetsched/"
	DefaultChunkBytes       = 1 << 20
	maxChunkBytes           = 1400 << 10 // etcd's default request limit is 1.5 MiB
	DefaultSnapshotMinBytes = 64 << 20
	DefaultDefragMinFree    = 256 << 20
	DefaultRequestTimeout   = 5 * time.Second
	DefaultAttemptTimeout   = 2 * time.Second
	DefaultCommitTimeout    = 8 * time.Second
)

// ErrStandby is what Commit returns before Lead: a standby only reads.
var ErrStandby = errs.New(errs.Unavailable, "", "this server is a standby: only the leader writes")

// ErrFenced is what Commit returns once the fence failed: another server
// leads now, and this one must not write again.
var ErrFenced = errs.New(errs.Unavailable, "", "this server is no longer the leader (its election key is gone): the write was refused")

// Fence is the condition every write of a leader is guarded by: the
// election key it created still exists with its create revision (as
// concurrency.Election's Key and Rev).
type Fence struct {
	Key string
	Rev int64
}

// Store is a store.Store on etcd; see the package doc.
type Store struct {
	cli  *clientv3.Client
	opt  Options
	keys keyspace
	log  *slog.Logger

	ctx    context.Context // ends with Close: the tail and snapshots stop
	cancel context.CancelFunc
	wg     sync.WaitGroup // the snapshot goroutine

	commitMu sync.Mutex // one Commit at a time: log entries are numbered
	buf      []byte     // the encoding of the commit in progress
	cbuf     []byte     // buf compressed (codec.go)

	mu       sync.RWMutex
	st       *state
	rev      int64  // etcd revision st reflects
	torn     uint64 // a log entry with no last chunk (an interrupted commit), 0 if none
	closed   bool
	writer   bool
	fence    []clientv3.Cmp
	failed   error // a write whose outcome is unknown, or the fence failed
	snapping bool
	space    atomic.Pointer[store.Space] // the leader's last reading (space.go)

	tailStop context.CancelFunc
	tailDone chan struct{}
}

// state is the live records and where they are in the log.
type state struct {
	kinds     map[string]map[string][]byte
	seq       uint64 // last log entry applied
	snapSeq   uint64 // the snapshot it was read from (0: none)
	snapBytes int64
	logBytes  int64 // log written after the snapshot
}

func newState() *state { return &state{kinds: map[string]map[string][]byte{}} }

// apply puts or deletes one record.
func (st *state) apply(kind, key string, value []byte) {
	m := st.kinds[kind]
	if value == nil {
		delete(m, key)
		return
	}
	if m == nil {
		m = map[string][]byte{}
		st.kinds[kind] = m
	}
	m[key] = value
}

// Open reads the state (snapshot plus log) into memory and tails the log,
// as a standby: it reads, and Commit returns ErrStandby until Lead.
func Open(ctx context.Context, cli *clientv3.Client, opt Options) (*Store, error) {
	if opt.Prefix == "" {
		opt.Prefix = DefaultPrefix
	}
	if opt.ChunkBytes == 0 {
		opt.ChunkBytes = DefaultChunkBytes
	}
	if opt.ChunkBytes < 64 || opt.ChunkBytes > maxChunkBytes {
		return nil, errs.Invalid("chunk-bytes", "must be 64 to %d, got %d", maxChunkBytes, opt.ChunkBytes)
	}
	if opt.SnapshotMinBytes == 0 {
		opt.SnapshotMinBytes = DefaultSnapshotMinBytes
	}
	if opt.DefragMinFree == 0 {
		opt.DefragMinFree = DefaultDefragMinFree
	}
	if opt.RequestTimeout == 0 {
		opt.RequestTimeout = DefaultRequestTimeout
	}
	if opt.AttemptTimeout == 0 {
		opt.AttemptTimeout = DefaultAttemptTimeout
	}
	if opt.CommitTimeout == 0 {
		opt.CommitTimeout = DefaultCommitTimeout
	}
	if opt.SpaceEvery == 0 {
		opt.SpaceEvery = DefaultSpaceEvery
	}
	lg := opt.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	s := &Store{cli: cli, opt: opt, keys: keyspace{opt.Prefix}, log: lg}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	st, rev, torn, err := s.read(ctx)
	if err != nil {
		s.cancel()
		return nil, err
	}
	s.st, s.rev, s.torn = st, rev, torn
	s.startTail()
	return s, nil
}

// Lead makes the store the writer: it stops tailing, reads what the log
// gained since (every commit of the previous leader: it is fenced), drops
// an interrupted commit's chunks, and from then on guards every write by
// fence (nil: unguarded, for a store with one writer by construction).
func (s *Store) Lead(ctx context.Context, fence *Fence) error {
	s.stopTail()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	var cmps []clientv3.Cmp
	if fence != nil {
		cmps = []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(fence.Key), "=", fence.Rev)}
	}
	if err := s.catchUp(ctx); err != nil {
		return err
	}
	if s.torn != 0 {
		tctx, cancel := context.WithTimeout(ctx, s.opt.RequestTimeout)
		lo, hi := s.keys.entry(s.torn)
		resp, err := s.cli.Txn(tctx).If(cmps...).Then(clientv3.OpDelete(lo, clientv3.WithRange(hi))).Commit()
		cancel()
		if err != nil {
			return unavailable("drop an interrupted commit", err)
		}
		if !resp.Succeeded {
			return ErrFenced
		}
		s.log.Warn("dropped the chunks of a commit that never completed", "entry", s.torn)
		s.torn = 0
	}
	s.fence, s.writer, s.failed = cmps, true, nil
	s.wg.Add(1)
	go s.watchSpace(s.ctx)
	return nil
}

// catchUp applies the log entries after st.seq, read now (linearizable);
// when the log no longer holds them (a snapshot deleted them), it reads
// everything again. Called with mu held, the tail stopped.
func (s *Store) catchUp(ctx context.Context) error {
	resp, err := s.get(ctx, s.keys.pointer())
	if err != nil {
		return unavailable("read the snapshot pointer", err)
	}
	var p pointer
	if len(resp.Kvs) == 1 {
		if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil {
			return damaged("the snapshot pointer %q: %v", resp.Kvs[0].Value, err)
		}
	}
	gap := p.Seq > s.st.seq
	if !gap {
		_, rev, torn, g, err := s.readLogFrom(ctx, s.st, s.st.seq+1, 0)
		if err != nil {
			return err
		}
		s.rev, s.torn, gap = rev, torn, g
	}
	if gap {
		st, rev, torn, err := s.read(ctx)
		if err != nil {
			return err
		}
		s.st, s.rev, s.torn = st, rev, torn
	}
	if p.Seq > s.st.snapSeq { // a snapshot written while this store tailed
		s.st.snapSeq, s.st.snapBytes, s.st.logBytes = p.Seq, p.Bytes, 0
	}
	return nil
}

// Commit writes recs as one log entry; see the package doc.
func (s *Store) Commit(ctx context.Context, recs []store.Record) error {
	if err := validate(ctx, recs); err != nil {
		return err
	}
	if len(recs) == 0 {
		return nil
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.mu.RLock()
	closed, writer, failed, fence, seq := s.closed, s.writer, s.failed, s.fence, s.st.seq+1
	s.mu.RUnlock()
	switch {
	case closed:
		return store.ErrClosed
	case failed != nil:
		return failed
	case !writer:
		return ErrStandby
	}
	s.buf = s.buf[:0]
	for _, r := range recs {
		s.buf = appendRecord(s.buf, r)
	}
	s.cbuf = s2.Encode(s.cbuf[:cap(s.cbuf)], s.buf)
	chunks := cut(s.cbuf, s.opt.ChunkBytes, chunkS2)
	// The chunks before the last go in parallel (nothing reads an entry
	// without its last chunk); the last, the commit point, after them.
	if err := s.writeChunks(ctx, fence, seq, chunks[:len(chunks)-1]); err != nil {
		return s.fail(err)
	}
	rev, err := s.writeChunk(ctx, fence, s.keys.chunk(seq, len(chunks)-1), string(chunks[len(chunks)-1]))
	if err != nil {
		return s.fail(err)
	}
	s.mu.Lock()
	for _, r := range recs {
		var v []byte
		if r.Value != nil {
			v = append(make([]byte, 0, len(r.Value)), r.Value...)
		}
		s.st.apply(r.Kind, r.Key, v)
	}
	s.st.seq = seq
	s.st.logBytes += int64(len(s.cbuf))
	s.rev = max(s.rev, rev)
	s.maybeSnapshot()
	s.mu.Unlock()
	if cap(s.buf) > 16<<20 {
		s.buf, s.cbuf = nil, nil
	}
	return nil
}

// parallelChunks bounds the chunk writes of one commit in flight.
const parallelChunks = 8

// writeChunks writes chunks 0..len-1 of entry seq, up to parallelChunks
// at once; the first failure is the answer.
func (s *Store) writeChunks(ctx context.Context, fence []clientv3.Cmp, seq uint64, chunks [][]byte) error {
	if len(chunks) == 0 {
		return nil
	}
	if len(chunks) == 1 {
		_, err := s.writeChunk(ctx, fence, s.keys.chunk(seq, 0), string(chunks[0]))
		return err
	}
	sem := make(chan struct{}, parallelChunks)
	errc := make(chan error, len(chunks))
	for i, c := range chunks {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := s.writeChunk(ctx, fence, s.keys.chunk(seq, i), string(c))
			errc <- err
		}()
	}
	var first error
	for range chunks {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	return first
}

// writeChunk writes one chunk key, once: guarded by the fence and by the
// key being new. An attempt that fails without an answer (etcd was
// electing its own leader, a member went away) is tried again until
// CommitTimeout: a repeat is safe, because an earlier attempt that did
// apply shows in the repeat's else branch (the key holds this value and
// the fence still holds), which counts as success.
func (s *Store) writeChunk(ctx context.Context, fence []clientv3.Cmp, key, value string) (int64, error) {
	deadline := time.Now().Add(s.opt.CommitTimeout)
	cmps := append(slices.Clip(fence), clientv3.Compare(clientv3.CreateRevision(key), "=", 0))
	var els []clientv3.Op
	els = append(els, clientv3.OpGet(key))
	if len(fence) > 0 {
		els = append(els, clientv3.OpTxn(fence, nil, nil))
	}
	var last error
	for attempt := 0; ; attempt++ {
		tctx, cancel := context.WithTimeout(ctx, s.opt.AttemptTimeout)
		resp, err := s.cli.Txn(tctx).If(cmps...).Then(clientv3.OpPut(key, value)).Else(els...).Commit()
		cancel()
		if err == nil {
			if resp.Succeeded {
				return resp.Header.Revision, nil
			}
			if attempt > 0 && appliedEarlier(resp, value, len(fence) > 0) {
				return resp.Header.Revision, nil
			}
			return 0, ErrFenced
		}
		last = err
		if ctx.Err() != nil || time.Now().After(deadline) || !retriable(err) {
			return 0, unavailable("commit", last)
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(50*time.Millisecond<<min(attempt, 4), 500*time.Millisecond)):
		}
	}
}

// appliedEarlier reads a refused write's else branch: the key holds value
// and (when fenced) the fence still holds.
func appliedEarlier(resp *clientv3.TxnResponse, value string, fenced bool) bool {
	if len(resp.Responses) == 0 {
		return false
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 || string(kvs[0].Value) != value {
		return false
	}
	return !fenced || (len(resp.Responses) > 1 && resp.Responses[1].GetResponseTxn().GetSucceeded())
}

// retriable reports whether a failed etcd call may be tried again: any
// failure but a refusal of the request itself (too large, bad, denied).
func retriable(err error) bool {
	switch {
	case errors.Is(err, rpctypes.ErrGRPCRequestTooLarge), errors.Is(err, rpctypes.ErrRequestTooLarge),
		errors.Is(err, rpctypes.ErrGRPCTooManyOps), errors.Is(err, rpctypes.ErrTooManyOps),
		errors.Is(err, rpctypes.ErrGRPCNoSpace), errors.Is(err, rpctypes.ErrNoSpace),
		errors.Is(err, rpctypes.ErrGRPCPermissionDenied), errors.Is(err, rpctypes.ErrPermissionDenied):
		return false
	}
	return true
}

// fail makes err the answer to every later Commit: after a write whose
// outcome is unknown, or a failed fence, this store cannot know the log's
// next entry; a new Open reads the truth.
func (s *Store) fail(err error) error {
	s.mu.Lock()
	if s.failed == nil {
		s.failed = err
	}
	s.mu.Unlock()
	return err
}

// Err reports why the store stopped taking commits (nil while it takes
// them, or while it is a standby).
func (s *Store) Err() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.failed
}

// Get returns a copy of one record's value.
func (s *Store) Get(ctx context.Context, kind, key string) ([]byte, bool, error) {
	if err := store.ValidateRecord(store.Record{Kind: kind, Key: key}); err != nil {
		return nil, false, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, false, store.ErrClosed
	}
	v, ok := s.st.kinds[kind][key]
	if !ok {
		return nil, false, nil
	}
	return append([]byte{}, v...), true, nil
}

// Load yields the live records of kind in key order; the value is valid
// during fn only and must not be changed.
func (s *Store) Load(ctx context.Context, kind string, fn func(key string, value []byte) error) error {
	return s.Scan(ctx, kind, "", "", func(k string, v []byte) (bool, error) { return true, fn(k, v) })
}

// Scan implements store.Scanner over the store's copy (sorting the kind's
// keys: O(n log n) in the kind's size per call).
func (s *Store) Scan(ctx context.Context, kind, from, to string, fn func(key string, value []byte) (bool, error)) error {
	if err := store.ValidateRecord(store.Record{Kind: kind, Key: "-"}); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return store.ErrClosed
	}
	m := s.st.kinds[kind]
	keys := make([]string, 0, len(m))
	for k := range m {
		if k >= from && (to == "" || k < to) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i%4096 == 4095 {
			if err := ctx.Err(); err != nil {
				return errs.Wrap(errs.Unavailable, "", err)
			}
		}
		more, err := fn(k, m[k])
		if err != nil {
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}

// Revision is the etcd revision the store's copy reflects.
func (s *Store) Revision() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rev
}

// Close stops the tail and any snapshot in progress; the client stays the
// caller's.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.stopTail()
	s.wg.Wait()
	return nil
}

// validate checks a whole commit before anything is written.
func validate(ctx context.Context, recs []store.Record) error {
	if len(recs) > store.MaxRecordsCommit {
		return errs.New(errs.TooLarge, "", "at most %d records per commit, got %d", store.MaxRecordsCommit, len(recs))
	}
	for _, r := range recs {
		if err := store.ValidateRecord(r); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return errs.Wrap(errs.Unavailable, "", err)
	}
	return nil
}

// unavailable classes an etcd failure: a full database is 507, the rest
// (no quorum, a timeout, a lost connection) 503.
func unavailable(what string, err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrGRPCNoSpace), errors.Is(err, rpctypes.ErrNoSpace):
		return errs.New(errs.InsufficientStorage, "", "etcd %s: the etcd database is full (its quota): %v", what, err)
	case errors.Is(err, context.DeadlineExceeded):
		return errs.New(errs.Unavailable, "", "etcd %s: no answer in time (no quorum, or etcd is overloaded): %v", what, err)
	}
	return errs.New(errs.Unavailable, "", "etcd %s: %v", what, err)
}

// errStoreDamaged marks what read finds inconsistent in etcd (Internal:
// nothing a client can do).
var errStoreDamaged = errors.New("etcd store")

// damaged is an inconsistency read found.
func damaged(format string, args ...any) error {
	return errs.Wrap(errs.Internal, "", fmt.Errorf("%w: %s", errStoreDamaged, fmt.Sprintf(format, args...)))
}
