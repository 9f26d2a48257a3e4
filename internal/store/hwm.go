package store

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hetsched/hetsched/internal/errs"
)

// The acknowledged high-water mark (issue 41 §5).
//
// The write-ahead log is the only copy of a commit until Pebble flushes
// it. A log cut short at a record boundary (a disk that lost its tail, a
// file truncated by hand or by a broken copy) replays cleanly, and the
// commits it lost vanish without a trace. So:
//   - Every commit carries a mark in the same batch: its number (growing
//     by one per commit, big-endian) as the value of one of markSlots
//     keys (markPrefix and the number modulo markSlots). After a replay
//     the largest value of the slots is the last commit the log holds: a
//     commit overwrites the slot of the one markSlots before it, which,
//     with fewer commits than that in flight at once, was applied before
//     it. (A key per commit, each deleting an old one, filled the tables
//     with tombstones that compactions then rewrote.)
//   - The largest number whose commit was acknowledged (Commit returned
//     nil, after the log's fsync) is written to the file ACKED in the data
//     directory, at most hwmEvery after the acknowledgement and at Close,
//     each time synced. It never exceeds what is durable, and lags it by
//     at most hwmEvery (a crash loses only the mark's last moments, never
//     raises a false alarm).
//   - Opening the store compares the two: a log that ends below ACKED
//     lost acknowledged commits, and the store refuses to open, naming the
//     gap. An operator who knows why (a backup restored over the
//     directory) removes ACKED to start from what the log holds.
//
// The file holds two 32-byte slots written in turn (magic, number,
// CRC-32C), so a torn write of one leaves the other.

const (
	hwmName    = "ACKED"
	hwmSlot    = 32
	markSlots  = 256
	markPrefix = "\x00commit\x00" // no record's key starts with NUL (kinds are never empty)
)

// hwmEvery is the longest an acknowledged commit waits to be counted in
// ACKED.
var hwmEvery = 100 * time.Millisecond

var hwmMagic = [8]byte{'h', 'w', 'm', 0, 'v', '1', 0, 0}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

func markKey(n uint64) []byte {
	k := make([]byte, 0, len(markPrefix)+2)
	k = append(k, markPrefix...)
	return binary.BigEndian.AppendUint16(k, uint16(n%markSlots))
}

// lastMark is the largest commit mark in db (0 for none).
func lastMark(db *pebble.DB) (uint64, error) {
	lo := []byte(markPrefix)
	hi := append([]byte(markPrefix[:len(markPrefix)-1]), 1)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var last uint64
	for ok := it.First(); ok; ok = it.Next() {
		v := it.Value()
		if len(v) != 8 {
			return 0, errors.New("a commit mark of the wrong length")
		}
		last = max(last, binary.BigEndian.Uint64(v))
	}
	return last, it.Error()
}

// marks numbers the commits and keeps ACKED.
type marks struct {
	next  atomic.Uint64 // the last number given out
	acked atomic.Uint64 // the largest number acknowledged

	fs   vfs.FS
	path string
	lg   *slog.Logger

	mu      sync.Mutex // guards the file's writes
	f       vfs.File   // ACKED, open while the store is (nil until the first write)
	written uint64     // the number in the file
	slot    int        // the slot written next
	stop    chan struct{}
	done    chan struct{}
}

// readHWM reads ACKED: the largest valid slot's number, and whether the
// file exists.
func readHWM(fs vfs.FS, path string) (uint64, bool, error) {
	f, err := fs.Open(path)
	if err != nil {
		if os.IsNotExist(err) || errors.Is(err, os.ErrNotExist) {
			return 0, false, nil
		}
		return 0, false, err
	}
	defer f.Close()
	var buf [2 * hwmSlot]byte
	n, err := io.ReadFull(f, buf[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, true, err
	}
	var best uint64
	valid := false
	for s := 0; s+hwmSlot <= n; s += hwmSlot {
		if v, ok := decodeSlot(buf[s : s+hwmSlot]); ok {
			best, valid = max(best, v), true
		}
	}
	if !valid {
		return 0, true, errors.New("no valid record (damaged)")
	}
	return best, true, nil
}

func decodeSlot(b []byte) (uint64, bool) {
	if [8]byte(b[:8]) != hwmMagic || binary.BigEndian.Uint32(b[16:20]) != crc32.Checksum(b[:16], crc32c) {
		return 0, false
	}
	return binary.BigEndian.Uint64(b[8:16]), true
}

func encodeSlot(n uint64) []byte {
	b := make([]byte, hwmSlot)
	copy(b, hwmMagic[:])
	binary.BigEndian.PutUint64(b[8:16], n)
	binary.BigEndian.PutUint32(b[16:20], crc32.Checksum(b[:16], crc32c))
	return b
}

// checkMarks compares the log's last commit with ACKED: a log that ends
// below it lost acknowledged commits.
func checkMarks(fs vfs.FS, dir string, db *pebble.DB, lg *slog.Logger) (*marks, error) {
	path := filepath.Join(dir, hwmName)
	last, err := lastMark(db)
	if err != nil {
		return nil, errs.New(errs.Internal, "data-dir", "%s: read the last commit mark: %v", dir, err)
	}
	acked, exists, err := readHWM(fs, path)
	if err != nil {
		return nil, errs.New(errs.Internal, "data-dir", "%s: read %s: %v; if the directory is known good, remove %s to start from what the log holds", dir, path, err, path)
	}
	if exists && last < acked {
		return nil, errs.New(errs.Internal, "data-dir",
			"%s: the store's write-ahead log ends at commit %d, but commits up to %d were acknowledged: %d acknowledged commit(s) are missing (the newest log was truncated, lost or replaced). Refusing to start without them: restore the directory from a copy that has them; if starting from what the log holds is intended (a backup restored on purpose), remove %s",
			dir, last, acked, acked-last, path)
	}
	m := &marks{fs: fs, path: path, lg: lg, stop: make(chan struct{}), done: make(chan struct{})}
	m.next.Store(last)
	m.acked.Store(last)
	m.written = acked
	if !exists || acked != last {
		if err := m.write(last); err != nil {
			return nil, errs.New(errs.Internal, "data-dir", "%s: write %s: %v", dir, path, err)
		}
	}
	if !exists { // the new file's name must be durable too
		if err := syncDir(fs, dir); err != nil {
			m.f.Close()
			return nil, errs.New(errs.Internal, "data-dir", "%s: sync the directory: %v", dir, err)
		}
	}
	go m.loop()
	return m, nil
}

// number gives a commit its number and adds its mark to b.
func (m *marks) number(b *pebble.Batch) (uint64, error) {
	n := m.next.Add(1)
	if err := b.Set(markKey(n), binary.BigEndian.AppendUint64(nil, n), nil); err != nil {
		return 0, err
	}
	return n, nil
}

// acknowledged counts commit n as acknowledged.
func (m *marks) acknowledged(n uint64) {
	for {
		cur := m.acked.Load()
		if n <= cur || m.acked.CompareAndSwap(cur, n) {
			return
		}
	}
}

// loop writes ACKED every hwmEvery while it changed, until close.
func (m *marks) loop() {
	defer close(m.done)
	t := time.NewTicker(hwmEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-m.stop:
			return
		}
		m.flush()
	}
}

// flush writes the acknowledged number when it moved; a failure is
// logged (the mark lags; nothing is lost) and tried again next time.
func (m *marks) flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.acked.Load()
	if n <= m.written {
		return
	}
	if err := m.writeLocked(n); err != nil {
		m.lg.Warn("store: could not record the acknowledged commits' high-water mark (it lags; nothing is lost)", "file", m.path, "err", err)
	}
}

func (m *marks) write(n uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.writeLocked(n)
}

// writeLocked writes n to the next slot and syncs its data. The file is
// created at its full size once (both slots, then fsync), so that later
// writes change no metadata and fdatasync suffices. (What the mark costs
// commits is measured in BENCHMARKS.md, "The acknowledged high-water
// mark": the slot keys, not this file.)
func (m *marks) writeLocked(n uint64) error {
	if m.f == nil {
		f, err := m.fs.OpenReadWrite(m.path, vfs.WriteCategoryUnspecified)
		if err != nil {
			return err
		}
		if st, err := f.Stat(); err != nil || st.Size() < 2*hwmSlot {
			// Both slots hold n: a new file is whole before it is used.
			whole := append(encodeSlot(n), encodeSlot(n)...)
			_, werr := f.WriteAt(whole, 0)
			if werr == nil {
				werr = f.Sync()
			}
			if werr != nil {
				f.Close()
				return werr
			}
			m.f, m.written = f, n
			return nil
		}
		m.f = f
	}
	if _, err := m.f.WriteAt(encodeSlot(n), int64(m.slot*hwmSlot)); err != nil {
		return err
	}
	if err := m.f.SyncData(); err != nil {
		return err
	}
	m.written, m.slot = n, 1-m.slot
	return nil
}

// close stops the loop and writes the last acknowledged number.
func (m *marks) close() error {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	var err error
	if n := m.acked.Load(); n > m.written {
		err = m.writeLocked(n)
	}
	if m.f != nil {
		if cerr := m.f.Close(); err == nil {
			err = cerr
		}
		m.f = nil
	}
	return err
}
