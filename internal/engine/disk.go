package engine

import (
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

// roomForWork refuses new work while the store's disk is below its
// reserve. (The store logs each crossing of the reserve; each refusal is
// counted in hetsched_refused_total.)
func (e *Engine) roomForWork() error {
	sp, _, ok := e.Disk()
	if !ok || !sp.Low {
		return nil
	}
	if m := e.cfg.Metrics; m != nil {
		m.Refused.WithLabelValues("insufficient_storage").Inc()
	}
	return errs.New(errs.InsufficientStorage, "", "the store's disk has %s free, below its reserve of %s: new tasks, jobs and queue changes are refused until space is freed (reads, cancels, completions and agents go on)",
		store.FormatBytes(sp.Free), store.FormatBytes(sp.Reserve))
}

// gaugeDisk refreshes the store's disk gauges.
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
