// Package replicas decides how a service's replica tasks follow its spec
// (issue 44 §1): how many to start and which to stop so that the count
// asked for runs, failed and lost replicas are replaced after a backoff,
// and a changed template rolls out replica by replica within maxSurge and
// maxUnavailable, as Kubernetes' Deployment controller rolls a
// ReplicaSet. A pure type: replicas and the time in, a plan out; the
// server's service controller carries the plan out.
//
// Glossary:
//
//	revision    the hash of the template a replica was made from; the
//	            spec's is the current one, the others are old
//	available   a replica that runs and is ready
//	surge       replicas above the count asked for, during a rollout
//	unavailable the count asked for less the available ones
//	backoff     the wait before a failed replica is replaced: 10 s,
//	            doubling per failure in a row, at most 5 minutes
//	            (Kubernetes' CrashLoopBackOff), back to 10 s after a
//	            replica ran 10 minutes
package replicas

import (
	"cmp"
	"slices"
	"time"
)

// Backoff bounds.
const (
	BackoffFirst = 10 * time.Second
	BackoffMax   = 5 * time.Minute
	// BackoffReset is how long a replica must run for the failures
	// before it to stop counting.
	BackoffReset = 10 * time.Minute
)

// Spec is what the service asks for.
type Spec struct {
	Replicas       int
	Revision       string
	MaxSurge       int // default 1 (Rollout), as API.md's example
	MaxUnavailable int // default 1; MaxSurge and MaxUnavailable are not both 0
}

// Replica is one replica task as the plan sees it.
type Replica struct {
	ID       string
	Revision string
	Running  bool // placed and started
	Ready    bool // its readiness probe passes (a replica without one is ready once running)
	Created  time.Time
}

// History is what the plan remembers of failures: consecutive failures
// and when the last one was seen.
type History struct {
	Failures int
	LastFail time.Time
}

// Failed records a replica's failure (or loss) at now, after it ran for
// ran: the backoff grows unless it ran past BackoffReset.
func (h *History) Failed(now time.Time, ran time.Duration) {
	if ran >= BackoffReset {
		h.Failures = 0
	}
	h.Failures++
	h.LastFail = now
}

// Backoff is the wait after the last failure before a replacement.
func (h *History) Backoff() time.Duration {
	if h.Failures == 0 {
		return 0
	}
	d := BackoffFirst
	for i := 1; i < h.Failures && d < BackoffMax; i++ {
		d *= 2
	}
	return min(d, BackoffMax)
}

// Plan is a reconciliation's answer.
//
// Obligations: the caller starts Create replicas of the spec's revision
// and stops the Stop replicas (by id); when Create is held back by the
// backoff, it plans again at RetryAt.
type Plan struct {
	Create  int
	Stop    []string
	RetryAt time.Time // zero: no retry pending
}

// Reconcile plans the next step at now for spec, the live replicas (not
// ended: those are the history's failures) and the history. It stops
// surplus old replicas first and never takes the available count below
// spec.Replicas-MaxUnavailable by its stops, nor the total above
// spec.Replicas+MaxSurge by its starts.
func Reconcile(now time.Time, spec Spec, live []Replica, h History) Plan {
	var p Plan
	surge, unavail := spec.MaxSurge, spec.MaxUnavailable
	if surge == 0 && unavail == 0 {
		unavail = 1 // as the API refuses both 0, never stuck
	}
	var cur, old []Replica
	available := 0
	for _, r := range live {
		if r.Revision == spec.Revision {
			cur = append(cur, r)
		} else {
			old = append(old, r)
		}
		if r.Running && r.Ready {
			available++
		}
	}
	total := len(live)
	// Starts: the current revision up to the count asked for, within the
	// surge; after a failure, once its backoff passed.
	if want := min(spec.Replicas-len(cur), spec.Replicas+surge-total); want > 0 {
		if h.Failures > 0 && now.Before(h.LastFail.Add(h.Backoff())) {
			p.RetryAt = h.LastFail.Add(h.Backoff())
		} else {
			p.Create = want
		}
	}
	// Stops: surplus current replicas beyond the count (a scale-down),
	// then old ones, the least useful first, as far as availability
	// allows (an unavailable one may always go).
	minAvail := spec.Replicas - unavail
	stop := func(r Replica) bool {
		if r.Running && r.Ready {
			if available-1 < minAvail {
				return false
			}
			available--
		}
		p.Stop = append(p.Stop, r.ID)
		return true
	}
	sortLeastUseful(cur)
	for i := 0; i < len(cur)-spec.Replicas; i++ {
		stop(cur[i])
	}
	sortLeastUseful(old)
	for _, r := range old {
		stop(r)
	}
	return p
}

// sortLeastUseful orders replicas to stop: not placed, then not ready,
// then the newest (Kubernetes' ReplicaSet picks pods to delete so).
func sortLeastUseful(rs []Replica) {
	rank := func(r Replica) int {
		switch {
		case !r.Running:
			return 0
		case !r.Ready:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(rs, func(a, b Replica) int {
		if c := cmp.Compare(rank(a), rank(b)); c != 0 {
			return c
		}
		return b.Created.Compare(a.Created)
	})
}
