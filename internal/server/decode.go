package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// MaxBodyBytes bounds a request body; larger bodies get 413.
const MaxBodyBytes = 64 << 20

// readBody reads a bounded request body.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errs.New(errs.TooLarge, "", "request body larger than %d bytes", MaxBodyBytes)
		}
		return nil, errs.Invalid("", "reading the body: %v", err)
	}
	return b, nil
}

// decodeStrict decodes JSON into v: unknown fields and trailing data are
// errors naming the field where possible.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return errs.Invalid("", "unexpected data after the JSON value")
	}
	return nil
}

// jsonError turns a decoding error into an *errs.Error with a field.
func jsonError(err error) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return e
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		// Fields of the embedded api.Task come as "Task.x".
		return errs.Invalid(strings.TrimPrefix(typeErr.Field, "Task."), "must be %s, got %s", typeErr.Type, typeErr.Value)
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return errs.Invalid("", "malformed JSON at byte %d: %v", syn.Offset, err)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return errs.Invalid(strings.Trim(f, `"`), "unknown field")
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errs.Invalid("", "empty or truncated JSON body")
	}
	return errs.Invalid("", "%v", err)
}

// taskWire mirrors api.Task with its resource lists raw, so that a bad
// quantity's error names its full path ("resources.cpu",
// "alternatives[1].resources.memory").
type taskWire struct {
	api.Task
	Resources    json.RawMessage `json:"resources,omitempty"`
	Alternatives []altWire       `json:"alternatives,omitempty"`
}

type altWire struct {
	Resources json.RawMessage `json:"resources"`
	Speed     float64         `json:"speed,omitempty"`
}

// decodeTask decodes and validates one task object.
func decodeTask(raw []byte) (api.Task, error) {
	var w taskWire
	if err := decodeStrict(raw, &w); err != nil {
		return api.Task{}, err
	}
	t := w.Task
	if len(w.Resources) > 0 && string(w.Resources) != "null" {
		if err := t.Resources.UnmarshalJSON(w.Resources); err != nil {
			return api.Task{}, errs.Prefix("resources", err)
		}
	}
	t.Alternatives = nil
	for i, a := range w.Alternatives {
		alt := api.Alternative{Speed: a.Speed}
		if len(a.Resources) > 0 && string(a.Resources) != "null" {
			if err := alt.Resources.UnmarshalJSON(a.Resources); err != nil {
				return api.Task{}, errs.Prefix(fmt.Sprintf("alternatives[%d].resources", i), err)
			}
		}
		t.Alternatives = append(t.Alternatives, alt)
	}
	if err := t.Validate(); err != nil {
		return api.Task{}, err
	}
	return t, nil
}

// maxBatchTasks bounds the tasks of one request.
const maxBatchTasks = 100_000

// decodeTasks reads a task or {"tasks":[...]} and reports which it was.
func decodeTasks(b []byte) (tasks []api.Task, batch bool, err error) {
	trimmed := bytes.TrimSpace(b)
	if len(trimmed) == 0 {
		return nil, false, errs.Invalid("", "empty body: send a task or {\"tasks\": [...]}")
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &probe); err != nil {
		return nil, false, jsonError(err)
	}
	raw, isBatch := probe["tasks"]
	if !isBatch {
		t, err := decodeTask(trimmed)
		if err != nil {
			return nil, false, err
		}
		return []api.Task{t}, false, nil
	}
	if len(probe) != 1 {
		return nil, true, errs.Invalid("", "a batch body holds only \"tasks\"")
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, true, errs.Invalid("tasks", "must be a list of tasks")
	}
	if len(items) == 0 || len(items) > maxBatchTasks {
		return nil, true, errs.Invalid("tasks", "must hold 1 to %d tasks, got %d", maxBatchTasks, len(items))
	}
	tasks = make([]api.Task, len(items))
	for i, it := range items {
		t, err := decodeTask(it)
		if err != nil {
			return nil, true, errs.Prefix(fmt.Sprintf("tasks[%d]", i), err)
		}
		tasks[i] = t
	}
	return tasks, true, nil
}

// jobWire mirrors api.Job with raw tasks, decoded one by one for full
// field paths ("tasks[2].resources.cpu").
type jobWire struct {
	api.Job
	Tasks []json.RawMessage `json:"tasks"`
}

// decodeJob decodes and validates a job.
func decodeJob(b []byte) (api.Job, error) {
	var w jobWire
	if err := decodeStrict(b, &w); err != nil {
		return api.Job{}, err
	}
	j := w.Job
	if len(w.Tasks) > api.MaxJobTasks {
		return api.Job{}, errs.Invalid("tasks", "at most %d tasks", api.MaxJobTasks)
	}
	j.Tasks = make([]api.Task, len(w.Tasks))
	for i, raw := range w.Tasks {
		t, err := decodeTask(raw)
		if err != nil {
			return api.Job{}, errs.Prefix(fmt.Sprintf("tasks[%d]", i), err)
		}
		j.Tasks[i] = t
	}
	if err := j.Validate(); err != nil {
		return api.Job{}, err
	}
	return j, nil
}
