package store

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Space is the free space of the data dir's filesystem, as the engine needs
// it to refuse API writes before the disk is full.
type Space struct {
	Free    uint64 // bytes available to the store (statfs f_bavail)
	Total   uint64 // size of the filesystem
	Reserve uint64 // the free-space reserve in bytes
	// Low is Free < Reserve: API writes should be refused (507) while the
	// engine's own small commits still go through, into the reserve.
	Low bool
	// Err is set when free space could not be read; Free, Total and Low
	// then keep their last known values (zero and false before any).
	Err error
}

// Reserve defaults: min(1 GiB, 5 % of the filesystem).
const (
	defaultReserveMax     = 1 << 30
	defaultReservePercent = 5
)

// spaceRefresh is how old a cached Space may be.
const spaceRefresh = 100 * time.Millisecond

// spaceLogEvery limits how often crossing the reserve is logged.
const spaceLogEvery = 10 * time.Second

// defaultReserve is min(1 GiB, 5 % of total).
func defaultReserve(total uint64) uint64 {
	return min(defaultReserveMax, total/100*defaultReservePercent)
}

// StatFS reports the free and total bytes of the filesystem holding dir.
type StatFS func(dir string) (free, total uint64, err error)

// fsStatFS reads free space through a vfs.FS (statfs on the real disk).
func fsStatFS(fs vfs.FS) StatFS {
	return func(dir string) (uint64, uint64, error) {
		u, err := fs.GetDiskUsage(dir)
		return u.AvailBytes, u.TotalBytes, err
	}
}

// spaceWatch caches the data dir's free space: Space is called on every API
// write, statfs at most every spaceRefresh, or on the next call after a
// write failed (invalidate).
type spaceWatch struct {
	dir     string
	statfs  StatFS
	reserve uint64 // configured; 0: the default for the filesystem's size
	log     *slog.Logger

	cur     atomic.Pointer[spaceSample]
	stale   atomic.Bool
	mu      sync.Mutex // held while refreshing
	lastLog time.Time  // under mu
	wasLow  bool       // under mu
}

type spaceSample struct {
	Space
	at time.Time
}

func newSpaceWatch(dir string, statfs StatFS, reserve uint64, log *slog.Logger) *spaceWatch {
	w := &spaceWatch{dir: dir, statfs: statfs, reserve: reserve, log: log}
	w.mu.Lock()
	w.refreshLocked(time.Now())
	w.mu.Unlock()
	return w
}

// get returns the cached Space, refreshing it when old or invalidated. One
// caller refreshes; the others meanwhile get the previous sample.
func (w *spaceWatch) get() Space {
	s := w.cur.Load()
	now := time.Now()
	if now.Sub(s.at) < spaceRefresh && !w.stale.Load() {
		return s.Space
	}
	if !w.mu.TryLock() {
		return s.Space
	}
	defer w.mu.Unlock()
	if s = w.cur.Load(); now.Sub(s.at) < spaceRefresh && !w.stale.Load() {
		return s.Space
	}
	return w.refreshLocked(now)
}

// invalidate makes the next get read statfs again.
func (w *spaceWatch) invalidate() { w.stale.Store(true) }

func (w *spaceWatch) refreshLocked(now time.Time) Space {
	w.stale.Store(false)
	var s Space
	if prev := w.cur.Load(); prev != nil {
		s = prev.Space
	}
	free, total, err := w.statfs(w.dir)
	if err != nil {
		s.Err = fmt.Errorf("read free space of %s: %w", w.dir, err)
	} else {
		s = Space{Free: free, Total: total, Reserve: w.reserve}
		if s.Reserve == 0 {
			s.Reserve = defaultReserve(total)
		}
		s.Low = s.Free < s.Reserve
	}
	w.cur.Store(&spaceSample{Space: s, at: now})
	w.logChange(s, now)
	return s
}

// logChange logs crossing the reserve, at most once per spaceLogEvery
// (the state at that moment is what gets logged).
func (w *spaceWatch) logChange(s Space, now time.Time) {
	if s.Low == w.wasLow || now.Sub(w.lastLog) < spaceLogEvery {
		return
	}
	w.wasLow, w.lastLog = s.Low, now
	if s.Low {
		w.log.Warn("store: free disk space is below the reserve: API writes are refused until space is freed",
			"dir", w.dir, "free", FormatBytes(s.Free), "reserve", FormatBytes(s.Reserve), "total", FormatBytes(s.Total))
	} else {
		w.log.Info("store: free disk space is above the reserve again: writes accepted",
			"dir", w.dir, "free", FormatBytes(s.Free), "reserve", FormatBytes(s.Reserve))
	}
}

// FormatBytes writes n in the largest binary unit that keeps it >= 1, with
// one decimal (integer math).
func FormatBytes[T ~int64 | ~uint64 | ~int](v T) string {
	n := uint64(max(v, 0))
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i, div := 0, uint64(1)
	for i < len(units)-1 && n >= div<<10 {
		i, div = i+1, div<<10
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	tenths := n * 10 / div
	return fmt.Sprintf("%d.%d %s", tenths/10, tenths%10, units[i])
}
