package core

import (
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

// State is a task's lifecycle state (API.md "Task states").
type State uint8

// Task states. Preempted is reported as a transition; the task is Pending
// again right after it.
const (
	Pending State = iota
	Blocked
	Scheduled
	Running
	Succeeded
	Failed
	Timeout
	Cancelled
	Expired
	Skipped
	Preempted
	numStates
)

var stateNames = [numStates]string{"pending", "blocked", "scheduled", "running", "succeeded", "failed", "timeout", "cancelled", "expired", "skipped", "preempted"}

func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "unknown"
}

// Terminal reports whether no further transition can happen.
func (s State) Terminal() bool {
	switch s {
	case Succeeded, Failed, Timeout, Cancelled, Expired, Skipped:
		return true
	}
	return false
}

// ParseState reads a state name.
func ParseState(s string) (State, bool) {
	for i, n := range stateNames {
		if n == s {
			return State(i), true
		}
	}
	return 0, false
}

// DeviceRef names one concrete device of a placement (api.DeviceRef: the
// wire type, shared with records and agents' assignments).
type DeviceRef = api.DeviceRef

// Placement is the decision to run a task on a node with concrete devices.
// Chosen is the index of the alternative used; -1 means the task's own
// resources.
type Placement struct {
	Task    string
	Node    string
	Devices []DeviceRef
	Chosen  int
	Attempt int
	// Delay is how long the task waited in the queue for this placement.
	Delay time.Duration
	// AttemptWait is the part of Delay that belongs to the attempt that
	// placed it: from the later of its entry into the queue and the moment
	// its class queue was last woken by capacity it could use, to the
	// input that placed it. Time spent waiting for capacity is not in it;
	// a batch window, a search budget's retry and a placement limit are.
	// The driver adds its own time to the decision (see Unfit).
	AttemptWait time.Duration
	Priority    int // native priority
	Level       int // effective level when placed (after aging)
}

// Preemption evicts Victim from Node to make room for By (empty when a
// gavel round swapped it out: gavel.go).
type Preemption struct {
	Victim string
	By     string
	Node   string
	Reason PreemptReason
}

// Transition reports a state change other than pending→scheduled (which a
// Placement reports).
type Transition struct {
	Task    string
	From    State
	To      State
	Reason  string
	Attempt int
}

// UnschedulableClass reports that the tasks of one scheduling class at one
// level could not be placed, with the reason summary; it is reported when
// the reason changes, and again with the same reason for the tasks that
// joined the class's queue while it was not blocked (their records never
// had it). Sample is one of the tasks; Count is how many tasks of the
// class were waiting at that level. A gang whose waiting members' one
// reason changed is reported once per member instead (each its Sample,
// Count the members waiting), so that every member's reason is re-read.
//
// Obligation: Tasks lists every task waiting in the class's queue when the
// reason changed, or those not told it yet when it did not (Sample need
// not be among them; nil for a gang member's report, whose Sample is the
// one);
// the reason is each one's from now on (Task.Reason), and a driver that
// keeps its own copies of tasks' states re-reads all of them, so that
// none is left without its reason (Kubernetes: every waiting pod gets its
// condition and event, not only the first of its class).
type UnschedulableClass struct {
	Sample string
	Count  int
	Reason string
	Tasks  []string
}

// Output is what the core decided since the last TakeOutput.
type Output struct {
	Placements    []Placement
	Preemptions   []Preemption
	Transitions   []Transition
	Unschedulable []UnschedulableClass
	// Unfit has one entry per attempt that found no place (a class
	// queue's head, tried once for its class, then parked until capacity
	// it could use appears): it is for the decision-latency metric, and
	// asks nothing of the driver. With Placement.AttemptWait it gives every
	// attempt's latency: the wait plus the driver's time from the input to
	// the decision's commit.
	Unfit []UnfitAttempt
}

// UnfitAttempt is an attempt that found no place for Task (native
// priority Priority); Wait is as Placement.AttemptWait.
type UnfitAttempt struct {
	Task     string
	Priority int
	Wait     time.Duration
}

// Empty reports whether there is nothing to act on.
func (o *Output) Empty() bool {
	return len(o.Placements) == 0 && len(o.Preemptions) == 0 && len(o.Transitions) == 0 && len(o.Unschedulable) == 0
}

func (o *Output) reset() {
	o.Placements = o.Placements[:0]
	o.Preemptions = o.Preemptions[:0]
	o.Transitions = o.Transitions[:0]
	o.Unschedulable = o.Unschedulable[:0]
	o.Unfit = o.Unfit[:0]
}

// Result is how a task ended, reported by its executor or lease holder.
type Result struct {
	ExitCode int
	// TimedOut marks a task killed for running past its timeout.
	TimedOut bool
	Reason   string
}

// NodeUsage is one utilization sample of a node (from a heartbeat): the
// fraction of CPU in use and each device's utilization, 0..1.
type NodeUsage struct {
	CPU     float64
	Devices map[string]float64 // device id -> utilization
}
