package server

import (
	"sync/atomic"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// admission sheds task submissions past capacity, least important first.
// Capacity is the number of submission requests in flight (being admitted,
// committed, or waiting for their placement in POST /schedule): a request
// holds its place from the moment its body is decoded until it is
// answered. Past shedShare[tier] of the maximum, a request whose most
// important task is of that tier is refused with 429 (rate_limited) and
// Retry-After, before it costs the engine anything: low-tier work goes
// first (at half the maximum), then medium (at 80 %), and urgent and high
// work only at the maximum itself, so that their latency holds while the
// low tier is saturated.
type admission struct {
	max      int64 // 0: unlimited
	inflight atomic.Int64
	shed     [4]atomic.Uint64
}

// shedShare is the share of the maximum in flight at which each tier
// (urgent, high, medium, low) is refused.
var shedShare = [4]float64{1, 1, 0.8, 0.5}

// enter admits a request whose most important task is of tier, or returns
// the error to answer with. An admitted request must call leave.
func (a *admission) enter(tier int) error {
	n := a.inflight.Add(1)
	if a.max <= 0 {
		return nil
	}
	if limit := int64(shedShare[tier] * float64(a.max)); n > limit {
		a.inflight.Add(-1)
		a.shed[tier].Add(1)
		return errs.New(errs.RateLimited, "", "server overloaded: %d submissions in flight, %s work is shed past %d: retry after 1s",
			n-1, api.TierNames[tier], limit)
	}
	return nil
}

func (a *admission) leave() { a.inflight.Add(-1) }

// tierOf is the most important tier among tasks (the request's tier).
func tierOf(tasks []api.Task) int {
	t := 3
	for i := range tasks {
		if p := tasks[i].PriorityOrDefault(); p >= 0 && p < t {
			t = p
		}
	}
	return t
}
