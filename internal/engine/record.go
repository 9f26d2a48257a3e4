package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
)

// Store kinds.
const (
	KindTask  = "task"
	KindNode  = "node"
	KindMeta  = "meta"
	KindQueue = "queue"
)

// TaskRecord is a task as the API shows it and the store keeps it: the
// submitted spec plus its state.
type TaskRecord struct {
	Spec    api.Task        `json:"spec"`
	Tenant  string          `json:"tenant"`
	Seq     uint64          `json:"seq"`
	State   string          `json:"state"`
	Node    string          `json:"node,omitempty"`
	Devices []api.DeviceRef `json:"devices,omitempty"`
	Chosen  int             `json:"chosen"`
	Attempt int             `json:"attempt"`
	// Failures counts the retries a job task used.
	Failures int    `json:"failures,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Cause is the reason of the task's own (why it went back to
	// pending, say) when Reason adds why its class waits; restored in
	// its place, so that a restart does not add the wait reason again.
	Cause     *string    `json:"cause,omitempty"`
	ExitCode  *int       `json:"exitCode,omitempty"`
	Submitted time.Time  `json:"submitted"`
	Scheduled *time.Time `json:"scheduled,omitempty"`
	Started   *time.Time `json:"started,omitempty"`
	Finished  *time.Time `json:"finished,omitempty"`
	// Attempts are the task's earlier attempts that were placed and
	// ended without ending the task (re-queued: node lost, preempted,
	// drained, retried after a failure), oldest first, at most
	// MaxAttempts; the fields above are the current attempt's.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Restarts counts the task's earlier attempts that started (stopped,
	// lost or failed and retried), all of them: its HETSCHED_RESTART_COUNT.
	Restarts int `json:"restarts,omitempty"`
	// Preemption is what preemption cost the task; nil until it is first
	// preempted.
	Preemption *PreemptionCost `json:"preemption,omitempty"`
	// Trace is the W3C traceparent its life continues (tracing.go): its
	// sampled submission's, then its latest placement's. Empty: not
	// traced.
	Trace string `json:"trace,omitempty"`

	// spec caches Spec's JSON encoding (which may lack the id when the
	// engine generated it; the store key carries it). Immutable once set,
	// so copies of a record share it.
	spec []byte
}

// PreemptionCost is what preemption cost a task: how many times it was
// preempted, the seconds its commands took to exit after their stop
// signals (saving a checkpoint, as their agents measured), and the
// seconds from each eviction to its next attempt running.
type PreemptionCost struct {
	Count          int     `json:"count"`
	StopSeconds    float64 `json:"stopSeconds"`
	RestartSeconds float64 `json:"restartSeconds"`
}

// Attempt states: how an earlier attempt ended.
const (
	AttemptPreempted = "preempted" // evicted for another task ("preempted by …")
	AttemptFailed    = "failed"    // ended with an exit code, and the task was retried
	AttemptRequeued  = "requeued"  // stopped or lost otherwise (node lost, drained, a device fault)
)

// Attempt is an earlier attempt of a task: where it ran and how it
// ended. Its logs stay with the agent of Node, under its number.
type Attempt struct {
	Attempt   int             `json:"attempt"`
	Node      string          `json:"node,omitempty"`
	Devices   []api.DeviceRef `json:"devices,omitempty"`
	Scheduled *time.Time      `json:"scheduled,omitempty"`
	Started   *time.Time      `json:"started,omitempty"`
	Finished  time.Time       `json:"finished"`
	ExitCode  *int            `json:"exitCode,omitempty"`
	Reason    string          `json:"reason,omitempty"`
	// State is how it ended: AttemptPreempted, AttemptFailed or
	// AttemptRequeued.
	State string `json:"state,omitempty"`
	// Stop is how its command took the stop signal, as its agent reported
	// it after the attempt ended (nil until then, or when it was not
	// stopped).
	Stop *agentapi.StopReport `json:"stop,omitempty"`
}

// MaxAttempts bounds the earlier attempts a record keeps (the oldest go
// first), so that a task re-queued forever stays small.
const MaxAttempts = 10

// endAttempt moves r's current attempt into its history as ended at
// now for reason, and clears what belonged to it. The history is copied,
// never appended in place: copies of a record share its array.
func (r *TaskRecord) endAttempt(now time.Time, reason string) {
	a := Attempt{Attempt: r.Attempt, Node: r.Node, Devices: r.Devices, Scheduled: r.Scheduled, Started: r.Started,
		Finished: now, ExitCode: r.ExitCode, Reason: reason, State: AttemptRequeued}
	switch {
	case r.ExitCode != nil:
		a.State = AttemptFailed
	case strings.HasPrefix(reason, preemptedBy), strings.HasPrefix(reason, core.SwappedOutPrefix):
		a.State = AttemptPreempted
		p := PreemptionCost{Count: 1}
		if r.Preemption != nil {
			p = *r.Preemption
			p.Count++
		}
		r.Preemption = &p
	}
	if r.Started != nil {
		r.Restarts++
	}
	keep := r.Attempts
	if len(keep) >= MaxAttempts {
		keep = keep[len(keep)-MaxAttempts+1:]
	}
	h := make([]Attempt, 0, len(keep)+1)
	r.Attempts = append(append(h, keep...), a)
	r.ExitCode = nil
}

// served is the service r attained in its ended attempts (time running,
// or placed when it never started), as far as its history says: the last
// MaxAttempts attempts.
func (r *TaskRecord) served() time.Duration {
	var d time.Duration
	for _, a := range r.Attempts {
		from := a.Started // as the core counts: from the start, else the placement
		if from == nil {
			from = a.Scheduled
		}
		if from != nil && a.Finished.After(*from) {
			d += a.Finished.Sub(*from)
		}
	}
	return d
}

// NodeRecord is a node as the store keeps it.
type NodeRecord struct {
	Spec api.Node `json:"spec"`
	// Agent is the agent that registered the node; empty for a node of
	// the static inventory (which never heartbeats).
	Agent string `json:"agent,omitempty"`
	// Admin is the state an admin set (cordoned, draining) that a
	// notready node returns to when its heartbeats resume; empty: ready.
	Admin string `json:"admin,omitempty"`
}

// appendJSON appends the record's store encoding: the JSON object that
// json.Marshal(r) would write, built by hand because it runs for every
// task change on the engine loop.
func (r *TaskRecord) appendJSON(b []byte) ([]byte, error) {
	if r.spec == nil {
		spec, err := r.Spec.AppendJSON(nil)
		if err != nil {
			return b, err
		}
		r.spec = spec
	}
	b = append(b, `{"spec":`...)
	b = append(b, r.spec...)
	b = append(b, `,"tenant":`...)
	b = api.AppendJSONString(b, r.Tenant)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"state":`...)
	b = api.AppendJSONString(b, r.State)
	if r.Node != "" {
		b = append(b, `,"node":`...)
		b = api.AppendJSONString(b, r.Node)
	}
	if len(r.Devices) > 0 {
		d, err := json.Marshal(r.Devices)
		if err != nil {
			return b, err
		}
		b = append(b, `,"devices":`...)
		b = append(b, d...)
	}
	b = append(b, `,"chosen":`...)
	b = strconv.AppendInt(b, int64(r.Chosen), 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	if r.Failures != 0 {
		b = append(b, `,"failures":`...)
		b = strconv.AppendInt(b, int64(r.Failures), 10)
	}
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b = api.AppendJSONString(b, r.Reason)
	}
	if r.Cause != nil {
		b = append(b, `,"cause":`...)
		b = api.AppendJSONString(b, *r.Cause)
	}
	if r.ExitCode != nil {
		b = append(b, `,"exitCode":`...)
		b = strconv.AppendInt(b, int64(*r.ExitCode), 10)
	}
	var err error
	if b, err = appendTime(b, `,"submitted":`, r.Submitted); err != nil {
		return b, err
	}
	for _, t := range []struct {
		k string
		v *time.Time
	}{{`,"scheduled":`, r.Scheduled}, {`,"started":`, r.Started}, {`,"finished":`, r.Finished}} {
		if t.v != nil {
			if b, err = appendTime(b, t.k, *t.v); err != nil {
				return b, err
			}
		}
	}
	if r.Trace != "" {
		b = append(b, `,"trace":`...)
		b = api.AppendJSONString(b, r.Trace)
	}
	if b, err = r.AppendRestartsJSON(b); err != nil {
		return b, err
	}
	if len(r.Attempts) > 0 {
		// Rare (re-queued tasks only): encoding/json is fast enough.
		h, err := json.Marshal(r.Attempts)
		if err != nil {
			return b, err
		}
		b = append(b, `,"attempts":`...)
		b = append(b, h...)
	}
	return append(b, '}'), nil
}

// AppendRestartsJSON appends the record's "restarts" and "preemption"
// members (each when set), as json.Marshal writes them, with a leading
// comma each.
func (r *TaskRecord) AppendRestartsJSON(b []byte) ([]byte, error) {
	if r.Restarts != 0 {
		b = append(b, `,"restarts":`...)
		b = strconv.AppendInt(b, int64(r.Restarts), 10)
	}
	if r.Preemption != nil {
		p, err := json.Marshal(r.Preemption)
		if err != nil {
			return b, err
		}
		b = append(b, `,"preemption":`...)
		b = append(b, p...)
	}
	return b, nil
}

// appendTime writes key and t as encoding/json does (RFC 3339, nanoseconds).
func appendTime(b []byte, key string, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, fmt.Errorf("time %v: year outside [0,9999]", t)
	}
	b = append(b, key...)
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// saved converts a record to the core's restore form.
func (r *TaskRecord) saved() core.Saved {
	st, _ := core.ParseState(r.State)
	reason := r.Reason
	if r.Cause != nil {
		reason = *r.Cause
	}
	s := core.Saved{State: st, Node: r.Node, Devices: r.Devices, Chosen: r.Chosen, Attempt: r.Attempt, Reason: reason,
		Failures: r.Failures}
	// A job's tasks are "<job>.<task>" with the job in their metadata; a
	// standalone task's own "job" metadata names no job.
	if j := r.Spec.Metadata[JobMetadataKey]; j != "" && strings.HasPrefix(r.Spec.ID, j+".") {
		s.Job = j
	}
	if r.Started != nil {
		s.Started = *r.Started
	} else if r.Scheduled != nil {
		s.Started = *r.Scheduled
	}
	s.Served = r.served()
	return s
}

func timePtr(t time.Time) *time.Time { return &t }

// queueName is the queue a record's task waits in ("default" when its
// spec names none), as metrics and traces label it.
func queueName(r *TaskRecord) string {
	if r.Spec.Queue == "" {
		return "default"
	}
	return r.Spec.Queue
}
