// Package procs adapts a process's GOMAXPROCS to the CPU it uses.
//
// A Go process with more Ps than it keeps busy pays for the idle ones:
// each goroutine woken while a P is idle wakes a thread to look for work
// (a futex call, then a spin in the scheduler's findRunnable) that finds
// little and sleeps again. `hetsched kube` is such a process: it follows
// an API server's watch streams and Bindings, mostly well under a core,
// in many short wake-ups. On the 2-vCPU development VM one P cost 12-14 %
// less CPU per pod than Go's default of two at the same load (BENCHMARKS.md,
// `bench kube` runs together). The Governor runs on one P while the load
// fits in it, and adds Ps as soon as it does not, up to Go's default.
// The ceiling is read once, at the start: once GOMAXPROCS has been set,
// Go no longer follows a change of the container's CPU limit, and
// neither does the Governor.
//
// Glossary:
//
//	P        a Go scheduler processor: GOMAXPROCS of them run Go code at once
//	load     the process's CPU (user+system) over one interval, in cores
//	ceiling  the most Ps the Governor sets: Go's default GOMAXPROCS (the
//	         CPUs, or the container's CPU limit)
//	busy     a load of at least Up of the Ps there are: one P more (twice
//	         as many, up to the ceiling) at once
//	idle     a load under Down of one P fewer, for Idle intervals in a
//	         row: one P fewer
package procs

import (
	"context"
	"time"
)

// Governor decides a process's Ps from its load. Its zero thresholds are
// the defaults below; Ceiling, CPU and Set are required.
type Governor struct {
	Ceiling int
	// CPU is the process's user+system CPU so far.
	CPU func() time.Duration
	// Set sets GOMAXPROCS (runtime.GOMAXPROCS).
	Set func(n int)
	// Now is the clock Run measures intervals with (default time.Now).
	Now func() time.Time
	// Up is the share of the Ps' time a load must reach to add Ps
	// (default 0.7); Down the share of one P fewer a load must stay
	// under, Idle intervals in a row, to take one away (default 0.4, 10).
	Up, Down float64
	Idle     int

	procs, idleFor int
}

// Defaults.
const (
	DefaultUp       = 0.7
	DefaultDown     = 0.4
	DefaultIdle     = 10
	DefaultInterval = time.Second
)

// Start fills in the default thresholds, sets one P and returns it.
func (g *Governor) Start() int {
	if g.Up == 0 {
		g.Up = DefaultUp
	}
	if g.Down == 0 {
		g.Down = DefaultDown
	}
	if g.Idle == 0 {
		g.Idle = DefaultIdle
	}
	g.procs = 1
	g.Set(1)
	return 1
}

// Observe takes the load of one interval (cpu used over wall) and returns
// the Ps from now on, having set them when they changed.
func (g *Governor) Observe(cpu, wall time.Duration) int {
	if wall <= 0 {
		return g.procs
	}
	load := cpu.Seconds() / wall.Seconds()
	n := g.procs
	switch {
	case load >= g.Up*float64(n) && n < g.Ceiling:
		n = min(g.Ceiling, 2*n)
		g.idleFor = 0
	case n > 1 && load < g.Down*float64(n-1):
		if g.idleFor++; g.idleFor >= g.Idle {
			n--
			g.idleFor = 0
		}
	default:
		g.idleFor = 0
	}
	if n != g.procs {
		g.procs = n
		g.Set(n)
	}
	return n
}

// Run starts the Governor and observes the load every interval (ticks:
// a time.Ticker's channel, say) until ctx ends.
func (g *Governor) Run(ctx context.Context, ticks <-chan time.Time) {
	now := g.Now
	if now == nil {
		now = time.Now
	}
	last, at := g.CPU(), now()
	g.Start()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
			cpu, t := g.CPU(), now()
			g.Observe(cpu-last, t.Sub(at))
			last, at = cpu, t
		}
	}
}
