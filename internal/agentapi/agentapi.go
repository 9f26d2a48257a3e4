// Package agentapi holds the wire types of the agent protocol, and their
// validation: what a node agent and the control plane say to each other
// over /api/v1/agents/... (API.md). Both sides import it; it imports
// nothing of either (only internal/api for nodes, devices and durations,
// and internal/errs), so the agent binary links no engine, core, store or
// server.
//
// Glossary:
//   - agent: a process serving one or more nodes (a node agent serves its
//     own; a fake fleet serves thousands). It registers them, heartbeats
//     them, reads a stream of assignments and reports task status.
//   - registration (Registration, RegisterReply): the agent's nodes and
//     where it serves task logs; the reply names the cluster, the
//     registration's generation and the liveness rules.
//   - generation: the number of one registration; a stream opened with an
//     older one is superseded (the agent registered again).
//   - heartbeat (Beat, DeviceBeat): one sample per node (CPU, memory, each
//     device's use and health), every HeartbeatInterval. Soft state: the
//     server never writes it to its store; NodeUsage is its latest sample
//     as GET /nodes shows it.
//   - liveness: a node whose agent sent no heartbeat for MissedHeartbeats
//     × HeartbeatInterval goes notready and its tasks are re-queued.
//   - assignment (Assignment): a command task placed on one of the
//     agent's nodes, for one attempt.
//   - attempt: the number of one placement of a task; every report names
//     it, and a report for an attempt the server no longer has on that
//     node is stale (ignored), so a late report never ends a re-queued
//     task.
//   - stream (AgentMessage): the assignments, level-triggered: a snapshot
//     of every assignment on the agent's nodes, then assign and revoke
//     changes in commit order, and a ping when idle. An agent runs exactly
//     the snapshot plus later assigns minus revokes; anything else it
//     kills. Only durable placements are sent.
//   - status report (StatusUpdate, StatusResult): how an attempt is
//     going (running) or how it ended (succeeded, failed, timeout, lost);
//     each is answered applied, or stale with the reason.
package agentapi

import (
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// Limits on agent input; the server bounds every loop over it by these.
const (
	// MaxAgentNodes bounds the nodes of one registration or heartbeat.
	MaxAgentNodes = 100_000
	// MaxStatusBatch bounds the updates of one status report.
	MaxStatusBatch = 10_000
)

// The types of AgentMessage.
const (
	MsgSnapshot = "snapshot"
	MsgAssign   = "assign"
	MsgRevoke   = "revoke"
	MsgPing     = "ping"
)

// The states of StatusUpdate.
const (
	StatusRunning   = "running"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
	StatusTimeout   = "timeout"
	StatusLost      = "lost"
)

// Assignment is a command task placed on an agent's node.
type Assignment struct {
	Task     string            `json:"task"`
	Attempt  int               `json:"attempt"`
	Node     string            `json:"node"`
	State    string            `json:"state"` // scheduled or running
	Command  []string          `json:"command"`
	Env      map[string]string `json:"env,omitempty"`
	Devices  []api.DeviceRef   `json:"devices,omitempty"`
	Timeout  api.Duration      `json:"timeout,omitempty"`
	Duration api.Duration      `json:"duration,omitempty"`
	// Traceparent is the W3C trace context the task's command continues
	// (its TRACEPARENT): its placement's span; empty when not traced.
	Traceparent string `json:"traceparent,omitempty"`
	// Checkpoint is the task's (api.Checkpoint) with Dir inside the
	// tenant's part of the agents' checkpoint root ("<tenant>/<dir>");
	// nil: the task declared none.
	Checkpoint *api.Checkpoint `json:"checkpoint,omitempty"`
	// Restarts counts the task's earlier attempts that started and were
	// stopped or failed (its HETSCHED_RESTART_COUNT).
	Restarts int `json:"restarts,omitempty"`
	// Service names the service of a replica: its command runs again
	// when it exits (in place, with a backoff), and its probes run.
	Service   string     `json:"service,omitempty"`
	Liveness  *api.Probe `json:"liveness,omitempty"`
	Readiness *api.Probe `json:"readiness,omitempty"`
	Startup   *api.Probe `json:"startup,omitempty"`
}

// AgentMessage is one message of an assignment stream.
type AgentMessage struct {
	// Type is snapshot, assign, revoke or ping (the Msg constants).
	Type        string       `json:"type"`
	Assignments []Assignment `json:"assignments,omitempty"` // snapshot
	Assignment  *Assignment  `json:"assignment,omitempty"`  // assign
	// revoke: the task's attempt to stop, and why.
	Task    string `json:"task,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Node    string `json:"node,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// Registration is what an agent says about itself when it connects.
type Registration struct {
	Agent string     `json:"agent"`
	Nodes []api.Node `json:"nodes"`
	// Logs is where the agent serves task logs (http://host:port) and the
	// bearer token it expects there; empty when it serves none.
	Logs      string `json:"logs,omitempty"`
	LogsToken string `json:"logsToken,omitempty"`
}

// RegisterReply tells an agent the liveness rules.
type RegisterReply struct {
	Agent string `json:"agent"`
	// Cluster identifies the server's store: a server started on a fresh
	// store is a new cluster, whose task ids may repeat an old one's.
	Cluster           string       `json:"cluster"`
	Generation        uint64       `json:"generation"`
	HeartbeatInterval api.Duration `json:"heartbeatInterval"`
	MissedHeartbeats  int          `json:"missedHeartbeats"`
}

// HeartbeatReply answers a heartbeat.
type HeartbeatReply struct {
	Nodes int `json:"nodes"`
	// Register: the server has no registration of the agent (a leader
	// newly elected, or restarted), but its store says the agent holds
	// every node named, so it noted the heartbeat: those nodes' notready
	// deadlines start over from its receipt. The agent may count the
	// heartbeat as acknowledged (it keeps its tasks) and registers again
	// for an assignment stream. A heartbeat naming a node the agent does
	// not hold is answered 404 instead, and notes nothing.
	Register bool `json:"register,omitempty"`
}

// Beat is one node's heartbeat sample.
type Beat struct {
	Node string `json:"node"`
	// Simulated says the node's CPU and memory are not measured (a
	// simulated node, as hetsched up's fleet: its agent runs on another
	// machine's): CPU and MemoryUsed are to be ignored.
	Simulated bool `json:"simulated,omitempty"`
	// CPU is the fraction of the node's CPU in use, 0..1.
	CPU        float64 `json:"cpu"`
	MemoryUsed int64   `json:"memoryUsed,omitempty"`
	// Devices by id; a device absent from the map keeps its health.
	Devices map[string]DeviceBeat `json:"devices,omitempty"`
	// Tasks are the node's running tasks' own use, by task id (those the
	// agent measured; at most MaxTaskBeats).
	Tasks map[string]TaskBeat `json:"tasks,omitempty"`
}

// TaskBeat is one running task's use, CPU in cores over the last
// heartbeat interval (a service's autoscaler reads it), and for a
// service's replica its probes' states: Started (its startup probe
// passed, or it has none), Ready (its readiness probe passes, or it has
// none and started), Restarts (its command's restarts in place) and
// Restarted (why the last one), and Probe (why a probe fails now).
type TaskBeat struct {
	CPU       float64 `json:"cpu"`
	Replica   bool    `json:"replica,omitempty"`
	Started   bool    `json:"started,omitempty"`
	Ready     bool    `json:"ready,omitempty"`
	Restarts  int     `json:"restarts,omitempty"`
	Restarted string  `json:"restarted,omitempty"`
	Probe     string  `json:"probe,omitempty"`
}

// maxProbeReason bounds a TaskBeat's Probe.
const maxProbeReason = 1024

// MaxTaskBeats bounds the tasks one node's sample names.
const MaxTaskBeats = 10_000

// ValidateBeats checks a heartbeat's samples: fractions within 0..1 and no
// negative sizes. The error names the field ("nodes[i].cpu").
func ValidateBeats(beats []Beat) error {
	for i, bt := range beats {
		if bt.CPU < 0 || bt.CPU > 1 || bt.CPU != bt.CPU {
			return errs.Invalid("nodes["+strconv.Itoa(i)+"].cpu", "must be a fraction 0..1, got %v", bt.CPU)
		}
		if bt.MemoryUsed < 0 {
			return errs.Invalid("nodes["+strconv.Itoa(i)+"].memoryUsed", "must not be negative, got %d", bt.MemoryUsed)
		}
		if len(bt.Tasks) > MaxTaskBeats {
			return errs.Invalid("nodes["+strconv.Itoa(i)+"].tasks", "at most %d tasks, got %d", MaxTaskBeats, len(bt.Tasks))
		}
		for id, tb := range bt.Tasks {
			f := "nodes[" + strconv.Itoa(i) + "].tasks." + id
			switch {
			case tb.CPU < 0 || tb.CPU > 1e6 || tb.CPU != tb.CPU:
				return errs.Invalid(f+".cpu", "must be cores from 0 to 1e6, got %v", tb.CPU)
			case tb.Restarts < 0:
				return errs.Invalid(f+".restarts", "must not be negative, got %d", tb.Restarts)
			case len(tb.Probe) > maxProbeReason:
				return errs.Invalid(f+".probe", "at most %d bytes", maxProbeReason)
			case len(tb.Restarted) > maxProbeReason:
				return errs.Invalid(f+".restarted", "at most %d bytes", maxProbeReason)
			}
		}
		for id, d := range bt.Devices {
			if d.Utilization < 0 || d.Utilization > 1 || d.Utilization != d.Utilization {
				return errs.Invalid("nodes["+strconv.Itoa(i)+"].devices."+id+".utilization", "must be a fraction 0..1, got %v", d.Utilization)
			}
			if d.MemoryUsed < 0 {
				return errs.Invalid("nodes["+strconv.Itoa(i)+"].devices."+id+".memoryUsed", "must not be negative, got %d", d.MemoryUsed)
			}
		}
	}
	return nil
}

// DeviceBeat is one device's sample.
type DeviceBeat struct {
	Utilization float64 `json:"utilization"`
	MemoryUsed  int64   `json:"memoryUsed,omitempty"`
	// Healthy reports the device's health; absent keeps what the server
	// knows.
	Healthy *bool  `json:"healthy,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// NodeUsage is a node's latest heartbeat, as GET /nodes shows it.
type NodeUsage struct {
	Agent         string                `json:"agent"`
	Simulated     bool                  `json:"simulated,omitempty"`
	LastHeartbeat time.Time             `json:"lastHeartbeat"`
	CPU           float64               `json:"cpu"`
	MemoryUsed    int64                 `json:"memoryUsed,omitempty"`
	Devices       map[string]DeviceBeat `json:"devices,omitempty"`
	// Tasks is not shown: it names tasks of every tenant.
	Tasks map[string]TaskBeat `json:"-"`
}

// StatusUpdate is an agent's report on one task attempt.
type StatusUpdate struct {
	Task    string `json:"task"`
	Attempt int    `json:"attempt"`
	// State is running, succeeded, failed, timeout or lost (the run ended
	// without an outcome: the task is re-queued); the Status constants.
	State    string `json:"state"`
	ExitCode int    `json:"exitCode"`
	Reason   string `json:"reason,omitempty"`
	// Stop, for an attempt the agent stopped (a kill or a timeout), says
	// how the command took it.
	Stop *StopReport `json:"stop,omitempty"`
}

// StopReport is how a stopped attempt's command took the stop: the
// signal sent, the seconds it took to exit, whether the grace ran out
// (SIGKILL), and whether it was a checkpoint (a stop to resume later).
type StopReport struct {
	Signal     string  `json:"signal"`
	Seconds    float64 `json:"seconds"`
	Forced     bool    `json:"forced,omitempty"`
	Checkpoint bool    `json:"checkpoint,omitempty"`
}

// StatusResult says what became of one StatusUpdate: applied, or stale
// with the reason (the agent drops stale reports).
type StatusResult struct {
	Task    string `json:"task"`
	Applied bool   `json:"applied"`
	Reason  string `json:"reason,omitempty"`
}
