package engine

import (
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
)

// Heartbeats' own lane (issue 41 §3).
//
// A heartbeat that changes nothing durable (its agent registered and
// serving every node it names, none of them notready, no device's health
// changed: nearly all of them) is recorded where it arrives, on the
// caller's goroutine, never queued behind the loop's step: a bulk
// submission whose step took seconds made agents miss their deadline and
// fence their running tasks. Contracts:
//   - liveness (each agent node's last heartbeat) has its own lock; the
//     loop judges it (checkLiveness) and the lane writes it. A time only
//     moves forward (heard keeps the later of two).
//   - A lane heartbeat's usage sample reaches the core at the loop's next
//     step (samples: the latest per node; one that arrives while an
//     earlier one waits replaces it), and wakes the loop for it.
//   - Any other heartbeat goes through the loop as before (agents.go).

// liveness is when each agent node was last heard from. Guarded by mu;
// nextCheck is the loop's alone.
type liveness struct {
	mu        sync.Mutex
	last      map[string]time.Time
	nextCheck time.Time
}

func newLiveness() liveness { return liveness{last: map[string]time.Time{}} }

// heard notes that node's agent was heard from at t (registered or
// heartbeat); an earlier t than the one noted changes nothing.
func (l *liveness) heard(node string, t time.Time) {
	l.mu.Lock()
	if prev, ok := l.last[node]; !ok || t.After(prev) {
		l.last[node] = t
	}
	l.mu.Unlock()
}

// heardAll is heard for each node of beats, under one lock (a fake
// fleet's heartbeat names thousands).
func (l *liveness) heardAll(beats []agentapi.Beat, t time.Time) {
	l.mu.Lock()
	for i := range beats {
		if prev, ok := l.last[beats[i].Node]; !ok || t.After(prev) {
			l.last[beats[i].Node] = t
		}
	}
	l.mu.Unlock()
}

// lastOf is when node was last heard from, if it is tracked.
func (l *liveness) lastOf(node string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.last[node]
	return t, ok
}

// forget stops tracking node.
func (l *liveness) forget(node string) {
	l.mu.Lock()
	delete(l.last, node)
	l.mu.Unlock()
}

// tracked reports whether any node is tracked.
func (l *liveness) tracked() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.last) > 0
}

// restartAll notes every tracked node as heard at t (the end of a
// recovery: a restarted server judges them from then).
func (l *liveness) restartAll(t time.Time) {
	l.mu.Lock()
	for name := range l.last {
		l.last[name] = t
	}
	l.mu.Unlock()
}

// credit adds gap to the last heartbeat of every node heard before
// before, and says how many.
func (l *liveness) credit(before time.Time, gap time.Duration) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for name, t := range l.last {
		if t.Before(before) {
			l.last[name] = t.Add(gap)
			n++
		}
	}
	return n
}

// expired returns, at most twice per interval, the nodes whose last
// heartbeat is older than deadline at now, with that time.
func (l *liveness) expired(now time.Time, interval, deadline time.Duration) map[string]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Before(l.nextCheck) || len(l.last) == 0 {
		return nil
	}
	l.nextCheck = now.Add(interval / 2)
	var out map[string]time.Time
	for name, t := range l.last {
		if now.Sub(t) > deadline {
			if out == nil {
				out = map[string]time.Time{}
			}
			out[name] = t
		}
	}
	return out
}

// next is when the loop must wake for the liveness check.
func (l *liveness) next() (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.last) == 0 {
		return time.Time{}, false
	}
	return l.nextCheck, true
}

// samples are usage samples of lane heartbeats waiting for the loop: the
// latest per node. Guarded by mu.
type samples struct {
	mu      sync.Mutex
	pending map[string]core.NodeUsage
}

// putAll keeps each beat's sample as its node's latest.
func (s *samples) putAll(beats []agentapi.Beat) {
	s.mu.Lock()
	if s.pending == nil {
		s.pending = make(map[string]core.NodeUsage, len(beats))
	}
	for i := range beats {
		s.pending[beats[i].Node] = usageOf(&beats[i])
	}
	s.mu.Unlock()
}

// take returns the waiting samples and forgets them.
func (s *samples) take() map[string]core.NodeUsage {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending
	s.pending = nil
	return p
}

// usageOf is a heartbeat sample as the core takes it.
func usageOf(b *agentapi.Beat) core.NodeUsage {
	u := core.NodeUsage{CPU: b.CPU}
	if b.Simulated {
		u.CPU = 0 // not measured: the core's view of the node stays idle
	}
	if len(b.Devices) > 0 {
		u.Devices = make(map[string]float64, len(b.Devices))
		for id, d := range b.Devices {
			u.Devices[id] = d.Utilization
		}
	}
	return u
}

// laneBeat records a heartbeat off the loop when it may (see the
// contracts above), and reports whether it did.
func (e *Engine) laneBeat(agent string, beats []agentapi.Beat) bool {
	if len(beats) == 0 {
		return false
	}
	if known, missing := e.sessions.checkBeats(agent, beats); !known || missing != "" {
		return false
	}
	for i := range beats {
		v, ok := e.laneNodes.Load(beats[i].Node)
		if !ok {
			return false
		}
		if spec := v.(*api.Node); spec.State == api.NodeNotReady || healthChanges(spec, &beats[i]) {
			return false
		}
	}
	now := e.cfg.Now()
	e.live.heardAll(beats, now)
	e.samples.putAll(beats)
	e.sessions.beat(agent, beats, now)
	select {
	case e.nudge <- struct{}{}:
	default: // a wakeup is pending already
	}
	return true
}

// healthChanges reports whether b reports a device's health other than
// spec has it.
func healthChanges(spec *api.Node, b *agentapi.Beat) bool {
	for j := range spec.Devices {
		d := &spec.Devices[j]
		if s, ok := b.Devices[d.ID]; ok && s.Healthy != nil && *s.Healthy == d.Unhealthy {
			return true
		}
	}
	return false
}

// observeSamples gives the core the lane heartbeats' samples (on the
// loop, at each step).
func (e *Engine) observeSamples(now time.Time) {
	for node, u := range e.samples.take() {
		if e.staged.currentNode(node) == nil {
			continue // released meanwhile
		}
		if err := e.c.ObserveNode(now, node, u); err != nil {
			e.log.Warn("usage sample not applied", "node", node, "err", err)
		}
	}
}
