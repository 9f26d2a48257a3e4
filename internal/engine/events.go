package engine

import (
	"context"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// Event is one durable change, as GET /api/v1/events streams it.
type Event struct {
	Seq    uint64    `json:"seq"`
	Kind   string    `json:"kind"` // task, job or node
	ID     string    `json:"id"`
	State  string    `json:"state"`
	Node   string    `json:"node,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Time   time.Time `json:"time"`
	// Tenant owns a task or job event (not sent: servers filter on it).
	Tenant string `json:"-"`
}

// eventRetention is how many recent events a client can resume from.
const eventRetention = 1 << 17

// eventLog is a ring of the latest events. Guarded by Engine.mu; events
// are added only after their change is durable.
type eventLog struct {
	ring   []Event
	next   uint64        // seq of the next event (the first ever is 1)
	first  uint64        // seq of the first event of this server's life
	notify chan struct{} // closed and replaced when events are added
	added  bool
}

// metaEventsKey holds, in the store, the seq after the last event that a
// commit produced, so that seqs keep increasing across restarts and a
// client's cursor from an earlier life is never mistaken for a new event.
const metaEventsKey = "events.next"

// metaClusterKey holds the cluster id, made when a store is first opened.
const metaClusterKey = "cluster.id"

func newEventLog(next uint64) eventLog {
	return eventLog{ring: make([]Event, eventRetention), next: next, first: next}
}

// add appends ev. Only the loop calls it (under Engine.mu), so the loop
// may read next without the lock.
func (l *eventLog) add(ev Event) {
	ev.Seq = l.next
	l.ring[l.next%eventRetention] = ev
	l.next++
	l.added = true
}

// wake tells waiting readers that events were added.
func (l *eventLog) wake() {
	if !l.added {
		return
	}
	l.added = false
	if l.notify != nil {
		close(l.notify)
		l.notify = nil
	}
}

// FromNow, as Events' since, means "events from now on".
const FromNow = ^uint64(0)

// Events returns up to limit events with seq > since, waiting until at least
// one exists or ctx ends. since=FromNow means "from now on"; since=0 means
// from the oldest event retained. An error names since when it is older
// than the retained history (after a restart, events before it are gone,
// though their numbers go on: the client lists again).
func (e *Engine) Events(ctx context.Context, since uint64, limit int) ([]Event, uint64, error) {
	for {
		e.mu.Lock()
		l := &e.events
		if since == FromNow {
			since = l.next - 1
		}
		if since == 0 {
			since = e.oldestEvent() - 1
		}
		if since >= l.next {
			err := errs.Invalid("since", "event %d has not happened yet (the latest is %d)", since, l.next-1)
			e.mu.Unlock() // l.next is read under the lock: the loop moves it
			return nil, since, err
		}
		// Events before this server started, and those pushed out of the
		// ring, are gone.
		oldest := e.oldestEvent()
		if since+1 < oldest {
			err := errs.Invalid("since", "events before %d are no longer kept; list the objects again and resume from %d", oldest, l.next-1)
			e.mu.Unlock()
			return nil, since, err
		}
		if since+1 < l.next {
			var out []Event
			for s := since + 1; s < l.next && len(out) < limit; s++ {
				out = append(out, l.ring[s%eventRetention])
			}
			e.mu.Unlock()
			return out, out[len(out)-1].Seq, nil
		}
		if l.notify == nil {
			l.notify = make(chan struct{})
		}
		ch := l.notify
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, since, nil
		case <-e.done:
			return nil, since, ErrStopped
		}
	}
}

// oldestEvent is the seq of the oldest event still retained (the next
// one's when none is). Called under e.mu.
func (e *Engine) oldestEvent() uint64 {
	l := &e.events
	oldest := max(l.first, uint64(1))
	if l.next > eventRetention {
		oldest = max(oldest, l.next-eventRetention)
	}
	return oldest
}
