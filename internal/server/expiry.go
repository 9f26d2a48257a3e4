package server

import (
	"sync"
	"time"
)

// expiry ends the waits of POST /schedule requests without a timer (or a
// context with a deadline) per request: requests whose deadlines fall in
// the same slot share one channel, closed by one timer when the slot ends.
// A slot is wait/100 long, between 1 and 10 ms, and ends at or after each
// of its deadlines: a request is answered no earlier than its wait, and at
// most a slot later. A million requests waiting 10 minutes that arrived
// within a minute hold about 6,000 timers instead of a million.
//
// Times are offsets on the monotonic clock from the expiry's creation.
type expiry struct {
	once  sync.Once
	base  time.Time
	mu    sync.Mutex
	slots map[time.Duration]chan struct{}
}

func (x *expiry) init() {
	x.once.Do(func() {
		x.base = time.Now()
		x.slots = map[time.Duration]chan struct{}{}
	})
}

// deadline is the offset at which a wait of d that starts now ends.
func (x *expiry) deadline(d time.Duration) time.Duration {
	x.init()
	return time.Since(x.base) + d
}

// slotWidth is the slot length for waits of d.
func slotWidth(d time.Duration) time.Duration {
	return min(max(d/100, time.Millisecond), 10*time.Millisecond)
}

// at returns a channel closed once the offset deadline has passed (closed
// already if it has), for a wait of d.
func (x *expiry) at(deadline, d time.Duration) <-chan struct{} {
	x.init()
	now := time.Since(x.base)
	if deadline <= now {
		return closedChan
	}
	g := slotWidth(d)
	end := (deadline + g - 1) / g * g
	x.mu.Lock()
	ch, ok := x.slots[end]
	if !ok {
		ch = make(chan struct{})
		x.slots[end] = ch
		time.AfterFunc(end-now, func() {
			x.mu.Lock()
			delete(x.slots, end)
			x.mu.Unlock()
			close(ch)
		})
	}
	x.mu.Unlock()
	return ch
}

// closedChan is a closed channel.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()
