// Package series keeps a server's recent history in memory: a sample of
// the cluster every period (allocation and measured utilization per
// resource, waiting tasks per tier and per queue), the last hour of them,
// so that the web UI draws its charts without a Prometheus.
//
// Glossary:
//   - Point: one sample, taken at At.
//   - Recorder: the ring of the latest points (safe for concurrent use);
//     Run fills it every period until its context ends.
package series

import (
	"context"
	"maps"
	"sync"
	"time"
)

// Point is the cluster at one time.
type Point struct {
	At time.Time `json:"at"`
	// Allocated is, per resource, the fraction of its capacity that
	// placed tasks hold; Utilization the fraction the agents measured in
	// use (only the resources some agent reported).
	Allocated   map[string]float64 `json:"allocated"`
	Utilization map[string]float64 `json:"utilization,omitempty"`
	// PendingByTier counts the waiting tasks by tier; PendingByQueue by
	// queue (every waiting task, its dependencies' too).
	PendingByTier  map[string]int `json:"pendingByTier"`
	PendingByQueue map[string]int `json:"pendingByQueue,omitempty"`
}

// Recorder holds the latest points, oldest first.
type Recorder struct {
	mu   sync.Mutex
	ring []Point
	next int  // where the next point goes
	full bool // every slot holds a point
}

// New is a recorder of the latest keep points (keep > 0).
func New(keep int) *Recorder { return &Recorder{ring: make([]Point, max(keep, 1))} }

// Add records p (the recorder keeps it: p's maps must not change after).
func (r *Recorder) Add(p Point) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ring[r.next] = p
	r.next = (r.next + 1) % len(r.ring)
	r.full = r.full || r.next == 0
}

// Points returns the points taken at or after since, oldest first, with
// only the queues keep keeps (nil keeps all); their maps are shared and
// must not be changed.
func (r *Recorder) Points(since time.Time, keep func(queue string) bool) []Point {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, start := r.next, 0
	if r.full {
		n, start = len(r.ring), r.next
	}
	out := make([]Point, 0, n)
	for i := 0; i < n; i++ {
		p := r.ring[(start+i)%len(r.ring)]
		if p.At.Before(since) {
			continue
		}
		if keep != nil && p.PendingByQueue != nil {
			q := make(map[string]int, len(p.PendingByQueue))
			for name, c := range p.PendingByQueue {
				if keep(name) {
					q[name] = c
				}
			}
			p.PendingByQueue = q
		} else {
			p.PendingByQueue = maps.Clone(p.PendingByQueue)
		}
		out = append(out, p)
	}
	return out
}

// Run adds a sample every period until ctx ends: sample is called with
// the tick's time; a failed sample is reported to failed (nil: dropped)
// and skipped.
func (r *Recorder) Run(ctx context.Context, period time.Duration, sample func(context.Context, time.Time) (Point, error), failed func(error)) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			sctx, cancel := context.WithTimeout(ctx, period)
			p, err := sample(sctx, now)
			cancel()
			if err != nil {
				if failed != nil && ctx.Err() == nil {
					failed(err)
				}
				continue
			}
			r.Add(p)
		}
	}
}
