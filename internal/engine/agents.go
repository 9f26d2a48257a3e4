package engine

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/errs"
)

// The agent protocol, engine side (agentapi has its wire types and
// glossary).
//
// An agent serves one or more nodes (a node agent serves its own; a fake
// fleet serves thousands). It registers its nodes, heartbeats them, reads a
// stream of assignments and reports task status. Contracts:
//   - Assignments are level-triggered: a stream starts with a snapshot of
//     every command task placed on the agent's nodes, then sends assign and
//     revoke changes in commit order. An agent runs exactly the snapshot
//     plus later assigns minus revokes; anything else it kills.
//   - Only durable placements are sent (the feed is filled when a commit is
//     published).
//   - A node an agent registered goes notready when no heartbeat arrived
//     for MissedHeartbeats × HeartbeatInterval; its tasks are re-queued
//     (or fail when they must not restart). A restarted server gives every
//     agent node that long again before judging it.
//   - Status reports name the task's attempt; a report for an attempt the
//     server no longer has on that node is stale and ignored, so a late
//     report never finishes a re-queued task.
//   - Heartbeats and usage are soft state: never written to the store.

// Limits of the engine's side of the protocol (agentapi has those on the
// agents' input).
const (
	maxFeed         = 1 << 16 // queued changes per agent before it gets a fresh snapshot
	defaultInterval = 2 * time.Second
)

// agents is the engine's side of the agent protocol: the agents'
// sessions (registrations, assignment feeds, latest heartbeats), their
// nodes' liveness, and the usage samples the heartbeats' lane records
// for the loop. Its exported methods are the protocol's calls (the
// server's agent API calls them on the Engine, which embeds it); the
// loop calls checkLiveness at each step. Registration and status run as
// loop commands; heartbeats of registered agents take the lane without
// entering the loop.
type agents struct {
	e *Engine
	// sessions is the agents' state (its own lock, sessions.go); live
	// their nodes' liveness and samples the usage the heartbeats' lane
	// recorded for the loop (their own locks, live.go), nudge its
	// wakeup.
	sessions sessions
	live     liveness
	samples  samples
	nudge    chan struct{}
	// laneNodes mirrors the published nodes (name -> *api.Node,
	// published and never changed after) for the heartbeats' lane, which
	// must not wait for the read model's lock while a bulk submission's
	// records are published under it.
	laneNodes sync.Map
	// lastStep is when the previous liveness check ran, and lastTracked
	// whether agents' nodes were tracked then (loop-only; PauseCredit).
	lastStep    time.Time
	lastTracked bool
}

// Register records an agent and its nodes (upserting them, ready unless an
// admin cordoned or drained them) and returns the liveness rules. A new
// registration of the same agent supersedes the old one: its stream ends.
func (a *agents) Register(ctx context.Context, reg agentapi.Registration) (*agentapi.RegisterReply, error) {
	e := a.e
	if err := api.ValidateID("agent", reg.Agent); err != nil {
		return nil, err
	}
	if len(reg.Nodes) == 0 || len(reg.Nodes) > agentapi.MaxAgentNodes {
		return nil, errs.Invalid("nodes", "an agent registers 1 to %d nodes, got %d", agentapi.MaxAgentNodes, len(reg.Nodes))
	}
	seen := make(map[string]bool, len(reg.Nodes))
	for i := range reg.Nodes {
		n := &reg.Nodes[i]
		if err := n.Validate(); err != nil {
			return nil, errs.Prefix("nodes["+itoa(i)+"]", err)
		}
		if seen[n.Name] {
			return nil, errs.Invalid("nodes["+itoa(i)+"].name", "node %q is listed twice", n.Name)
		}
		seen[n.Name] = true
	}
	cmd := &registerCmd{reg: &reg}
	if err := e.do(ctx, cmd); err != nil {
		return nil, err
	}
	return &agentapi.RegisterReply{Agent: reg.Agent, Cluster: e.cluster, Generation: cmd.gen,
		HeartbeatInterval: api.Duration(a.sessions.interval), MissedHeartbeats: a.sessions.missed}, nil
}

// registerCmd registers an agent and its nodes.
type registerCmd struct {
	answer
	reg *agentapi.Registration
	gen uint64 // the registration's generation (result)
}

func (c *registerCmd) run(e *Engine, now time.Time) { c.gen, c.err = e.register(c.reg, now) }

// register runs on the loop.
func (a *agents) register(reg *agentapi.Registration, now time.Time) (uint64, error) {
	e := a.e
	for i := range reg.Nodes { // all or nothing: no node is taken before every one may be
		if err := e.mayTake(reg.Agent, reg.Nodes[i].Name, now); err != nil {
			return 0, errs.Prefix("nodes["+itoa(i)+"]", err)
		}
	}
	for i := range reg.Nodes {
		n := reg.Nodes[i]
		prev := e.staged.currentNode(n.Name)
		switch {
		case prev != nil && (prev.State == api.NodeCordoned || prev.State == api.NodeDraining):
			n.State = prev.State // an admin's decision outlives the agent
		case prev != nil && prev.State == api.NodeNotReady:
			n.State = e.adminState(n.Name)
			e.staged.admin[n.Name] = ""
		default:
			n.State = ""
		}
		if err := e.c.UpsertNode(now, &n); err != nil {
			return 0, errs.Prefix("nodes["+itoa(i)+"]", err)
		}
		e.staged.nodes[n.Name] = &n
		e.staged.holders[n.Name] = reg.Agent
		a.live.heard(n.Name, now)
	}
	return a.sessions.register(reg), nil
}

// Heartbeat records an agent's samples. A node the agent did not register
// is an error (NotFound): the agent registers again. An agent this engine
// has no registration of, but that holds every node named (a failover:
// the new leader knows the holders from the store, not the sessions), is
// noted as heard and answered Register (agentapi.HeartbeatReply).
func (a *agents) Heartbeat(ctx context.Context, agent string, beats []agentapi.Beat) (agentapi.HeartbeatReply, error) {
	e := a.e
	if len(beats) > agentapi.MaxAgentNodes {
		return agentapi.HeartbeatReply{}, errs.Invalid("nodes", "at most %d nodes per heartbeat", agentapi.MaxAgentNodes)
	}
	for i := range beats {
		if len(beats[i].Devices) > api.MaxNodeDevices {
			return agentapi.HeartbeatReply{}, errs.Invalid("nodes["+itoa(i)+"].devices", "at most %d devices per node", api.MaxNodeDevices)
		}
	}
	if e.laneBeat(agent, beats) {
		return agentapi.HeartbeatReply{Nodes: len(beats)}, nil
	}
	cmd := &heartbeatCmd{agent: agent, beats: beats}
	err := e.do(ctx, cmd)
	return agentapi.HeartbeatReply{Nodes: len(beats), Register: cmd.register}, err
}

// heartbeatCmd records an agent's samples.
type heartbeatCmd struct {
	answer
	agent    string
	beats    []agentapi.Beat
	register bool // heard, but not registered (result)
}

func (c *heartbeatCmd) run(e *Engine, now time.Time) {
	c.register, c.err = e.heartbeat(c.agent, c.beats, now)
}

// heartbeat runs on the loop. It reports register when the agent is not
// registered but holds every node of beats, which it noted as heard.
func (a *agents) heartbeat(agent string, beats []agentapi.Beat, now time.Time) (register bool, err error) {
	e := a.e
	known, missing := a.sessions.checkBeats(agent, beats)
	if !known {
		return e.heardUnregistered(agent, beats, now)
	}
	if missing != "" {
		return false, errs.New(errs.NotFound, "node", "node %q is not registered by agent %q (register again)", missing, agent)
	}
	return false, e.recordBeats(agent, beats, now)
}

// heardUnregistered answers the heartbeat of an agent with no
// registration here: when its store says the agent holds every node of
// beats, the nodes' deadlines start over (a new leader must not count an
// agent's re-registration through a failover as silence: agents fence by
// their own clock from their last acknowledged heartbeat) and the agent is
// told to register; otherwise NotFound, and nothing is noted.
func (a *agents) heardUnregistered(agent string, beats []agentapi.Beat, now time.Time) (bool, error) {
	e := a.e
	if len(beats) == 0 {
		return false, errs.New(errs.NotFound, "agent", "agent %q is not registered (register again)", agent)
	}
	for i := range beats {
		if holder, exists := e.holderOf(beats[i].Node); !exists || holder != agent {
			return false, errs.New(errs.NotFound, "agent", "agent %q is not registered (register again)", agent)
		}
	}
	a.live.heardAll(beats, now)
	return true, nil
}

// recordBeats applies a registered agent's samples: liveness, a notready
// node's return, device health and usage.
func (a *agents) recordBeats(agent string, beats []agentapi.Beat, now time.Time) error {
	e := a.e
	for i := range beats {
		b := &beats[i]
		a.live.heard(b.Node, now)
		spec := e.staged.currentNode(b.Node)
		if spec == nil {
			continue
		}
		if spec.State == api.NodeNotReady {
			back := e.adminState(b.Node)
			to := back
			if to == "" {
				to = api.NodeReady
			}
			if err := e.c.SetNodeState(now, b.Node, to); err != nil {
				return err
			}
			n := *spec
			n.State = back
			e.staged.nodes[b.Node] = &n
			e.staged.admin[b.Node] = ""
			spec = &n
			e.log.Info("heartbeats resumed", "node", b.Node, "agent", agent, "state", to)
		}
		u := usageOf(b) // the core reads the samples of the node's devices only
		var changed []int
		for j := range spec.Devices {
			d := &spec.Devices[j]
			if s, ok := b.Devices[d.ID]; ok && s.Healthy != nil && *s.Healthy == d.Unhealthy {
				changed = append(changed, j)
			}
		}
		if len(changed) > 0 {
			n := *spec
			n.Devices = append([]api.Device(nil), spec.Devices...)
			for _, j := range changed {
				d := &n.Devices[j]
				s := b.Devices[d.ID]
				if err := e.c.SetDeviceHealth(now, b.Node, d.Type, d.ID, *s.Healthy); err != nil {
					return err
				}
				d.Unhealthy = !*s.Healthy
				e.log.Warn("device health changed", "node", b.Node, "device", d.Type+" "+d.ID, "healthy", *s.Healthy, "reason", s.Reason)
			}
			e.staged.nodes[b.Node] = &n
		}
		if err := e.c.ObserveNode(now, b.Node, u); err != nil {
			return err
		}
	}
	a.sessions.beat(agent, beats, now)
	return nil
}

// checkLiveness marks notready every agent node whose heartbeats stopped.
// It runs on the loop at most twice per heartbeat interval.
func (a *agents) checkLiveness(now time.Time) {
	e := a.e
	if e.cfg.PauseCredit {
		e.creditPause(now)
	}
	expired := a.live.expired(now, a.sessions.interval, a.sessions.deadline())
	for name, last := range expired {
		spec := e.staged.currentNode(name)
		if spec == nil {
			a.live.forget(name)
			continue
		}
		if spec.State == api.NodeNotReady {
			continue
		}
		if err := e.c.SetNodeState(now, name, api.NodeNotReady); err != nil {
			e.log.Error("mark node notready", "node", name, "err", err)
			continue
		}
		n := *spec
		n.State = api.NodeNotReady
		e.staged.nodes[name] = &n
		e.staged.admin[name] = "" // ready when heartbeats resume, unless an admin said otherwise
		if spec.State == api.NodeCordoned || spec.State == api.NodeDraining {
			e.staged.admin[name] = spec.State
		}
		e.log.Warn("node notready: heartbeats stopped", "node", name, "last", last, "missed", a.sessions.missed)
	}
}

// pauseSlack is how much later than its liveness timer a step may run
// before the difference counts as a pause.
const pauseSlack = 500 * time.Millisecond

// creditPause adds to every node's last heartbeat before the previous
// step the time the loop could not run since then, beyond the liveness
// timer's period and pauseSlack (now is the step's time: a real clock,
// with PauseCredit). The loop wakes at least every half heartbeat interval while
// agents are known, so a longer gap is the process paused (SIGSTOP, a
// frozen VM) or a step that took long: heartbeats sent meanwhile could not
// be received, and a node must not be declared notready for the server's
// own silence (a leader resumed from a 4 s freeze marked every node
// notready and re-queued their running tasks, its leadership grant still
// valid). Agents fence by their own clock, from their last acknowledged
// heartbeat, so the credit only makes the server the more patient side.
func (a *agents) creditPause(now time.Time) {
	e := a.e
	last, tracked := a.lastStep, a.lastTracked
	a.lastStep, a.lastTracked = now, a.live.tracked()
	if last.IsZero() || !tracked {
		return // the loop had no liveness timer: idle, not paused
	}
	gap := now.Sub(last) - a.sessions.interval/2
	if gap <= pauseSlack {
		return
	}
	// Heard before the gap, not in this step (nor on the heartbeats'
	// lane meanwhile: those were received).
	if credited := a.live.credit(last, gap); credited > 0 {
		e.log.Warn("the scheduler could not run for a while (paused, or a long step): agents' heartbeat deadlines are extended by as much", "gap", gap.Round(time.Millisecond), "nodes", credited)
	}
}

// adminState is the state a notready node returns to ("" is ready).
func (a *agents) adminState(name string) string {
	e := a.e
	if a, ok := e.staged.admin[name]; ok {
		return a
	}
	return e.admin[name]
}

// AgentStatus applies an agent's task reports.
func (a *agents) AgentStatus(ctx context.Context, agent string, ups []agentapi.StatusUpdate) ([]agentapi.StatusResult, error) {
	e := a.e
	if len(ups) > agentapi.MaxStatusBatch {
		return nil, errs.Invalid("updates", "at most %d updates per report", agentapi.MaxStatusBatch)
	}
	for i, u := range ups {
		switch u.State {
		case agentapi.StatusRunning, agentapi.StatusSucceeded, agentapi.StatusFailed, agentapi.StatusTimeout, agentapi.StatusLost:
		default:
			return nil, errs.Invalid("updates["+itoa(i)+"].state", "must be running, succeeded, failed, timeout or lost, got %q", u.State)
		}
		if u.Task == "" {
			return nil, errs.Invalid("updates["+itoa(i)+"].task", "required")
		}
		if st := u.Stop; st != nil {
			if len(st.Signal) > 16 || api.ValidateText("signal", st.Signal) != nil {
				return nil, errs.Invalid("updates["+itoa(i)+"].stop.signal", "must be a signal name of at most 16 bytes")
			}
			if !(st.Seconds >= 0 && st.Seconds <= maxStopSeconds) {
				return nil, errs.Invalid("updates["+itoa(i)+"].stop.seconds", "must be between 0 and %d, got %v", maxStopSeconds, st.Seconds)
			}
		}
	}
	if !a.sessions.known(agent) {
		// Not "stale": a restarted server has not seen the agent register
		// yet, and the agent keeps these reports until it has.
		return nil, errs.New(errs.NotFound, "agent", "agent %q is not registered (register again)", agent)
	}
	cmd := &agentStatusCmd{agent: agent, updates: ups}
	if err := e.do(ctx, cmd); err != nil {
		return nil, err
	}
	return cmd.out, nil
}

// agentStatusCmd applies an agent's task reports.
type agentStatusCmd struct {
	answer
	agent   string
	updates []agentapi.StatusUpdate
	out     []agentapi.StatusResult // per update: applied or stale (result)
}

func (c *agentStatusCmd) run(e *Engine, now time.Time) {
	c.out = e.agentStatus(c.agent, c.updates, now)
}

// agentStatus runs on the loop. Each update is checked against the core's
// state at that moment (not the published record, which lags within a
// step): an earlier update in the same batch may have moved the task on.
func (a *agents) agentStatus(agent string, ups []agentapi.StatusUpdate, now time.Time) []agentapi.StatusResult {
	e := a.e
	out := make([]agentapi.StatusResult, len(ups))
	for i, u := range ups {
		out[i].Task = u.Task
		r := e.staged.current(u.Task)
		s, ok := e.c.SavedState(u.Task)
		switch {
		case r == nil || !ok:
			out[i].Reason = "no such task"
			continue
		case len(r.Spec.Command) == 0:
			out[i].Reason = "task is a lease: agents do not run it"
			continue
		case s.Attempt != u.Attempt && e.endedAttemptStatus(agent, r, u):
			out[i].Applied = true // an earlier attempt's outcome, kept in its history
			continue
		case s.State != core.Scheduled && s.State != core.Running:
			out[i].Reason = "task is " + s.State.String()
			continue
		case s.Attempt != u.Attempt:
			out[i].Reason = "attempt " + itoa(u.Attempt) + " is over; the task is on attempt " + itoa(s.Attempt)
			continue
		}
		if a.sessions.servedBy(s.Node) != agent {
			out[i].Reason = "task is placed on node " + s.Node + ", not served by this agent"
			continue
		}
		var err error
		switch u.State {
		case agentapi.StatusRunning:
			if s.State == core.Scheduled {
				err = e.c.TaskStarted(now, u.Task)
			}
		case agentapi.StatusLost:
			reason := u.Reason
			if reason == "" {
				reason = "run lost on node " + s.Node
			}
			err = e.c.TaskLost(now, u.Task, reason)
		default:
			res := core.Result{ExitCode: u.ExitCode, TimedOut: u.State == agentapi.StatusTimeout, Reason: u.Reason}
			if u.State == agentapi.StatusFailed && res.ExitCode == 0 {
				res.ExitCode = -1 // failed without an exit code of its own
			}
			if u.State == agentapi.StatusSucceeded {
				res.ExitCode = 0
			}
			if err = e.c.TaskFinished(now, u.Task, res); err == nil {
				cp := *r
				code := res.ExitCode
				cp.ExitCode = &code
				e.staged.tasks[u.Task] = &cp
			}
		}
		if err != nil {
			out[i].Reason = err.Error()
			continue
		}
		out[i].Applied = true
	}
	return out
}

// maxStopSeconds bounds a reported stop's duration (a day: far past the
// longest checkpoint grace).
const maxStopSeconds = 86400

// endedAttemptStatus records the outcome an agent reports of a task's
// earlier attempt (one that ended while its command still ran: node lost,
// drained, preempted) in the attempt's history entry, if that entry has
// none yet and the agent serves the node it ran on. It reports whether it
// did.
func (a *agents) endedAttemptStatus(agent string, r *TaskRecord, u agentapi.StatusUpdate) bool {
	e := a.e
	if u.State == agentapi.StatusRunning || u.State == agentapi.StatusLost {
		return false // no outcome to keep
	}
	for i := len(r.Attempts) - 1; i >= 0; i-- {
		at := r.Attempts[i]
		if at.Attempt != u.Attempt {
			continue
		}
		if at.ExitCode != nil || a.sessions.servedBy(at.Node) != agent {
			return false
		}
		code := u.ExitCode
		if u.State == agentapi.StatusFailed && code == 0 {
			code = -1
		}
		cp := *r
		cp.Attempts = slices.Clone(r.Attempts)
		cp.Attempts[i].ExitCode = &code
		if st := u.Stop; st != nil {
			stop := *st
			cp.Attempts[i].Stop = &stop
			if at.State == AttemptPreempted && cp.Preemption != nil {
				p := *cp.Preemption
				p.StopSeconds += stop.Seconds
				cp.Preemption = &p
				e.gauges.preemptionStop(stop)
			}
		}
		e.staged.tasks[u.Task] = &cp
		return true
	}
	return false
}

// ErrSuperseded ends an assignment stream whose agent registered again.
var ErrSuperseded = errs.New(errs.Conflict, "agent", "the agent registered again; this stream is superseded")

// AgentStream sends an agent's assignments to send until ctx ends, the
// agent registers again (ErrSuperseded) or send fails. The first message is
// a snapshot; a ping goes out after each idle keepAlive.
func (a *agents) AgentStream(ctx context.Context, agent string, gen uint64, keepAlive time.Duration, send func(*agentapi.AgentMessage) error) error {
	e := a.e
	return a.sessions.stream(ctx, agent, gen, keepAlive, send, e.done)
}

// AgentLogs returns where the agent serving node keeps its task logs.
func (a *agents) AgentLogs(node string) (url, token string, ok bool) { return a.sessions.logsOf(node) }

// Usage returns the latest heartbeat of each agent node.
func (a *agents) Usage() map[string]agentapi.NodeUsage { return a.sessions.usageAll() }

// TaskBeat is what the latest heartbeat of node said of task (its CPU,
// and a replica's probe states).
func (a *agents) TaskBeat(node, task string) (agentapi.TaskBeat, bool) {
	return a.sessions.taskBeat(node, task)
}

func itoa(i int) string { return strconv.Itoa(i) }
