package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/jsonread"
)

// The task responses (schedule, submit, get, complete) are written by hand:
// appendTaskView writes exactly what encoding/json writes for view(r), at a
// fraction of the cost and without its reflection's deep stack (which, on
// HTTP/2, where every request runs on a fresh goroutine, had to be grown
// by copying on most requests).

// appendTaskView appends json.Marshal(view(r)).
func appendTaskView(b []byte, r *engine.TaskRecord) ([]byte, error) {
	start := len(b)
	b, err := r.Spec.AppendJSON(b)
	if err != nil {
		return b[:start], err
	}
	b = b[:len(b)-1] // the task object's '}': the view's fields follow in the same object
	if len(b) > start+1 {
		b = append(b, ',')
	}
	b = append(b, `"state":`...)
	b = api.AppendJSONString(b, r.State)
	if r.Node != "" {
		b = append(b, `,"node":`...)
		b = api.AppendJSONString(b, r.Node)
	}
	if len(r.Devices) > 0 {
		d, err := json.Marshal(r.Devices)
		if err != nil {
			return b[:start], err
		}
		b = append(b, `,"devices":`...)
		b = append(b, d...)
	}
	b = append(b, `,"chosen":`...)
	b = strconv.AppendInt(b, int64(r.Chosen), 10)
	b = append(b, `,"attempt":`...)
	b = strconv.AppendInt(b, int64(r.Attempt), 10)
	if r.ExitCode != nil {
		b = append(b, `,"exitCode":`...)
		b = strconv.AppendInt(b, int64(*r.ExitCode), 10)
	}
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b = api.AppendJSONString(b, r.Reason)
	}
	if b, err = appendJSONTime(b, `,"submitted":`, r.Submitted); err != nil {
		return b[:start], err
	}
	for _, t := range [...]struct {
		k string
		v *time.Time
	}{{`,"scheduled":`, r.Scheduled}, {`,"started":`, r.Started}, {`,"finished":`, r.Finished}} {
		if t.v != nil {
			if b, err = appendJSONTime(b, t.k, *t.v); err != nil {
				return b[:start], err
			}
		}
	}
	if len(r.Attempts) > 0 {
		h, err := json.Marshal(r.Attempts) // re-queued tasks only
		if err != nil {
			return b[:start], err
		}
		b = append(b, `,"attempts":`...)
		b = append(b, h...)
	}
	if b, err = r.AppendRestartsJSON(b); err != nil {
		return b[:start], err
	}
	if r.Trace != "" {
		b = append(b, `,"trace":`...)
		b = api.AppendJSONString(b, r.Trace)
	}
	return append(b, '}'), nil
}

// appendJSONTime appends key and t as time.Time's MarshalJSON writes it.
func appendJSONTime(b []byte, key string, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, fmt.Errorf("json: time %v: year outside of range [0,9999]", t)
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		j, err := t.MarshalJSON()
		if err != nil {
			return b, err
		}
		b = append(b, key...)
		return append(b, j...), nil
	}
	b = append(b, key...)
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), nil
}

// bufPool holds response buffers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// writeTasks writes one task view, or {"tasks":[...]} for a batch, as
// writeJSON would.
func writeTasks(w http.ResponseWriter, status int, recs []*engine.TaskRecord, batch bool) {
	bp := bufPool.Get().(*[]byte)
	b := (*bp)[:0]
	if batch {
		b = append(b, `{"tasks":[`...)
	}
	for i, r := range recs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendTaskView(b, r); err != nil {
			// Not reachable for records the engine wrote; stay correct.
			writeError(w, errs.New(errs.Internal, "", "encoding task %s: %v", r.Spec.ID, err))
			return
		}
	}
	if batch {
		b = append(b, ']', '}')
	}
	b = append(b, '\n')
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(status)
	_, _ = w.Write(b) // the client may have gone; nothing to do then
	if cap(b) <= 64<<10 {
		*bp = b
		bufPool.Put(bp)
	}
}

var jsonContentType = []string{"application/json"}

// writeTask writes one task view.
// writeTaskQueueing writes one task's view with its queue position (as
// "queueing": core.QueueInfo).
func writeTaskQueueing(w http.ResponseWriter, r *engine.TaskRecord, info *core.QueueInfo) {
	b, err := appendTaskView(nil, r)
	if err == nil {
		var q []byte
		if q, err = json.Marshal(info); err == nil {
			b = append(append(append(b[:len(b)-1], `,"queueing":`...), q...), '}', '\n')
		}
	}
	if err != nil {
		writeError(w, errs.New(errs.Internal, "", "encoding task %s: %v", r.Spec.ID, err))
		return
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = []string{strconv.Itoa(len(b))}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b) // the client may have gone; nothing to do then
}

func writeTask(w http.ResponseWriter, status int, r *engine.TaskRecord) {
	recs := [1]*engine.TaskRecord{r}
	writeTasks(w, status, recs[:], false)
}

// decodeCompletion reads POST /tasks/{id}/complete's body {"exitCode":0,
// "reason":"…"} as decodeStrict would into that struct (member names
// matched without regard to case, unknown members and trailing data are
// errors, null leaves a member unset), without reflection.
func decodeCompletion(b []byte) (exitCode int, reason string, err error) {
	r := jsonread.New(b)
	switch r.Peek() {
	case jsonread.End:
		return 0, "", errs.Invalid("", "empty or truncated JSON body")
	case jsonread.Null:
		_ = r.ReadNull()
	case jsonread.Object:
		obj, _ := r.ReadObject()
		var seenExit, seenReason bool
		for obj.Next() {
			k := obj.Key()
			switch {
			case strings.EqualFold(k, "exitCode") && seenExit:
				return 0, "", errs.Invalid("exitCode", "given twice")
			case strings.EqualFold(k, "reason") && seenReason:
				return 0, "", errs.Invalid("reason", "given twice")
			case strings.EqualFold(k, "exitCode"):
				seenExit = true
				switch r.Peek() {
				case jsonread.Null:
					_ = r.ReadNull()
				case jsonread.Number:
					s, err := r.ReadNumber()
					if err != nil {
						return 0, "", errs.Invalid("", "malformed JSON: %v", err)
					}
					if exitCode, err = strconv.Atoi(s); err != nil {
						return 0, "", errs.Invalid("exitCode", "must be int, got number %s", s)
					}
				default:
					return 0, "", typeError(r, "exitCode", "int")
				}
			case strings.EqualFold(k, "reason"):
				seenReason = true
				switch r.Peek() {
				case jsonread.Null:
					_ = r.ReadNull()
				case jsonread.String:
					if reason, err = r.ReadString(); err != nil {
						return 0, "", errs.Invalid("reason", "malformed JSON: %v", err)
					}
				default:
					return 0, "", typeError(r, "reason", "string")
				}
			default:
				return 0, "", errs.Invalid(k, "unknown field")
			}
		}
		if err := obj.Err(); err != nil {
			return 0, "", errs.Invalid("", "malformed JSON: %v", err)
		}
	default:
		return 0, "", errs.Invalid("", "the body must be an object, got %s", r.Peek())
	}
	if err := r.Finish(); err != nil {
		return 0, "", errs.Invalid("", "unexpected data after the JSON value")
	}
	return exitCode, reason, nil
}

// typeError is a member of the wrong type, or malformed JSON where its
// value should be.
func typeError(r *jsonread.Reader, field, want string) error {
	switch k := r.Peek(); k {
	case jsonread.End:
		return errs.Invalid("", "empty or truncated JSON body")
	case jsonread.Bad:
		return errs.Invalid("", "malformed JSON at byte %d", r.Offset())
	default:
		return errs.Invalid(field, "must be %s, got %s", want, k)
	}
}
