package server

import (
	"context"
	"fmt"
	"time"

	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store"
)

// Recovery from a full disk (issue 41 §4).
//
// A write that fails for lack of space stops the store for good in this
// process: the Pebble goroutines that hit it are parked and never return
// (store's guardFS), so the store cannot be closed and opened again in
// place. Once space is back above the reserve, Run returns a
// RestartError; the hetsched command then replaces its process with a
// fresh one (the same binary, arguments and address; exec keeps the
// PID), which replays the log and opens only when it holds every
// acknowledged commit (the store's high-water mark), so nothing
// acknowledged is missing when it serves again. A failure of another kind
// (EIO: a failing disk) is left for an operator.

// RestartError says the server stopped so that a fresh process starts it
// again: its store failed for a full disk and space is back.
type RestartError struct {
	// Listen is the address served, which the new process must serve
	// too (a :0 port was chosen by this one).
	Listen string
	Reason string
}

func (e *RestartError) Error() string {
	return "the server must start again in a fresh process: " + e.Reason
}

// spaceCheckEvery is how often a server whose store failed looks at the
// free space; spaceBackFor how long space must stay back before it
// restarts (a disk that hovers at the edge does not make it restart in a
// loop).
const (
	spaceCheckEvery = time.Second
	spaceBackFor    = 3 * time.Second
)

// awaitSpace returns a RestartError once eng's store failed for a full
// disk and space stayed above the reserve for spaceBackFor; it returns
// nil when ctx ends. Without RestartOnSpace it only logs, once, that a
// restart would resume the server.
func (p *prepared) awaitSpace(ctx context.Context, eng *engine.Engine, addr string) error {
	t := time.NewTicker(spaceCheckEvery)
	defer t.Stop()
	var since time.Time
	told := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		sp, failed, ok := eng.Disk()
		if !ok || failed == nil || errs.CodeOf(failed) != errs.InsufficientStorage || !spaceBack(sp) {
			since = time.Time{}
			continue
		}
		if since.IsZero() {
			since = time.Now()
		}
		if time.Since(since) < spaceBackFor {
			continue
		}
		why := fmt.Sprintf("the store stopped on a full disk (%v) and %s are free again (reserve %s)",
			failed, store.FormatBytes(sp.Free), store.FormatBytes(sp.Reserve))
		if !p.opt.RestartOnSpace {
			if !told {
				p.lg.Warn(why + ": restart the server to resume (--restart-on-space is off)")
				told = true
			}
			continue
		}
		p.lg.Warn(why + ": starting again in a fresh process, which opens the store only if it holds every acknowledged commit")
		return &RestartError{Listen: addr, Reason: why}
	}
}

// spaceBack reports whether sp has room for the store again: the reserve,
// and what opening needs.
func spaceBack(sp store.Space) bool {
	return sp.Err == nil && !sp.Low && sp.Free >= store.OpenMinFree
}
