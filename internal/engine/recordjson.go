package engine

import (
	"fmt"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/jsonread"
)

// decodeTask reads a stored task record (what appendJSON or json.Marshal
// wrote). It runs for every task at start-up, so it uses the streaming
// reader rather than encoding/json; the spec is decoded without
// re-validation. A member it does not know is an error: recovery stops
// rather than drop what it cannot read.
func decodeTask(key string, b []byte) (*TaskRecord, error) {
	r := jsonread.New(b)
	obj, err := r.ReadObject()
	if err != nil {
		return nil, err
	}
	var rec TaskRecord
	for obj.Next() {
		k := obj.Key()
		switch k {
		case "spec":
			rec.Spec, err = api.DecodeTask(r)
		case "tenant":
			rec.Tenant, err = r.ReadString()
		case "state":
			rec.State, err = r.ReadString()
		case "node":
			rec.Node, err = r.ReadString()
		case "reason":
			rec.Reason, err = r.ReadString()
		case "cause":
			var c string
			if c, err = r.ReadString(); err == nil {
				rec.Cause = &c
			}
		case "seq":
			rec.Seq, err = readUint(r)
		case "chosen":
			rec.Chosen, err = readInt(r)
		case "attempt":
			rec.Attempt, err = readInt(r)
		case "failures":
			rec.Failures, err = readInt(r)
		case "exitCode":
			var c int
			if c, err = readInt(r); err == nil {
				rec.ExitCode = &c
			}
		case "devices":
			rec.Devices, err = readDevices(r)
		case "submitted":
			rec.Submitted, err = readTime(r)
		case "scheduled":
			rec.Scheduled, err = readTimePtr(r)
		case "started":
			rec.Started, err = readTimePtr(r)
		case "finished":
			rec.Finished, err = readTimePtr(r)
		case "attempts":
			rec.Attempts, err = readAttempts(r)
		case "trace":
			rec.Trace, err = r.ReadString()
		case "restarts":
			rec.Restarts, err = readInt(r)
		case "preemption":
			rec.Preemption, err = readPreemption(r)
		default:
			err = fmt.Errorf("unknown member %q", k)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
	}
	if err := obj.Err(); err != nil {
		return nil, err
	}
	if err := r.Finish(); err != nil {
		return nil, err
	}
	if rec.Spec.ID == "" {
		rec.Spec.ID = key // a generated id lives in the key
	}
	return &rec, nil
}

func readUint(r *jsonread.Reader) (uint64, error) {
	s, err := r.ReadNumber()
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(s, 10, 64)
}

func readInt(r *jsonread.Reader) (int, error) {
	s, err := r.ReadNumber()
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(s)
}

func readTime(r *jsonread.Reader) (time.Time, error) {
	s, err := r.ReadString()
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339Nano, s)
}

func readTimePtr(r *jsonread.Reader) (*time.Time, error) {
	t, err := readTime(r)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

func readDevices(r *jsonread.Reader) ([]api.DeviceRef, error) {
	arr, err := r.ReadArray()
	if err != nil {
		return nil, err
	}
	var out []api.DeviceRef
	for arr.Next() {
		obj, err := r.ReadObject()
		if err != nil {
			return nil, err
		}
		var d api.DeviceRef
		for obj.Next() {
			switch k := obj.Key(); k {
			case "type":
				d.Type, err = r.ReadString()
			case "id":
				d.ID, err = r.ReadString()
			case "model":
				d.Model, err = r.ReadString()
			case "share":
				var s string
				if s, err = r.ReadNumber(); err == nil {
					var n int64
					n, err = strconv.ParseInt(s, 10, 32)
					d.Share = int32(n)
				}
			default:
				err = fmt.Errorf("unknown device member %q", k)
			}
			if err != nil {
				return nil, err
			}
		}
		if err := obj.Err(); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, arr.Err()
}

// readAttempts reads a record's earlier attempts (at most MaxAttempts are
// written; more is damage).
func readAttempts(r *jsonread.Reader) ([]Attempt, error) {
	arr, err := r.ReadArray()
	if err != nil {
		return nil, err
	}
	var out []Attempt
	for arr.Next() {
		if len(out) == MaxAttempts {
			return nil, fmt.Errorf("more than %d attempts", MaxAttempts)
		}
		a, err := readAttempt(r)
		if err != nil {
			return nil, fmt.Errorf("%d: %w", len(out), err)
		}
		out = append(out, a)
	}
	return out, arr.Err()
}

func readAttempt(r *jsonread.Reader) (Attempt, error) {
	var a Attempt
	obj, err := r.ReadObject()
	if err != nil {
		return a, err
	}
	for obj.Next() {
		switch k := obj.Key(); k {
		case "attempt":
			a.Attempt, err = readInt(r)
		case "node":
			a.Node, err = r.ReadString()
		case "devices":
			a.Devices, err = readDevices(r)
		case "scheduled":
			a.Scheduled, err = readTimePtr(r)
		case "started":
			a.Started, err = readTimePtr(r)
		case "finished":
			a.Finished, err = readTime(r)
		case "exitCode":
			var c int
			if c, err = readInt(r); err == nil {
				a.ExitCode = &c
			}
		case "reason":
			a.Reason, err = r.ReadString()
		case "state":
			a.State, err = r.ReadString()
		case "stop":
			a.Stop, err = readStop(r)
		default:
			err = fmt.Errorf("unknown attempt member %q", k)
		}
		if err != nil {
			return a, err
		}
	}
	return a, obj.Err()
}

func readFloat(r *jsonread.Reader) (float64, error) {
	s, err := r.ReadNumber()
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(s, 64)
}

func readPreemption(r *jsonread.Reader) (*PreemptionCost, error) {
	obj, err := r.ReadObject()
	if err != nil {
		return nil, err
	}
	var p PreemptionCost
	for obj.Next() {
		switch k := obj.Key(); k {
		case "count":
			p.Count, err = readInt(r)
		case "stopSeconds":
			p.StopSeconds, err = readFloat(r)
		case "restartSeconds":
			p.RestartSeconds, err = readFloat(r)
		default:
			err = fmt.Errorf("unknown preemption member %q", k)
		}
		if err != nil {
			return nil, err
		}
	}
	return &p, obj.Err()
}

func readStop(r *jsonread.Reader) (*agentapi.StopReport, error) {
	obj, err := r.ReadObject()
	if err != nil {
		return nil, err
	}
	var s agentapi.StopReport
	for obj.Next() {
		switch k := obj.Key(); k {
		case "signal":
			s.Signal, err = r.ReadString()
		case "seconds":
			s.Seconds, err = readFloat(r)
		case "forced":
			s.Forced, err = r.ReadBool()
		case "checkpoint":
			s.Checkpoint, err = r.ReadBool()
		default:
			err = fmt.Errorf("unknown stop member %q", k)
		}
		if err != nil {
			return nil, err
		}
	}
	return &s, obj.Err()
}

// DecodeTaskRecord reads a task record as the store keeps it (a
// standby's stale reads).
func DecodeTaskRecord(key string, b []byte) (*TaskRecord, error) { return decodeTask(key, b) }
