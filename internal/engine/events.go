package engine

import (
	"context"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// Event is one durable change, as GET /api/v1/events streams it.
type Event struct {
	Seq    uint64    `json:"seq"`
	Kind   string    `json:"kind"` // task, job, node or service
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

// eventLog is a ring of the latest events, with its own lock: event
// clients read it without published.mu. Only the loop adds to it, and only
// when a commit that produced the events is published (publish), after the
// records it names: a client that reads an event then finds the record at
// least as new.
type eventLog struct {
	mu     sync.Mutex // guards the fields below; the loop reads next without it (it alone writes it)
	ring   []Event
	next   uint64        // seq of the next event (the first ever is 1)
	first  uint64        // seq of the first event of this server's life
	notify chan struct{} // closed and replaced when events are added
}

// metaEventsKey holds, in the store, the seq after the last event that a
// commit produced, so that seqs keep increasing across restarts and a
// client's cursor from an earlier life is never mistaken for a new event.
const metaEventsKey = "events.next"

// metaClusterKey holds the cluster id, made when a store is first opened.
const metaClusterKey = "cluster.id"

// reset empties the log; the next event is next.
func (l *eventLog) reset(next uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring, l.next, l.first = make([]Event, eventRetention), next, next
}

// begin starts adding one commit's events: add them, then end. Only the
// loop adds events.
func (l *eventLog) begin() { l.mu.Lock() }

// add appends ev. Called between begin and end.
func (l *eventLog) add(ev Event) {
	ev.Seq = l.next
	l.ring[l.next%eventRetention] = ev
	l.next++
}

// end finishes adding events: started is next as begin found it. Waiting
// readers are woken when any event was added.
func (l *eventLog) end(started uint64) {
	if l.next != started && l.notify != nil {
		close(l.notify)
		l.notify = nil
	}
	l.mu.Unlock()
}

// LatestEvent is the seq of the latest event (0: none yet): Events from
// it returns what happens next, without waiting for it as FromNow does.
func (e *Engine) LatestEvent() uint64 {
	e.events.mu.Lock()
	defer e.events.mu.Unlock()
	return e.events.next - 1
}

// FromNow, as Events' since, means "events from now on".
const FromNow = ^uint64(0)

// Events returns up to limit events with seq > since, waiting until at least
// one exists or ctx ends. since=FromNow means "from now on"; since=0 means
// from the oldest event retained. An error names since when it is older
// than the retained history (after a restart, events before it are gone,
// though their numbers go on: the client lists again).
func (e *Engine) Events(ctx context.Context, since uint64, limit int) ([]Event, uint64, error) {
	return e.events.read(ctx, since, limit, e.done)
}

// read is Events; done is closed when the engine stops.
func (l *eventLog) read(ctx context.Context, since uint64, limit int, done <-chan struct{}) ([]Event, uint64, error) {
	for {
		l.mu.Lock()
		if since == FromNow {
			since = l.next - 1
		}
		if since == 0 {
			since = l.oldest() - 1
		}
		if since >= l.next {
			err := errs.Invalid("since", "event %d has not happened yet (the latest is %d)", since, l.next-1)
			l.mu.Unlock() // l.next is read under the lock: the loop moves it
			return nil, since, err
		}
		// Events before this server started, and those pushed out of the
		// ring, are gone.
		oldest := l.oldest()
		if since+1 < oldest {
			err := errs.Invalid("since", "events before %d are no longer kept; list the objects again and resume from %d", oldest, l.next-1)
			l.mu.Unlock()
			return nil, since, err
		}
		if since+1 < l.next {
			var out []Event
			for s := since + 1; s < l.next && len(out) < limit; s++ {
				out = append(out, l.ring[s%eventRetention])
			}
			l.mu.Unlock()
			return out, out[len(out)-1].Seq, nil
		}
		if l.notify == nil {
			l.notify = make(chan struct{})
		}
		ch := l.notify
		l.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, since, nil
		case <-done:
			return nil, since, ErrStopped
		}
	}
}

// oldest is the seq of the oldest event still retained (the next one's
// when none is). Called under mu.
func (l *eventLog) oldest() uint64 {
	oldest := max(l.first, uint64(1))
	if l.next > eventRetention {
		oldest = max(oldest, l.next-eventRetention)
	}
	return oldest
}
