package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/jsonread"
)

// MaxBodyBytes bounds a request body; larger bodies get 413.
const MaxBodyBytes = 64 << 20

// readBody reads a bounded request body. A body of known length is read
// into a slice of exactly that size (the common case: a schedule body is
// about 80 bytes; a bytes.Buffer took 600).
//
// A YAML body (Content-Type application/yaml, as the CLI may send a job
// file) is converted to JSON here, so every decoder reads JSON.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength != 0 {
		// A body has bodyDeadline to arrive: a client that trickles it
		// holds a goroutine and a buffer, so it is cut off early (408),
		// not at the connection's ReadTimeout.
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyDeadline(r.ContentLength)))
	}
	b, err := readRawBody(r)
	if err != nil && errs.CodeOf(err) == errs.RequestTimeout {
		w.Header().Set("Connection", "close")
	}
	if err != nil || len(b) == 0 || !yamlBody(r) {
		return b, err
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, errs.Invalid("", "the YAML body does not parse: %v", err)
	}
	return j, nil
}

// yamlBody reports whether r's Content-Type says YAML.
func yamlBody(r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if ct == "" || ct == "application/json" {
		return false
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && isYAMLType(mt)
}

// readRawBody reads the body as sent.
func readRawBody(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= smallBody {
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, bodyError(err, n)
		}
		var one [1]byte
		if m, err := r.Body.Read(one[:]); m > 0 || err != nil && err != io.EOF {
			return nil, errs.Invalid("", "reading the body: more than its Content-Length")
		}
		return b, nil
	}
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= MaxBodyBytes {
		buf.Grow(int(n) + bytes.MinRead) // ReadFrom keeps MinRead free to see EOF
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	b := buf.Bytes()
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, errs.New(errs.TooLarge, "", "request body larger than %d bytes", MaxBodyBytes)
		}
		return nil, bodyError(err, r.ContentLength)
	}
	return b, nil
}

// Body deadlines: bodyBase for any body, plus the time the declared length
// takes at bodyMinRate, at most bodyMax (an unknown length gets bodyMax).
const (
	bodyBase    = 5 * time.Second
	bodyMinRate = 1 << 20 // bytes per second
	bodyMax     = 2 * time.Minute
)

// bodyDeadline is how long a body of declared length n (-1: unknown) may
// take to arrive.
func bodyDeadline(n int64) time.Duration {
	if n < 0 || n > MaxBodyBytes {
		return bodyMax
	}
	return min(bodyBase+time.Duration(n)*time.Second/bodyMinRate, bodyMax)
}

// bodyError says why a body could not be read, naming no addresses (the
// net package's errors carry both ends' host:port).
func bodyError(err error, declared int64) error {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		size := "of unknown length"
		if declared >= 0 {
			size = strconv.FormatInt(declared, 10) + " bytes"
		}
		return errs.New(errs.RequestTimeout, "", "the request body (%s) did not arrive within %s", size, bodyDeadline(declared).Round(100*time.Millisecond))
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errs.Invalid("", "the request body ended before its Content-Length")
	}
	return errs.Invalid("", "the request body could not be read (the connection failed)")
}

// smallBody is the largest body of known length that readBody reads in
// one piece.
const smallBody = 64 << 10

// decodeStrict decodes JSON into v: unknown fields and trailing data are
// errors naming the field where possible.
func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		err = jsonError(err)
		if e, ok := err.(*errs.Error); ok && e.Message == "unknown field" {
			return api.UnknownField(e.Field, e.Field, api.JSONFields(v))
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errs.Invalid("", "unexpected data after the JSON value")
	}
	// encoding/json keeps the last of a member given twice; refuse it.
	return api.CheckDuplicates(b, v)
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

// decodeTask decodes and validates one task object (the whole body).
func decodeTask(raw []byte) (api.Task, error) {
	r := jsonread.New(raw)
	t, err := api.ReadTask(r)
	if err != nil {
		return api.Task{}, err
	}
	if err := r.Finish(); err != nil {
		return api.Task{}, errs.Invalid("", "%v", err)
	}
	return t, nil
}

// maxBatchTasks bounds the tasks of one request.
const maxBatchTasks = 100_000

// decodeTasks reads a task or {"tasks":[...]} and reports which it was.
// A body whose first member is "tasks" is a batch and holds nothing else.
func decodeTasks(b []byte) (tasks []api.Task, batch bool, err error) {
	r := jsonread.New(b)
	switch r.Peek() {
	case jsonread.End:
		return nil, false, errs.Invalid("", "empty body: send a task or {\"tasks\": [...]}")
	case jsonread.Object:
	default:
		return nil, false, errs.Invalid("", "the body must be a task object or {\"tasks\": [...]}, got %s", r.Peek())
	}
	obj, _ := r.ReadObject()
	if !obj.Next() || obj.Key() != "tasks" {
		// Not a batch: decode the body again from its start as one task.
		t, err := decodeTask(b)
		if err != nil {
			if e, ok := err.(*errs.Error); ok && e.Field == "tasks" {
				return nil, true, errs.Invalid("", "a batch body holds only \"tasks\"")
			}
			return nil, false, err
		}
		return []api.Task{t}, false, nil
	}
	if r.Peek() != jsonread.Array {
		return nil, true, errs.Invalid("tasks", "must be a list of tasks")
	}
	arr, _ := r.ReadArray()
	tasks = make([]api.Task, 0, min(len(b)/64+1, maxBatchTasks))
	for arr.Next() {
		if len(tasks) >= maxBatchTasks {
			return nil, true, errs.Invalid("tasks", "must hold 1 to %d tasks", maxBatchTasks)
		}
		t, err := api.ReadTask(r)
		if err != nil {
			return nil, true, errs.Prefix("tasks["+strconv.Itoa(arr.Index())+"]", err)
		}
		tasks = append(tasks, t)
	}
	if err := arr.Err(); err != nil {
		return nil, true, errs.Invalid("tasks", "%v", err)
	}
	if len(tasks) == 0 {
		return nil, true, errs.Invalid("tasks", "must hold 1 to %d tasks, got 0", maxBatchTasks)
	}
	if obj.Next() {
		return nil, true, errs.Invalid("", "a batch body holds only \"tasks\"")
	}
	if err := obj.Err(); err != nil {
		return nil, true, errs.Invalid("", "%v", err)
	}
	if err := r.Finish(); err != nil {
		return nil, true, errs.Invalid("", "%v", err)
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
		// Decoded without validation: a sharded task is valid only once
		// expanded; Validate checks every task after Expand.
		r := jsonread.New(raw)
		t, err := api.DecodeTask(r)
		if err == nil {
			if ferr := r.Finish(); ferr != nil {
				err = errs.Invalid("", "%v", ferr)
			}
		}
		if err != nil {
			return api.Job{}, errs.Prefix(fmt.Sprintf("tasks[%d]", i), err)
		}
		j.Tasks[i] = t
	}
	if err := j.Expand(); err != nil {
		return api.Job{}, err
	}
	if err := j.Validate(); err != nil {
		return api.Job{}, err
	}
	return j, nil
}

// queryGet is r.URL.Query().Get(key) without building the url.Values map:
// the first value of key in the raw query, unescaped; pairs that
// url.ParseQuery would reject are skipped, as Query does.
func queryGet(raw, key string) string {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" || strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			var err error
			if k, err = url.QueryUnescape(k); err != nil {
				continue
			}
		}
		if k != key {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			var err error
			if v, err = url.QueryUnescape(v); err != nil {
				continue
			}
		}
		return v
	}
	return ""
}
