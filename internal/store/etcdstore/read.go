package etcdstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keyspace names the keys under one prefix P:
//
//	P log/<seq %016x>/<chunk %06d>    a log entry's chunks
//	P snap/<seq %016x>/<chunk %06d>   a snapshot's chunks
//	P snapshot                        the snapshot pointer (JSON)
type keyspace struct{ prefix string }

func (k keyspace) logPrefix() string { return k.prefix + "log/" }
func (k keyspace) logEnd() string    { return k.prefix + "log0" } // '0' follows '/'
func (k keyspace) pointer() string   { return k.prefix + "snapshot" }

func (k keyspace) chunk(seq uint64, i int) string {
	return fmt.Sprintf("%slog/%016x/%06d", k.prefix, seq, i)
}

// entry is the key range of one log entry's chunks.
func (k keyspace) entry(seq uint64) (lo, hi string) {
	p := fmt.Sprintf("%slog/%016x/", k.prefix, seq)
	return p, p[:len(p)-1] + "0"
}

// logThrough is the key range of the log entries up to seq.
func (k keyspace) logThrough(seq uint64) (lo, hi string) {
	return k.logPrefix(), fmt.Sprintf("%slog/%016x/", k.prefix, seq+1)
}

func (k keyspace) snapChunk(seq uint64, i int) string {
	return fmt.Sprintf("%ssnap/%016x/%06d", k.prefix, seq, i)
}

func (k keyspace) snapRange(seq uint64) (lo, hi string) {
	p := fmt.Sprintf("%ssnap/%016x/", k.prefix, seq)
	return p, p[:len(p)-1] + "0"
}

func (k keyspace) snapAll() (lo, hi string) { return k.prefix + "snap/", k.prefix + "snap0" }

// parseChunk reads the seq and chunk index of a log or snapshot chunk key.
func (k keyspace) parseChunk(key, kind string) (seq uint64, i int, ok bool) {
	rest, found := strings.CutPrefix(key, k.prefix+kind+"/")
	if !found {
		return 0, 0, false
	}
	a, b, found := strings.Cut(rest, "/")
	if !found || len(a) != 16 || len(b) != 6 {
		return 0, 0, false
	}
	seq, err1 := strconv.ParseUint(a, 16, 64)
	n, err2 := strconv.Atoi(b)
	return seq, n, err1 == nil && err2 == nil
}

// pointer is the snapshot pointer's value.
type pointer struct {
	Seq    uint64 `json:"seq"`
	Chunks int    `json:"chunks"`
	Bytes  int64  `json:"bytes"`
	CRC32C uint32 `json:"crc32c"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// pageChunks is how many chunks one range read fetches (each at most
// ChunkBytes).
const pageChunks = 8

// read reads the whole state at one revision: the snapshot the pointer
// names, then the log after it. A compaction during the read (its
// revision is gone) starts it again.
func (s *Store) read(ctx context.Context) (*state, int64, uint64, error) {
	for try := 0; ; try++ {
		st, rev, torn, err := s.readOnce(ctx)
		if errors.Is(err, rpctypes.ErrCompacted) && try < 3 {
			continue
		}
		return st, rev, torn, err
	}
}

func (s *Store) readOnce(ctx context.Context) (*state, int64, uint64, error) {
	resp, err := s.get(ctx, s.keys.pointer())
	if err != nil {
		return nil, 0, 0, unavailable("read the snapshot pointer", err)
	}
	rev := resp.Header.Revision
	st := newState()
	if len(resp.Kvs) == 1 {
		var p pointer
		if err := json.Unmarshal(resp.Kvs[0].Value, &p); err != nil {
			return nil, 0, 0, damaged("the snapshot pointer %q: %v", resp.Kvs[0].Value, err)
		}
		if err := s.readSnapshot(ctx, st, p, rev); err != nil {
			return nil, 0, 0, err
		}
	}
	_, rev, torn, gap, err := s.readLogFrom(ctx, st, st.snapSeq+1, rev)
	if err != nil {
		return nil, 0, 0, err
	}
	if gap {
		return nil, 0, 0, damaged("the log after snapshot %d does not start at entry %d", st.snapSeq, st.snapSeq+1)
	}
	return st, rev, torn, nil
}

// get reads one key (linearizable), bounded by RequestTimeout.
func (s *Store) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	tctx, cancel := context.WithTimeout(ctx, s.opt.RequestTimeout)
	defer cancel()
	return s.cli.Get(tctx, key, opts...)
}

// pages calls fn for every key-value in [lo, hi) at rev (0: now, the
// revision then fixed for the later pages), pageChunks at a time, and
// returns the revision read.
func (s *Store) pages(ctx context.Context, lo, hi string, rev int64, fn func(kv *mvccpb.KeyValue) error) (int64, error) {
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(hi), clientv3.WithLimit(pageChunks)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		resp, err := s.get(ctx, lo, opts...)
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if err := fn(kv); err != nil {
				return 0, err
			}
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return rev, nil
		}
		lo = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// readSnapshot decodes the snapshot p names into st, checking its chunk
// count, size and checksum.
func (s *Store) readSnapshot(ctx context.Context, st *state, p pointer, rev int64) error {
	lo, hi := s.keys.snapRange(p.Seq)
	crc := uint32(0)
	chunks, bytes := 0, int64(0)
	var queue [][]byte
	var readErr error
	done := false
	next := func() ([]byte, error) {
		for len(queue) == 0 {
			if done {
				return nil, io.EOF
			}
			var page [][]byte
			_, err := s.pagesOnce(ctx, &lo, hi, rev, func(kv *mvccpb.KeyValue) error {
				seq, i, ok := s.keys.parseChunk(string(kv.Key), "snap")
				if !ok || seq != p.Seq || i != chunks+len(page) {
					return damaged("snapshot %d: unexpected chunk %q", p.Seq, kv.Key)
				}
				page = append(page, kv.Value)
				return nil
			}, &done)
			if err != nil {
				readErr = err
				return nil, err
			}
			for _, c := range page {
				if len(c) == 0 {
					return nil, damaged("snapshot %d: an empty chunk", p.Seq)
				}
				crc = crc32.Update(crc, castagnoli, c[1:])
				bytes += int64(len(c) - 1)
			}
			chunks += len(page)
			queue = page
		}
		c := queue[0]
		queue = queue[1:]
		return c, nil
	}
	err := decodeChunks(next, func(kind, key string, value []byte) error {
		st.apply(kind, key, value)
		return nil
	})
	if err != nil {
		if readErr != nil && !isDamage(readErr) {
			return unavailable("read the snapshot", readErr)
		}
		return damaged("snapshot %d: %v", p.Seq, err)
	}
	if chunks != p.Chunks || bytes != p.Bytes || crc != p.CRC32C {
		return damaged("snapshot %d: %d chunks, %d bytes, crc32c %08x; its pointer says %d, %d, %08x", p.Seq, chunks, bytes, crc, p.Chunks, p.Bytes, p.CRC32C)
	}
	st.seq, st.snapSeq, st.snapBytes = p.Seq, p.Seq, p.Bytes
	return nil
}

// pagesOnce reads one page of [*lo, hi) at rev, advancing *lo and setting
// *done after the last.
func (s *Store) pagesOnce(ctx context.Context, lo *string, hi string, rev int64, fn func(kv *mvccpb.KeyValue) error, done *bool) (int64, error) {
	resp, err := s.get(ctx, *lo, clientv3.WithRange(hi), clientv3.WithLimit(pageChunks), clientv3.WithRev(rev))
	if err != nil {
		return 0, err
	}
	for _, kv := range resp.Kvs {
		if err := fn(kv); err != nil {
			return 0, err
		}
	}
	if !resp.More || len(resp.Kvs) == 0 {
		*done = true
	} else {
		*lo = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	return resp.Header.Revision, nil
}

func isDamage(err error) bool { return errors.Is(err, errStoreDamaged) }

// readLogFrom applies the complete log entries from entry from on (at
// rev; 0: now) to st. gap reports that the log does not start at from (a
// snapshot deleted what st lacks); torn is a last entry with no last
// chunk.
func (s *Store) readLogFrom(ctx context.Context, st *state, from uint64, rev int64) (applied int, readRev int64, torn uint64, gap bool, err error) {
	lo := fmt.Sprintf("%slog/%016x/", s.keys.prefix, from)
	var cur uint64
	var chunks [][]byte
	partial := false // the current entry lacks a chunk (an interrupted commit)
	flush := func() error {
		if err := s.applyEntry(st, cur, chunks); err != nil {
			return err
		}
		applied++
		return nil
	}
	expect := from
	readRev, err = s.pages(ctx, lo, s.keys.logEnd(), rev, func(kv *mvccpb.KeyValue) error {
		seq, i, ok := s.keys.parseChunk(string(kv.Key), "log")
		if !ok {
			return damaged("unexpected log key %q", kv.Key)
		}
		if torn != 0 {
			return damaged("log entry %d has no last chunk but entry %d follows it", torn, seq)
		}
		if seq != cur {
			if seq != expect {
				if applied == 0 && cur == 0 {
					gap = true
					return errStop
				}
				return damaged("log entry %d follows entry %d", seq, expect-1)
			}
			cur, chunks, partial = seq, nil, false
		}
		if len(kv.Value) == 0 {
			return damaged("log entry %d: chunk %d is empty", seq, i)
		}
		if i != len(chunks) {
			// A gap: chunks before the last are written in parallel, so an
			// interrupted commit may lack any of them; a complete entry
			// never does.
			if last(kv.Value) {
				return damaged("log entry %d: its last chunk %d follows %d chunk(s)", seq, i, len(chunks))
			}
			partial = true
		}
		chunks = append(chunks, kv.Value)
		if kv.Value[0]&^chunkFlags != 0 {
			return damaged("log entry %d: chunk %d has flags %d", seq, i, kv.Value[0])
		}
		if last(kv.Value) {
			if partial {
				return damaged("log entry %d: its last chunk follows a gap", seq)
			}
			if err := flush(); err != nil {
				return err
			}
			expect++
			cur, chunks = 0, nil
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return applied, readRev, 0, true, nil
	}
	if err != nil {
		if isDamage(err) {
			return 0, 0, 0, false, err
		}
		return 0, 0, 0, false, unavailable("read the log", err)
	}
	if cur != 0 {
		torn = cur
	}
	return applied, readRev, torn, false, nil
}

var errStop = errors.New("stop")

// applyEntry decodes one complete log entry into st.
func (s *Store) applyEntry(st *state, seq uint64, chunks [][]byte) error {
	n, err := decodeEntry(chunks, func(kind, key string, value []byte) error {
		st.apply(kind, key, value)
		return nil
	})
	if err != nil {
		return damaged("log entry %d: %v", seq, err)
	}
	st.seq = seq
	st.logBytes += n
	return nil
}

// startTail follows the log from s.rev (a standby's warm copy).
func (s *Store) startTail() {
	ctx, cancel := context.WithCancel(s.ctx)
	s.tailStop, s.tailDone = cancel, make(chan struct{})
	go s.tail(ctx, s.tailDone)
}

// stopTail stops the tail and waits for it.
func (s *Store) stopTail() {
	if s.tailStop == nil {
		return
	}
	s.tailStop()
	<-s.tailDone
	s.tailStop = nil
}

// tail applies each log entry as its last chunk is written; a watch that
// fails is opened again from the last revision seen, and one whose
// revision was compacted away (or that skips an entry) reads everything
// again.
func (s *Store) tail(ctx context.Context, done chan struct{}) {
	defer close(done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if resync := s.watchOnce(ctx); resync {
			st, rev, torn, err := s.read(ctx)
			if err != nil {
				s.log.Warn("standby: reading the store again failed", "err", err)
			} else {
				s.mu.Lock()
				s.st, s.rev, s.torn = st, rev, torn
				s.mu.Unlock()
				backoff = 100 * time.Millisecond
				continue
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// watchOnce watches the log from the store's revision until the watch
// ends; resync says the copy must be read again.
func (s *Store) watchOnce(ctx context.Context) (resync bool) {
	s.mu.RLock()
	from := s.rev + 1
	s.mu.RUnlock()
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	pending := map[uint64]map[int][]byte{} // the chunks seen of entries not complete yet
	for wr := range s.cli.Watch(wctx, s.keys.logPrefix(), clientv3.WithPrefix(), clientv3.WithRev(from)) {
		if wr.CompactRevision != 0 || errors.Is(wr.Err(), rpctypes.ErrCompacted) {
			return true
		}
		if err := wr.Err(); err != nil {
			s.log.Debug("standby: the watch ended", "err", err)
			return false
		}
		s.mu.Lock()
		for _, ev := range wr.Events {
			if ev.Type != mvccpb.PUT {
				continue // a snapshot deleting the log it covers
			}
			seq, i, ok := s.keys.parseChunk(string(ev.Kv.Key), "log")
			if !ok || seq <= s.st.seq {
				continue
			}
			if seq != s.st.seq+1 || len(ev.Kv.Value) == 0 {
				s.mu.Unlock()
				return true
			}
			if pending[seq] == nil {
				pending[seq] = map[int][]byte{}
			}
			pending[seq][i] = ev.Kv.Value
			if !last(ev.Kv.Value) {
				continue
			}
			// The last chunk is written after every other one succeeded.
			chunks := make([][]byte, i+1)
			for k := range chunks {
				if chunks[k] = pending[seq][k]; chunks[k] == nil {
					s.mu.Unlock()
					return true
				}
			}
			if err := s.applyEntry(s.st, seq, chunks); err != nil {
				s.log.Error("standby: a log entry does not decode", "err", err)
				s.mu.Unlock()
				return true
			}
			delete(pending, seq)
		}
		s.rev = wr.Header.Revision
		s.torn = 0
		if len(pending) > 0 {
			s.torn = s.st.seq + 1
		}
		s.mu.Unlock()
	}
	return false
}
