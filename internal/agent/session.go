package agent

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/serverlist"
)

// runner is what an agent does with its assignments: run real processes
// (Agent) or pretend to (Fleet). Its methods are called from the session's
// goroutines and must be safe for concurrent use.
type runner interface {
	// nodes returns the node specs to register (current device health).
	nodes() []api.Node
	// beats returns one heartbeat sample per node.
	beats() []agentapi.Beat
	// sync makes the running set equal to the snapshot.
	sync(snapshot []agentapi.Assignment)
	assign(a agentapi.Assignment)
	revoke(task string, attempt int, reason string)
	// fence kills every running task and reports it lost.
	fence(reason string)
}

// session keeps an agent connected: register, heartbeat, follow the
// assignment stream, reconnect with backoff and jitter; it fences the
// runner when heartbeats stop being acknowledged.
type session struct {
	name      string
	c         *client
	r         runner
	rep       *reporter
	log       *slog.Logger
	logs      string
	logsToken string

	lastAck  atomic.Int64 // send time (unix ns) of the last acknowledged heartbeat
	deadline atomic.Int64 // the server's notready deadline, ns (0 until registered)
	interval atomic.Int64 // the server's heartbeat interval, ns (0 until registered)
	fenced   atomic.Bool
	// connected counts successful registrations (tests wait on it).
	connected atomic.Int64
	// up is true from a registration until its assignment stream ends.
	up atomic.Bool
	// beatFailures counts heartbeats that failed (no answer, or an error
	// answer) while the session was up.
	beatFailures atomic.Int64
	// onAck, when set, is told the send time of each request the server
	// acknowledged as a sign of life (registration, heartbeat) and the
	// server's notready deadline.
	onAck func(sent time.Time, deadline time.Duration)
	// nudge asks for a heartbeat before the interval is over (a replica's
	// readiness changed: beatSoon).
	nudge chan struct{}
	// onRegister, when set, sees each registration's reply before the
	// stream opens; an error ends the session.
	onRegister func(*agentapi.RegisterReply) error
}

func (s *session) acked(sent time.Time) {
	s.lastAck.Store(sent.UnixNano())
	if s.onAck != nil {
		s.onAck(sent, time.Duration(s.deadline.Load()))
	}
}

// backoff is capped exponential backoff with full jitter.
type backoff struct {
	base, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.base
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur/2 + rand.N(b.cur/2+1)
}

func (b *backoff) reset() { b.cur = 0 }

// run keeps the session up until ctx ends.
func (s *session) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); s.rep.run(ctx, s.c, s.name, s.log) }()
	go func() { defer wg.Done(); s.watchFence(ctx) }()
	defer wg.Wait()
	bo := backoff{base: 100 * time.Millisecond, max: 2 * time.Second}
	var keep func() // stops the heartbeats sent while registering again
	defer func() {
		if keep != nil {
			keep()
		}
	}()
	for ctx.Err() == nil {
		if keep == nil && s.deadline.Load() > 0 {
			keep = s.keepBeating(ctx)
		}
		// Re-registering with tasks at stake (after a failover the new
		// leader knows no agent): a server that holds the request (a
		// paused leader, or a standby passing it on to one) is left for
		// the next one well before the fence deadline, which it held for
		// 30 s.
		wait := 30 * time.Second
		if d := time.Duration(s.deadline.Load()); d > 0 {
			wait = max(d/2, time.Second)
		}
		rctx, cancel := context.WithTimeout(ctx, wait)
		sent := time.Now()
		reply, err := s.c.register(rctx, agentapi.Registration{Agent: s.name, Nodes: s.r.nodes(), Logs: s.logs, LogsToken: s.logsToken})
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("register failed; retrying", "err", err)
			}
			serverlist.Sleep(ctx, bo.next())
			continue
		}
		if s.onRegister != nil {
			if err := s.onRegister(reply); err != nil {
				s.log.Error("stopping", "err", err)
				return
			}
		}
		interval := time.Duration(reply.HeartbeatInterval)
		if interval <= 0 {
			interval = 2 * time.Second
		}
		s.deadline.Store(int64(time.Duration(max(reply.MissedHeartbeats, 1)) * interval))
		s.interval.Store(int64(interval))
		s.acked(sent)
		if keep != nil {
			keep()
			keep = nil
		}
		s.up.Store(true) // before connected: a test that saw connected sees up
		s.connected.Add(1)
		s.log.Info("registered", "agent", s.name, "generation", reply.Generation, "heartbeat", interval)
		sctx, stop := context.WithCancel(ctx)
		hb := make(chan struct{})
		go func() { defer close(hb); s.heartbeats(sctx, stop, interval) }()
		err = s.c.stream(sctx, s.name, reply.Generation, 3*10*time.Second, s.handle)
		stop()
		<-hb
		s.up.Store(false)
		if ctx.Err() != nil {
			return
		}
		s.log.Warn("assignment stream ended; reconnecting", "err", err)
		if time.Since(time.Unix(0, s.lastAck.Load())) < interval {
			bo.reset() // the connection was healthy until just now
		}
		// Tasks are at stake through the backoff too (up to 2 s, longer
		// than what is left of the fence deadline after a leader froze):
		// heartbeats go on while the agent waits to register again.
		keep = s.keepBeating(ctx)
		serverlist.Sleep(ctx, bo.next())
	}
}

func (s *session) handle(m *agentapi.AgentMessage) {
	if s.fenced.Load() && (m.Type == agentapi.MsgSnapshot || m.Type == agentapi.MsgAssign) {
		// Fenced: the shims kill whatever starts; the snapshot after the
		// next acknowledged heartbeat brings these back.
		return
	}
	switch m.Type {
	case agentapi.MsgSnapshot:
		s.r.sync(m.Assignments)
	case agentapi.MsgAssign:
		if m.Assignment != nil {
			s.r.assign(*m.Assignment)
		}
	case agentapi.MsgRevoke:
		s.r.revoke(m.Task, m.Attempt, m.Reason)
	}
}

// heartbeats sends one heartbeat per interval until ctx ends; a server
// that no longer knows the agent (restarted and not yet re-registered,
// or a newer registration) ends the session through stop.
func (s *session) heartbeats(ctx context.Context, stop context.CancelFunc, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	retry := time.NewTimer(interval)
	retry.Stop()
	defer retry.Stop()
	for {
		sent, reply, err := s.beatOnce(ctx, interval)
		if err != nil && ctx.Err() == nil {
			s.beatFailures.Add(1)
		}
		wait := t.C
		switch {
		case err == nil && reply.Register:
			// A new leader noted the heartbeat (the nodes' deadline starts
			// over there) but has no registration of this agent: the
			// tasks stay, and the agent registers for a stream.
			s.acked(sent)
			s.log.Warn("the server noted the heartbeat but has no registration of this agent (a failover); registering again")
			stop()
			return
		case err == nil:
			s.acked(sent)
			if s.fenced.Swap(false) {
				// Assignments that came while fenced were not started:
				// reconnect for a fresh snapshot.
				s.log.Info("heartbeats acknowledged again; resynchronising")
				stop()
				return
			}
		case isNotFound(err):
			s.log.Warn("the server does not know this agent; registering again", "err", err)
			stop()
			return
		case ctx.Err() == nil:
			s.log.Warn("heartbeat failed", "err", err)
			// Every server failed (a failover: no leader yet): try again
			// soon rather than an interval later.
			retry.Reset(min(interval, minHedge))
			wait = retry.C
		}
		select {
		case <-wait:
		case <-s.nudge:
			// At most one early heartbeat per quarter interval.
			select {
			case <-time.After(interval / 4):
			case <-ctx.Done():
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// beatSoon asks for a heartbeat soon, not an interval later.
func (s *session) beatSoon() {
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// keepBeating heartbeats, once per interval, until the returned stop is
// called (it waits for the goroutine): the session calls it while it
// registers again with tasks at stake. Through a failover the new leader
// has no registration of the agent, and registering takes a commit,
// which an election in progress can hold longer than the fence deadline;
// the leader notes a holder's heartbeat meanwhile (reply.Register), and
// that acknowledgment keeps the tasks.
func (s *session) keepBeating(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		interval := max(time.Duration(s.interval.Load()), minHedge)
		for ctx.Err() == nil {
			sent, _, err := s.beatOnce(ctx, interval)
			wait := interval
			if err == nil {
				s.acked(sent) // noted, registered or not: a later registration follows
			} else {
				wait = minHedge // every server failed (no leader yet): soon again
			}
			if !serverlist.Sleep(ctx, wait) {
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// beatOnce sends one heartbeat over the servers (hedgedHeartbeat). A slow
// answer is still an acknowledgment: it is waited for as long as the
// fence deadline allows, never less than an interval.
func (s *session) beatOnce(ctx context.Context, interval time.Duration) (time.Time, agentapi.HeartbeatReply, error) {
	budget := time.Duration(s.deadline.Load()) - time.Since(time.Unix(0, s.lastAck.Load()))
	hctx, cancel := context.WithTimeout(ctx, max(budget, interval))
	defer cancel()
	return s.c.hedgedHeartbeat(hctx, max(interval/2, minHedge), min(interval, minHedge), s.name, s.r.beats())
}

// minHedge is the least wait before a heartbeat is also sent to the next
// server, and before one that every server failed is sent again.
const minHedge = 250 * time.Millisecond

// watchFence kills the runner's tasks once no heartbeat was acknowledged
// for the server's notready deadline, measured from the last acknowledged
// heartbeat's send time (which precedes the server's receipt of it, so the
// agent stops before the server re-queues).
func (s *session) watchFence(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		d := time.Duration(s.deadline.Load())
		if d == 0 || s.fenced.Load() {
			continue
		}
		if since := time.Since(time.Unix(0, s.lastAck.Load())); since > d {
			s.fenced.Store(true)
			s.log.Error("no heartbeat acknowledged within the server's deadline: killing this node's tasks (fencing)", "deadline", d)
			s.r.fence("fenced: no heartbeat acknowledged for " + since.Round(time.Millisecond).String())
		}
	}
}

// reporter delivers status updates in order, retrying until the server
// answers them.
type reporter struct {
	mu      sync.Mutex
	queue   []report
	notify  chan struct{}
	pending atomic.Int64
}

type report struct {
	up   agentapi.StatusUpdate
	done func() // called once the server answered (applied or stale)
}

func newReporter() *reporter { return &reporter{notify: make(chan struct{}, 1)} }

func (r *reporter) add(up agentapi.StatusUpdate, done func()) {
	r.mu.Lock()
	r.queue = append(r.queue, report{up, done})
	r.mu.Unlock()
	r.pending.Add(1)
	select {
	case r.notify <- struct{}{}:
	default:
	}
}

func (r *reporter) run(ctx context.Context, c *client, agent string, log *slog.Logger) {
	bo := backoff{base: 100 * time.Millisecond, max: 2 * time.Second}
	for {
		r.mu.Lock()
		n := min(len(r.queue), agentapi.MaxStatusBatch)
		batch := append([]report(nil), r.queue[:n]...)
		r.mu.Unlock()
		if n == 0 {
			select {
			case <-r.notify:
				continue
			case <-ctx.Done():
				return
			}
		}
		ups := make([]agentapi.StatusUpdate, n)
		for i := range batch {
			ups[i] = batch[i].up
		}
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		res, err := c.status(sctx, agent, ups)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Warn("status report failed; retrying", "updates", n, "err", err)
			serverlist.Sleep(ctx, bo.next())
			continue
		}
		bo.reset()
		for i, x := range res {
			if !x.Applied && i < n {
				log.Info("status report was stale", "task", x.Task, "state", ups[i].State, "reason", x.Reason)
			}
		}
		r.mu.Lock()
		r.queue = r.queue[n:]
		r.mu.Unlock()
		for _, b := range batch {
			if b.done != nil {
				b.done()
			}
		}
		r.pending.Add(-int64(n))
	}
}
