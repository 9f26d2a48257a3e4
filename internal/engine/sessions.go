package engine

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/errs"
)

// sessions is the engine's state of the agents (agents.go has the
// protocol's contracts): each registered agent with its generation, nodes,
// logs address and assignment feed; which agent serves each node; the
// command tasks placed on each node (what a snapshot lists); each node's
// latest heartbeat; and the nodes' liveness.
//
// The loop owns it: only the loop writes it. Readers on other goroutines
// (AgentStream, AgentLogs, Usage, AgentNodes, AgentStatus's check) read it
// under mu, never under the read model's lock (published.mu), so that
// agents' streams do not contend with task readers. The loop reads it
// without the lock (it is the only writer). The liveness fields are the
// loop's alone.
//
// Its soft state (registrations, usage) changes as commands run; the
// assignment index and feeds change only when a commit is published
// (track), so that only durable placements reach an agent.
type sessions struct {
	mu        sync.RWMutex // guards the fields up to liveness
	agents    map[string]*agentState
	nodeAgent map[string]string                 // node -> registered agent
	assigned  map[string]map[string]*TaskRecord // node -> task -> record, command tasks placed there
	usage     map[string]agentapi.NodeUsage
	gen       uint64 // the last registration's generation
	streamSeq uint64 // the last stream's id

	// The liveness rules (the state is agents.live, live.go).
	interval time.Duration
	missed   int
}

func newSessions(interval time.Duration, missed int) sessions {
	if interval <= 0 {
		interval = defaultInterval
	}
	if missed <= 0 {
		missed = 3
	}
	return sessions{agents: map[string]*agentState{}, nodeAgent: map[string]string{}, assigned: map[string]map[string]*TaskRecord{},
		usage: map[string]agentapi.NodeUsage{}, interval: interval, missed: missed}
}

// agentState is one registered agent. Guarded by sessions.mu.
type agentState struct {
	gen       uint64
	nodes     map[string]struct{}
	logs      string
	logsToken string
	feed      []agentapi.AgentMessage
	resync    bool // the feed overflowed: the next read is a snapshot
	stream    uint64
	notify    chan struct{}
}

func (a *agentState) wake() {
	if a.notify != nil {
		close(a.notify)
		a.notify = nil
	}
}

func (a *agentState) push(m agentapi.AgentMessage) {
	if a.stream == 0 || a.resync {
		return // no reader: the next stream starts with a snapshot
	}
	if len(a.feed) >= maxFeed {
		a.feed, a.resync = nil, true
	} else {
		a.feed = append(a.feed, m)
	}
	a.wake()
}

// deadline is how long an agent node may go without a heartbeat.
func (s *sessions) deadline() time.Duration { return time.Duration(s.missed) * s.interval }

// register makes reg's agent the server of its nodes with a new
// generation, which it returns. A previous registration of the agent is
// superseded (its stream ends); a node another agent served moves to this
// one (the engine checked that it may: mayTake).
func (s *sessions) register(reg *agentapi.Registration) uint64 {
	agent := reg.Agent
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	a := s.agents[agent]
	if a != nil {
		for n := range a.nodes {
			if s.nodeAgent[n] == agent {
				delete(s.nodeAgent, n)
			}
		}
		a.wake() // the old stream sees the new generation and ends
	}
	a = &agentState{gen: s.gen, nodes: make(map[string]struct{}, len(reg.Nodes)), logs: reg.Logs, logsToken: reg.LogsToken}
	for i := range reg.Nodes {
		name := reg.Nodes[i].Name
		if other := s.agents[s.nodeAgent[name]]; other != nil && s.nodeAgent[name] != agent {
			delete(other.nodes, name) // the holder's heartbeats expired (mayTake): the node moved to this agent
		}
		a.nodes[name] = struct{}{}
		s.nodeAgent[name] = agent
	}
	s.agents[agent] = a
	return a.gen
}

// release forgets node: no agent serves it any more.
func (s *sessions) release(node string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.agents[s.nodeAgent[node]]; a != nil {
		delete(a.nodes, node)
	}
	delete(s.nodeAgent, node)
	delete(s.usage, node)
}

// known reports whether agent is registered.
func (s *sessions) known(agent string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.agents[agent] != nil
}

// servedBy is the agent serving node ("" for none).
func (s *sessions) servedBy(node string) string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.nodeAgent[node]
}

// checkBeats reports whether agent is registered and the first of beats'
// nodes it does not serve ("" when it serves them all).
func (s *sessions) checkBeats(agent string, beats []agentapi.Beat) (known bool, missing string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.agents[agent] == nil {
		return false, ""
	}
	for i := range beats {
		if s.nodeAgent[beats[i].Node] != agent {
			return true, beats[i].Node
		}
	}
	return true, ""
}

// beat records a heartbeat's samples as the nodes' usage.
func (s *sessions) beat(agent string, beats []agentapi.Beat, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range beats {
		b := &beats[i]
		s.usage[b.Node] = agentapi.NodeUsage{Agent: agent, LastHeartbeat: now, CPU: b.CPU, MemoryUsed: b.MemoryUsed, Devices: b.Devices, Tasks: b.Tasks, Simulated: b.Simulated}
	}
}

// active reports whether r is a command task an agent should be running.
func active(r *TaskRecord) bool {
	return r != nil && len(r.Spec.Command) > 0 && r.Node != "" && (r.State == "scheduled" || r.State == "running")
}

func assignmentOf(r *TaskRecord) agentapi.Assignment {
	a := agentapi.Assignment{Task: r.Spec.ID, Attempt: r.Attempt, Node: r.Node, State: r.State,
		Command: r.Spec.Command, Env: r.Spec.Env, Devices: r.Devices,
		Timeout: r.Spec.Timeout, Duration: r.Spec.Duration, Traceparent: r.Trace, Restarts: r.Restarts,
		Service: r.Spec.Service, Liveness: r.Spec.Liveness, Readiness: r.Spec.Readiness, Startup: r.Spec.Startup}
	if c := r.Spec.Checkpoint; c != nil {
		ck := *c
		if ck.Dir != "" {
			// Inside the tenant's part of the checkpoint root: a tenant
			// names only its own checkpoints.
			tenant := r.Tenant
			if tenant == "" {
				tenant = DefaultTenant
			}
			ck.Dir = tenant + "/" + ck.Dir
		}
		a.Checkpoint = &ck
	}
	return a
}

// track updates the assignment index and the agents' feeds for published
// changes: the step that publishes a commit calls it, after the commit.
func (s *sessions) track(changes []change) {
	i := 0
	for i < len(changes) && !active(changes[i].old) && !active(changes[i].r) {
		i++ // leases, and tasks not placed: nothing for an agent
	}
	if i == len(changes) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range changes[i:] {
		s.trackOne(c.old, c.r)
	}
}

// restore indexes the assignments of recovered records (before the loop
// starts: no agent is registered yet).
func (s *sessions) restore(recs []*TaskRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		s.trackOne(nil, r)
	}
}

// trackOne is track for a record changing from old to r. Called under mu.
func (s *sessions) trackOne(old, r *TaskRecord) {
	was, is := active(old), active(r)
	if !was && !is {
		return
	}
	id := r.Spec.ID
	if was && (!is || old.Node != r.Node || old.Attempt != r.Attempt) {
		if m := s.assigned[old.Node]; m != nil {
			delete(m, id)
			if len(m) == 0 {
				delete(s.assigned, old.Node)
			}
		}
		if a := s.agents[s.nodeAgent[old.Node]]; a != nil {
			reason := r.Reason
			if reason == "" {
				reason = r.State
			}
			a.push(agentapi.AgentMessage{Type: agentapi.MsgRevoke, Task: id, Attempt: old.Attempt, Node: old.Node, Reason: reason})
		}
	}
	if !is {
		return
	}
	m := s.assigned[r.Node]
	if m == nil {
		m = map[string]*TaskRecord{}
		s.assigned[r.Node] = m
	}
	m[id] = r
	if !was || old.Node != r.Node || old.Attempt != r.Attempt {
		if a := s.agents[s.nodeAgent[r.Node]]; a != nil {
			as := assignmentOf(r)
			a.push(agentapi.AgentMessage{Type: agentapi.MsgAssign, Assignment: &as})
		}
	}
}

// stream is AgentStream (agents.go); done is closed when the engine stops.
func (s *sessions) stream(ctx context.Context, agent string, gen uint64, keepAlive time.Duration, send func(*agentapi.AgentMessage) error, done <-chan struct{}) error {
	a, id, err := s.open(agent, gen)
	if err != nil {
		return err
	}
	defer func() {
		s.mu.Lock()
		if a.stream == id {
			a.stream, a.feed = 0, nil
		}
		s.mu.Unlock()
	}()
	ping := time.NewTimer(keepAlive)
	defer ping.Stop()
	for {
		msgs, wait, err := s.next(agent, a, gen, id)
		if err != nil {
			return err
		}
		for i := range msgs {
			if err := send(&msgs[i]); err != nil {
				return err
			}
		}
		if wait == nil {
			continue
		}
		if !ping.Stop() {
			select {
			case <-ping.C:
			default:
			}
		}
		ping.Reset(keepAlive)
		select {
		case <-wait:
		case <-ping.C:
			if err := send(&agentapi.AgentMessage{Type: agentapi.MsgPing}); err != nil {
				return err
			}
		case <-ctx.Done():
			return nil
		case <-done:
			return ErrStopped
		}
	}
}

// open starts a stream of agent's registration gen: it ends any older
// stream of the agent and starts with a snapshot.
func (s *sessions) open(agent string, gen uint64) (*agentState, uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[agent]
	if a == nil {
		return nil, 0, errs.New(errs.NotFound, "agent", "agent %q is not registered (register again)", agent)
	}
	if gen == 0 {
		// Every registration has a generation: a stream without one would
		// not be fenced when the agent registers again.
		return nil, 0, errs.Invalid("generation", "required: the generation of the agent's registration (register again to get one)")
	}
	if a.gen != gen {
		return nil, 0, ErrSuperseded
	}
	s.streamSeq++
	id := s.streamSeq
	a.stream, a.feed, a.resync = id, nil, true
	a.wake() // an older stream of this agent ends
	return a, id, nil
}

// next takes what stream id of a (of registration gen) has to send: a snapshot, or the feed; when
// there is nothing, the channel to wait on. ErrSuperseded once a newer
// registration or stream took over.
func (s *sessions) next(agent string, a *agentState, gen, id uint64) ([]agentapi.AgentMessage, <-chan struct{}, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.agents[agent] != a || a.gen != gen || a.stream != id {
		return nil, nil, ErrSuperseded
	}
	var msgs []agentapi.AgentMessage
	if a.resync {
		a.resync, a.feed = false, nil
		msgs = []agentapi.AgentMessage{s.snapshot(a)}
	} else {
		msgs, a.feed = a.feed, nil
	}
	if len(msgs) > 0 {
		return msgs, nil, nil
	}
	if a.notify == nil {
		a.notify = make(chan struct{})
	}
	return nil, a.notify, nil
}

// snapshot lists every assignment on a's nodes, in task order. Called
// under mu.
func (s *sessions) snapshot(a *agentState) agentapi.AgentMessage {
	m := agentapi.AgentMessage{Type: agentapi.MsgSnapshot, Assignments: []agentapi.Assignment{}}
	for n := range a.nodes {
		for _, r := range s.assigned[n] {
			m.Assignments = append(m.Assignments, assignmentOf(r))
		}
	}
	sort.Slice(m.Assignments, func(i, j int) bool { return m.Assignments[i].Task < m.Assignments[j].Task })
	return m
}

// logsOf is where the agent serving node keeps its task logs.
func (s *sessions) logsOf(node string) (url, token string, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a := s.agents[s.nodeAgent[node]]
	if a == nil || a.logs == "" {
		return "", "", false
	}
	return a.logs, a.logsToken, true
}

// taskBeat is what node's latest heartbeat said of task.
func (s *sessions) taskBeat(node, task string) (agentapi.TaskBeat, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.usage[node].Tasks[task]
	return b, ok
}

// usageAll is a copy of every node's latest heartbeat.
func (s *sessions) usageAll() map[string]agentapi.NodeUsage {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]agentapi.NodeUsage, len(s.usage))
	for k, v := range s.usage {
		out[k] = v
	}
	return out
}

// nodesOf lists the nodes agent serves (nil when it is not registered).
func (s *sessions) nodesOf(agent string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a := s.agents[agent]
	if a == nil {
		return nil
	}
	out := make([]string, 0, len(a.nodes))
	for n := range a.nodes {
		out = append(out, n)
	}
	return out
}
