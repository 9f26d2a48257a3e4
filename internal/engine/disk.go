package engine

import (
	"time"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store"
)

// The store's disk (issue 15 §5).
//
// Below the store's free-space reserve the engine refuses new work: task
// and job submissions and queue changes answer InsufficientStorage (507).
// Everything that finishes or frees work goes on — cancels, completions,
// renewals, agents' registrations, heartbeats and reports, node
// administration — and so do the engine's own commits (placements,
// expiries), which are small and fit in the reserve. Writes resume by
// themselves once space is freed. A commit that fails anyway (the disk is
// full after all, or fails) stops the engine as before: nothing more is
// acknowledged, reads still work.

// diskReporter is a store that knows its disk (store.Disk).
type diskReporter interface {
	Space() store.Space
	Err() error
}

// Disk reports the store's free space and failure, when its store knows
// them (ok false for a store without a disk).
func (e *Engine) Disk() (sp store.Space, failed error, ok bool) {
	d, ok := e.st.(diskReporter)
	if !ok {
		return store.Space{}, nil, false
	}
	return d.Space(), d.Err(), true
}

// diskAmplification is how many bytes of disk a byte of a commit may
// take before compaction gives them back: the write-ahead log, the
// memtable's flush, and a compaction's inputs and outputs side by side.
// It is an estimate from how Pebble writes, not a measurement: on a
// 20 MiB tmpfs with a 1 KiB reserve (TestDiskFilledWhileSubmitting)
// Pebble's own background writes still ran the disk full; the reserve is
// what absorbs them.
const diskAmplification = 3

// recordOverhead is what a task's record adds to its spec's bytes (its
// state, times, attempts and keys), for the estimate.
const recordOverhead = 512

// roomForWork refuses new work of about size bytes (its records' encoded
// size; 0 for a small change) while the store's disk is below its
// reserve, or when the work would take it there: a commit may take
// diskAmplification times its size before compaction returns it, so one
// batch admitted just above the reserve cannot run the disk full (it
// did: ENOSPC, and the store stopped). (The store logs each crossing of
// the reserve; each refusal is counted in hetsched_refused_total.)
func (e *Engine) roomForWork(size int64) error {
	sp, _, ok := e.Disk()
	if !ok {
		return nil
	}
	need := uint64(max(size, 0)) * diskAmplification
	switch {
	case sp.Low:
		e.countRefusal()
		return errs.New(errs.InsufficientStorage, "", "the store's disk has %s free, below its reserve of %s: new tasks, jobs and queue changes are refused until space is freed (reads, cancels, completions and agents go on)",
			store.FormatBytes(sp.Free), store.FormatBytes(sp.Reserve))
	case sp.Free-sp.Reserve < need:
		e.countRefusal()
		return errs.New(errs.InsufficientStorage, "", "this write (about %s of records, up to %s of disk until compacted) does not fit in the %s free above the store's reserve of %s (%s free): send less at once, or free space",
			store.FormatBytes(uint64(size)), store.FormatBytes(need), store.FormatBytes(sp.Free-sp.Reserve), store.FormatBytes(sp.Reserve), store.FormatBytes(sp.Free))
	}
	return nil
}

func (e *Engine) countRefusal() {
	if m := e.cfg.Metrics; m != nil {
		m.Refused.WithLabelValues("insufficient_storage").Inc()
	}
}

// diskGaugeEvery is how often the disk gauges are refreshed outside the
// loop (gaugeDiskLoop).
const diskGaugeEvery = time.Second

// gaugeDiskLoop refreshes the disk gauges every diskGaugeEvery until
// Close, from its own goroutine: a loop stopped by a failed commit
// refreshes nothing, and its gauges said the store was writable. It
// closes gaugesDone when it ends.
func (e *Engine) gaugeDiskLoop() {
	defer close(e.gaugesDone)
	t := time.NewTicker(diskGaugeEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.gaugeDisk()
		case <-e.quit:
			return
		}
	}
}

// gaugeDisk refreshes the store's disk gauges (from any goroutine: the
// store's Space and the engine's Err are safe to read).
func (e *Engine) gaugeDisk() {
	m := e.cfg.Metrics
	sp, failed, ok := e.Disk()
	if m == nil || !ok {
		return
	}
	m.StoreFreeBytes.Set(float64(sp.Free))
	m.StoreReserve.Set(float64(sp.Reserve))
	writable := 1.0
	if sp.Low || failed != nil || e.Err() != nil {
		writable = 0
	}
	m.StoreWritable.Set(writable)
}
