// Package engine owns a scheduling core for a server: one goroutine applies
// commands to the core in batches, commits every change the batch caused to
// the store in one durable commit, and only then answers the commands and
// publishes the decisions. Reads are served from a copy of the task records
// that the loop updates after each commit, so they never wait for the loop.
//
// Contracts:
//   - A command that returned nil is durable: its effect, and every
//     decision the core made in the same batch, is in the store.
//   - The core is touched only by the loop goroutine; no lock is held
//     across a store commit or across any network I/O.
//   - A store failure stops the engine: nothing after it is acknowledged,
//     because memory and disk could differ. A restart rebuilds from disk.
package engine

import (
	"encoding/json"
	"time"

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
	Spec      api.Task         `json:"spec"`
	Tenant    string           `json:"tenant"`
	Seq       uint64           `json:"seq"`
	State     string           `json:"state"`
	Node      string           `json:"node,omitempty"`
	Devices   []core.DeviceRef `json:"devices,omitempty"`
	Chosen    int              `json:"chosen"`
	Attempt   int              `json:"attempt"`
	Reason    string           `json:"reason,omitempty"`
	ExitCode  *int             `json:"exitCode,omitempty"`
	Submitted time.Time        `json:"submitted"`
	Scheduled *time.Time       `json:"scheduled,omitempty"`
	Started   *time.Time       `json:"started,omitempty"`
	Finished  *time.Time       `json:"finished,omitempty"`
}

// NodeRecord is a node as the store keeps it.
type NodeRecord struct {
	Spec api.Node `json:"spec"`
}

func (r *TaskRecord) encode() ([]byte, error) { return json.Marshal(r) }

func decodeTask(b []byte) (*TaskRecord, error) {
	var r TaskRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// saved converts a record to the core's restore form.
func (r *TaskRecord) saved() core.Saved {
	st, _ := core.ParseState(r.State)
	s := core.Saved{State: st, Node: r.Node, Devices: r.Devices, Chosen: r.Chosen, Attempt: r.Attempt, Reason: r.Reason}
	if r.Started != nil {
		s.Started = *r.Started
	} else if r.Scheduled != nil {
		s.Started = *r.Scheduled
	}
	return s
}

func timePtr(t time.Time) *time.Time { return &t }
