package etcdstore

import (
	"context"
	"encoding/json"
	"hash/crc32"
	"maps"
	"slices"
	"time"

	"github.com/klauspost/compress/s2"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hetsched/hetsched/internal/store"
)

// maybeSnapshot starts a snapshot when the log has outgrown both
// SnapshotMinBytes and the last snapshot (so rewriting the state at most
// doubles what is written, and a restart reads at most twice the state).
// Called by Commit with mu held.
func (s *Store) maybeSnapshot() {
	st := s.st
	if s.snapping || !s.writer || st.logBytes < max(s.opt.SnapshotMinBytes, st.snapBytes) {
		return
	}
	// The records' values are never changed in place (a commit replaces
	// them), so a copy of the maps is a consistent view at st.seq.
	view := make(map[string]map[string][]byte, len(st.kinds))
	for k, m := range st.kinds {
		view[k] = maps.Clone(m)
	}
	s.snapping = true
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		err := s.snapshot(view, st.seq, st.logBytes)
		s.mu.Lock()
		s.snapping = false
		s.mu.Unlock()
		if err != nil && s.ctx.Err() == nil {
			s.log.Warn("etcd store: writing a snapshot failed (the log keeps growing until one succeeds)", "err", err)
		}
	}()
}

// snapshot writes view (the state at entry seq) as a snapshot, points to
// it, deletes the log and the snapshots it replaces, compacts etcd's
// history of them and, when that frees enough, defragments the members.
// Every write is guarded by the fence: a deposed leader's snapshot stops.
func (s *Store) snapshot(view map[string]map[string][]byte, seq uint64, logBytes int64) error {
	t0 := time.Now()
	ctx := s.ctx
	s.mu.RLock()
	fence := s.fence
	s.mu.RUnlock()
	put := func(key string, value []byte) (*clientv3.TxnResponse, error) {
		tctx, cancel := context.WithTimeout(ctx, s.opt.RequestTimeout)
		defer cancel()
		resp, err := s.cli.Txn(tctx).If(fence...).Then(clientv3.OpPut(key, string(value))).Commit()
		if err == nil && !resp.Succeeded {
			return nil, ErrFenced
		}
		return resp, err
	}
	p := pointer{Seq: seq}
	sink := &chunkSink{size: s.opt.ChunkBytes, flags: chunkS2, emit: func(c []byte) error {
		if _, err := put(s.keys.snapChunk(seq, p.Chunks), c); err != nil {
			return err
		}
		p.CRC32C = crc32.Update(p.CRC32C, castagnoli, c[1:])
		p.Bytes += int64(len(c) - 1)
		p.Chunks++
		return nil
	}}
	zw := s2.NewWriter(sink, s2.WriterConcurrency(1))
	var buf []byte
	for _, kind := range slices.Sorted(maps.Keys(view)) {
		m := view[kind]
		for _, key := range slices.Sorted(maps.Keys(m)) {
			buf = appendRecord(buf[:0], store.Record{Kind: kind, Key: key, Value: m[key]})
			if _, err := zw.Write(buf); err != nil {
				return err
			}
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := sink.Close(); err != nil {
		return err
	}
	pv, _ := json.Marshal(p)
	if _, err := put(s.keys.pointer(), pv); err != nil {
		return err
	}
	// What the new snapshot replaces: the log through seq, every other
	// snapshot.
	logLo, logHi := s.keys.logThrough(seq)
	snapLo, _ := s.keys.snapAll()
	keepLo, keepHi := s.keys.snapRange(seq)
	_, snapHi := s.keys.snapAll()
	tctx, cancel := context.WithTimeout(ctx, s.opt.RequestTimeout)
	resp, err := s.cli.Txn(tctx).If(fence...).Then(
		clientv3.OpDelete(logLo, clientv3.WithRange(logHi)),
		clientv3.OpDelete(snapLo, clientv3.WithRange(keepLo)),
		clientv3.OpDelete(keepHi, clientv3.WithRange(snapHi)),
	).Commit()
	cancel()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		return ErrFenced
	}
	s.mu.Lock()
	s.st.snapSeq, s.st.snapBytes = seq, p.Bytes
	s.st.logBytes -= logBytes
	s.mu.Unlock()
	s.log.Info("etcd store: snapshot written", "entry", seq, "bytes", p.Bytes, "chunks", p.Chunks, "took", time.Since(t0).Round(time.Millisecond))
	s.compact(ctx, resp.Header.Revision)
	return nil
}

// compact drops etcd's history before rev (what the snapshot replaced),
// then defragments each member whose database could give back
// DefragMinFree and at least half of its size. A standby watching from
// before rev reads the store again.
func (s *Store) compact(ctx context.Context, rev int64) {
	tctx, cancel := context.WithTimeout(ctx, s.opt.RequestTimeout)
	_, err := s.cli.Compact(tctx, rev)
	cancel()
	if err != nil {
		s.log.Debug("etcd store: compaction", "rev", rev, "err", err) // an equal or later one ran
	}
	if s.opt.DefragMinFree < 0 {
		return
	}
	for _, ep := range s.cli.Endpoints() {
		tctx, cancel := context.WithTimeout(ctx, s.opt.RequestTimeout)
		st, err := s.cli.Status(tctx, ep)
		cancel()
		if err != nil {
			continue
		}
		free := st.DbSize - st.DbSizeInUse
		if free < s.opt.DefragMinFree || free < st.DbSize/2 {
			continue
		}
		t0 := time.Now()
		// Defragmenting rewrites the member's database and blocks it
		// meanwhile: one member at a time, a minute at most.
		dctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err = s.cli.Defragment(dctx, ep)
		cancel()
		s.log.Info("etcd store: defragmented a member", "endpoint", ep, "freed", free, "took", time.Since(t0).Round(time.Millisecond), "err", err)
	}
}
