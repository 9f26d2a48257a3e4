package core

// Code tells a plugin's verdict, as in the Kubernetes scheduling
// framework: success; "does not fit now" (Unschedulable: capacity freed
// on the node, by tasks ending or by preemption, may make it fit); "can
// never fit" (UnschedulableAndUnresolvable: nothing evicted from the node
// helps, so preemption gives the node, or for a node-independent filter
// the option, up); or "broke" (Error: a bug or bad state, never a capacity
// problem). Only a node that passes every filter is a fit.
type Code uint8

// Status codes.
const (
	Success Code = iota
	Unschedulable
	Error
	UnschedulableAndUnresolvable
)

// Status is a plugin's answer; nil means success.
type Status struct {
	Code   Code
	Reason string // short, groupable: "insufficient nvidia.com/gpu"
	Err    error
}

// IsSuccess reports whether s is nil or Success.
func (s *Status) IsSuccess() bool { return s == nil || s.Code == Success }

// IsUnresolvable reports whether s says that no eviction can make the
// task fit.
func (s *Status) IsUnresolvable() bool { return s != nil && s.Code == UnschedulableAndUnresolvable }

// NewUnschedulable returns a "does not fit now" status.
func NewUnschedulable(reason string) *Status { return &Status{Code: Unschedulable, Reason: reason} }

// NewUnresolvable returns a "can never fit" status.
func NewUnresolvable(reason string) *Status {
	return &Status{Code: UnschedulableAndUnresolvable, Reason: reason}
}

// AsError returns an Error status wrapping err.
func AsError(plugin string, err error) *Status {
	return &Status{Code: Error, Reason: plugin + ": " + err.Error(), Err: err}
}

// CycleState is what a plugin may read during one placement attempt.
type CycleState struct {
	core *Core
	now  int64
	// picked is what the device check chose on the node being checked
	// (a search's; empty outside one), for plugins that score a
	// placement by its devices.
	picked []devShare
}

// Now returns the attempt's time (ns since the Unix epoch).
func (cs *CycleState) Now() int64 { return cs.now }

// Plugin is the common part of every plugin.
type Plugin interface{ Name() string }

// FilterPlugin rejects nodes a task cannot use. Static filters see a group's
// template node (labels, taints, capacity: no allocation) and run once per
// group; dynamic filters see each candidate node. A filter that keeps
// state for the attempt's later steps leaves it in the CycleState (the
// devices DeviceFit picks, which score plugins and the placement read).
type FilterPlugin interface {
	Plugin
	Filter(cs *CycleState, t *Task, o *Option, n *Node) *Status
}

// ScorePlugin rates a feasible node 0..100 (higher is better).
type ScorePlugin interface {
	Plugin
	Score(cs *CycleState, t *Task, o *Option, n *Node) (int64, *Status)
}

// ReservePlugin is told when a placement is made (Reserve) or undone
// (Unreserve), to keep its own bookkeeping in step.
type ReservePlugin interface {
	Plugin
	Reserve(cs *CycleState, t *Task, o *Option, n *Node)
	Unreserve(cs *CycleState, t *Task, o *Option, n *Node)
}

// SharePicker chooses the device for a fractional request among the
// devices of n (indexes into n.Devices()) that have at least milli free.
type SharePicker interface {
	Plugin
	PickShare(cs *CycleState, t *Task, o *Option, n *Node, candidates []int32, milli int64) int32
}

// QueueSortPlugin gives the key pending tasks are ordered by within a tier
// (smaller first; ties by submission order).
type QueueSortPlugin interface {
	Plugin
	SortKey(cs *CycleState, t *Task) int64
}

// TimeSharePlugin ranks tasks for time-sharing (srtf): a pending task may
// swap out a running preemptible task of its tier or a less important one
// whose rank is larger, once that task has run TimeShareMinRun. Ranks
// may change with time (attained service): Rank is read at each try.
type TimeSharePlugin interface {
	Plugin
	Rank(t *Task) int64
}

// RankCeiling is implemented by a TimeSharePlugin whose ranks are bounded
// (las: its last queue): a pending task of rank MaxRank can swap out
// nothing, since no task ranks worse, so it does not walk the nodes for
// victims, and is retried when capacity or its own rank changes.
type RankCeiling interface {
	MaxRank() int64
}

// CandidateOrder is how a policy walks a group's buckets.
type CandidateOrder uint8

// Candidate orders.
const (
	MostAllocatedFirst CandidateOrder = iota
	LeastAllocatedFirst
	// Rotate is round-robin over all nodes (scores are not used).
	Rotate
)

// WeightedScore is a score plugin with its weight in the policy.
type WeightedScore struct {
	Plugin ScorePlugin
	Weight int64
}

// Policy is a named set of plugins with weights (DESIGN.md "Policies").
type Policy struct {
	Name        string
	Description string
	Order       CandidateOrder
	Static      []FilterPlugin
	// Filters are the policy's dynamic filters, run after the core's own
	// (coreFilters: NodeIdentity, QueueQuota, NodeResourcesFit, DeviceFit),
	// which every policy runs first.
	Filters   []FilterPlugin
	Scores    []WeightedScore
	Reserve   []ReservePlugin
	QueueSort QueueSortPlugin // nil: submission order
	TimeShare TimeSharePlugin // nil: a placed task keeps its place
	// Rounds, when set, places the work it manages only in rounds
	// (gavel-rounds): its gate is one of Filters too, so that reasons name
	// it.
	Rounds RoundPolicy
	Picker SharePicker
	// SampleSize overrides Config.SampleSize when > 0.
	SampleSize int
	// FullWalk makes every search look at every node of every compatible
	// group and score every fit (kube-scheduler's percentageOfNodesToScore
	// 100), whatever SampleSize and Config.MaxVisit say. Cost: one check and
	// one score per node per placement.
	FullWalk bool
	// KeepRoom makes a least-allocated-first search look first at the
	// nodes that could no longer hold the largest request seen (strand.go),
	// so that spreading small work does not take the room large requests
	// need.
	KeepRoom bool
	// CompareOptions lets the candidates of all of a task's options compete
	// on score. Without it, options are tried fastest first (declared
	// speed, ties in the order given) and the first that fits anywhere wins:
	// the earliest expected completion among the options that fit now.
	CompareOptions bool
}

// RoundPolicy places the work it manages only in rounds (gavel-rounds).
// The core calls it at two named points: at each Tick, Next says whether
// a round is due and Round runs it (placing through the core's search and
// journal); at each placement, Gate says whether a task waits for the
// next round. It holds its own state (the round's time, whether one is
// placing now).
type RoundPolicy interface {
	Plugin
	// Next is when the next round is due, at or after now; ok=false while
	// no round has work (nothing waits or runs).
	Next(now int64) (at int64, ok bool)
	// Round runs a round at now.
	Round(now int64)
	// Gate reports whether t waits for the next round.
	Gate(t *Task) bool
}
