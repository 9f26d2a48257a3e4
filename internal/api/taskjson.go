package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/jsonread"
	"github.com/hetsched/hetsched/internal/resource"
)

// ReadTask decodes one task object from r and validates it. It is the
// request decoder for tasks (single, batch and inside jobs); it accepts
// what encoding/json with DisallowUnknownFields accepts into Task, except
// that it is stricter where that is laxer:
//   - member names match exactly ("ID" is not "id");
//   - a member given twice is an error, not "last one wins";
//   - strings must be valid UTF-8 rather than having bad bytes replaced.
//
// Errors are *errs.Error whose Field is the path inside the task
// ("resources.cpu", "alternatives[1].speed", "env.PATH").
func ReadTask(r *jsonread.Reader) (Task, error) {
	t, err := DecodeTask(r)
	if err != nil {
		return t, err
	}
	if err := t.Validate(); err != nil {
		return t, err
	}
	return t, nil
}

// DecodeTask is ReadTask without Validate, for tasks that were validated
// when they were accepted (the store's records): a later, stricter rule
// must not stop a restart.
func DecodeTask(r *jsonread.Reader) (Task, error) {
	var t Task
	_, err := readInto(r, "", "an object", &taskMembers, &t, readTaskMember)
	return t, err
}

// taskMembers are the members of a task object.
var taskMembers = newMembers("id", "name", "queue", "priority", "resources", "alternatives", "nodeSelector", "nodeAffinity",
	"tolerations", "command", "env", "duration", "timeout", "queueTimeout", "lease", "depends",
	"preemptible", "metadata", "requeue", "locality", "localityWait", "shards", "inputs", "deviceClasses", "checkpoint",
	"hostPorts", "affinity", "antiAffinity", "spread", "preferredNodeAffinity", "preemptionPolicy", "priorityValue",
	"service", "liveness", "readiness", "startup", "user")

// readTaskMember reads member k of a task (its path is k).
func readTaskMember(r *jsonread.Reader, t *Task, k, _ string) error {
	var err error
	switch k {
	case "id":
		t.ID, err = readString(r, k)
	case "name":
		t.Name, err = readString(r, k)
	case "queue":
		t.Queue, err = readString(r, k)
	case "user":
		t.User, err = readString(r, k)
	case "priority":
		t.Priority, err = readIntPtr(r, k)
	case "resources":
		t.Resources, err = readResources(r, k)
	case "alternatives":
		t.Alternatives, err = readAlternatives(r, k)
	case "nodeSelector":
		t.NodeSelector, err = readStringMap(r, k)
	case "deviceClasses":
		t.DeviceClasses, err = readStringMap(r, k)
	case "nodeAffinity":
		t.NodeAffinity, err = readStrings(r, k)
	case "tolerations":
		t.Tolerations, err = readStrings(r, k)
	case "command":
		t.Command, err = readStrings(r, k)
	case "env":
		t.Env, err = readStringMap(r, k)
	case "duration":
		t.Duration, err = readDuration(r, k)
	case "timeout":
		t.Timeout, err = readDuration(r, k)
	case "queueTimeout":
		t.QueueTimeout, err = readDuration(r, k)
	case "lease":
		given := r.Peek() != jsonread.Null
		if t.Lease, err = readDuration(r, k); err == nil && t.Lease == 0 && given {
			err = errs.Invalid(k, "a lease of 0 expires at once: give a duration, \"never\" for none, or omit it for the server's default")
		}
	case "depends":
		t.Depends, err = readStrings(r, k)
	case "preemptible":
		t.Preemptible, err = readBoolPtr(r, k)
	case "metadata":
		t.Metadata, err = readStringMap(r, k)
	case "requeue":
		t.Requeue, err = readBoolPtr(r, k)
	case "locality":
		t.Locality, err = readLocality(r, k)
	case "localityWait":
		t.LocalityWait, err = readDuration(r, k)
	case "shards":
		var n *int
		if n, err = readIntPtr(r, k); n != nil {
			if *n == 0 {
				return errs.Invalid(k, "shards of 0 would fan the task out into nothing: give 1 to %d, or omit it", MaxShards)
			}
			t.Shards = *n
		}
	case "inputs":
		t.Inputs, err = readInputs(r, k)
	case "checkpoint":
		t.Checkpoint, err = readCheckpoint(r, k)
	case "hostPorts":
		err = readStrict(r, k, &t.HostPorts)
	case "affinity":
		err = readStrict(r, k, &t.Affinity)
	case "antiAffinity":
		err = readStrict(r, k, &t.AntiAffinity)
	case "spread":
		err = readStrict(r, k, &t.Spread)
	case "preferredNodeAffinity":
		err = readStrict(r, k, &t.PreferredNodeAffinity)
	case "preemptionPolicy":
		t.PreemptionPolicy, err = readString(r, k)
	case "service":
		t.Service, err = readString(r, k)
	case "liveness":
		err = readStrict(r, k, &t.Liveness)
	case "readiness":
		err = readStrict(r, k, &t.Readiness)
	case "startup":
		err = readStrict(r, k, &t.Startup)
	case "priorityValue":
		var v *int
		if v, err = readIntPtr(r, k); v != nil {
			if int(int32(*v)) != *v {
				return errs.Invalid(k, "must be a 32-bit integer, got %d", *v)
			}
			t.PriorityValue = int32(*v)
		}
	}
	return err
}

// readStrict decodes the next value into *into with encoding/json,
// unknown members refused: the placement constraints, rare and nested,
// are not worth a hand-written reader. An error names field. A member
// given twice is refused (CheckDuplicates), as everywhere; member names
// match as encoding/json matches them (in another case too).
func readStrict[T any](r *jsonread.Reader, field string, into *T) error {
	raw, err := r.ReadRaw()
	if err != nil {
		return syntax(field, err)
	}
	if err := CheckDuplicates(raw, into); err != nil {
		return errs.Prefix(field, err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return errs.Invalid(field+"."+te.Field, "must be %s, got %s", te.Type, te.Value)
		}
		return errs.Invalid(field, "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// openObject starts reading the object member field: nil and no error
// for a null (absent), an error naming want for another type.
func openObject(r *jsonread.Reader, field, want string) (*jsonread.ObjectIter, error) {
	if null(r) {
		return nil, nil
	}
	if r.Peek() != jsonread.Object {
		return nil, wrongType(r, field, want)
	}
	obj, err := r.ReadObject()
	if err != nil {
		return nil, syntax(field, err)
	}
	return obj, nil
}

// openArray starts reading the list member field, as openObject does an
// object.
func openArray(r *jsonread.Reader, field, want string) (*jsonread.ArrayIter, error) {
	if null(r) {
		return nil, nil
	}
	if r.Peek() != jsonread.Array {
		return nil, wrongType(r, field, want)
	}
	arr, err := r.ReadArray()
	if err != nil {
		return nil, syntax(field, err)
	}
	return arr, nil
}

// checkpointMembers are the members of a checkpoint object.
var checkpointMembers = newMembers("signal", "grace", "dir")

// readCheckpoint reads {"signal": ..., "grace": ..., "dir": ...}.
func readCheckpoint(r *jsonread.Reader, field string) (*Checkpoint, error) {
	return readNew(r, field, &checkpointMembers, readCheckpointMember)
}

func readCheckpointMember(r *jsonread.Reader, c *Checkpoint, k, f string) (err error) {
	switch k {
	case "signal":
		c.Signal, err = readString(r, f)
	case "grace":
		c.Grace, err = readDuration(r, f)
	case "dir":
		c.Dir, err = readString(r, f)
	}
	return err
}

// syntax wraps a reader error as an invalid argument on field.
func syntax(field string, err error) error {
	return errs.Invalid(field, "%v", err)
}

func wrongType(r *jsonread.Reader, field, want string) error {
	return errs.Invalid(field, "must be %s, got %s", want, r.Peek())
}

// null consumes a null if one is next; a null member means "absent", as
// with encoding/json.
func null(r *jsonread.Reader) bool {
	if r.Peek() == jsonread.Null {
		return r.ReadNull() == nil
	}
	return false
}

func readString(r *jsonread.Reader, field string) (string, error) {
	if null(r) {
		return "", nil
	}
	if r.Peek() != jsonread.String {
		return "", wrongType(r, field, "a string")
	}
	s, err := r.ReadString()
	if err != nil {
		return "", syntax(field, err)
	}
	return s, nil
}

func readIntPtr(r *jsonread.Reader, field string) (*int, error) {
	if null(r) {
		return nil, nil
	}
	if r.Peek() != jsonread.Number {
		return nil, wrongType(r, field, "an integer")
	}
	s, err := r.ReadNumber()
	if err != nil {
		return nil, syntax(field, err)
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return nil, errs.Invalid(field, "must be an integer, got %s", truncate(s))
	}
	return &v, nil
}

func readBoolPtr(r *jsonread.Reader, field string) (*bool, error) {
	if null(r) {
		return nil, nil
	}
	if r.Peek() != jsonread.Bool {
		return nil, wrongType(r, field, "true or false")
	}
	v, err := r.ReadBool()
	if err != nil {
		return nil, syntax(field, err)
	}
	return &v, nil
}

func readDuration(r *jsonread.Reader, field string) (Duration, error) {
	var text string
	var err error
	quoted := r.Peek() == jsonread.String
	switch r.Peek() {
	case jsonread.Null:
		_ = r.ReadNull()
		return 0, nil
	case jsonread.String:
		text, err = r.ReadString()
	case jsonread.Number:
		text, err = r.ReadNumber()
	default:
		return 0, wrongType(r, field, "a duration string like \"30s\"")
	}
	if err != nil {
		return 0, syntax(field, err)
	}
	d, err := ParseDuration(text, quoted)
	if err != nil {
		return 0, errs.Invalid(field, "%v", err)
	}
	return d, nil
}

// readStrings reads a list of strings; a null element is "".
func readStrings(r *jsonread.Reader, field string) ([]string, error) {
	return readList(r, field, "a list of strings", "items", MaxCommandArgs, readString)
}

// readStringMap reads an object of strings; a null value is "".
func readStringMap(r *jsonread.Reader, field string) (map[string]string, error) {
	obj, err := openObject(r, field, "an object of strings")
	if obj == nil {
		return nil, err
	}
	out := map[string]string{}
	for obj.Next() {
		k := obj.Key()
		if len(out) >= MaxEnv {
			return nil, errs.Invalid(field, "at most %d entries", MaxEnv)
		}
		if _, dup := out[k]; dup {
			return nil, errs.Invalid(field+"."+truncate(k), "given twice")
		}
		s, err := readString(r, field+"."+truncate(k))
		if err != nil {
			return nil, err
		}
		out[k] = s
	}
	if err := obj.Err(); err != nil {
		return nil, syntax(field, err)
	}
	return out, nil
}

// readResources reads {"cpu": "500m", "nvidia.com/gpu": 2}.
func readResources(r *jsonread.Reader, field string) (resource.List, error) {
	if null(r) {
		return nil, nil
	}
	if r.Peek() != jsonread.Object {
		return nil, errs.Invalid(field, "resources must be an object of name to quantity, got %s", r.Peek())
	}
	obj, err := r.ReadObject()
	if err != nil {
		return nil, syntax(field, err)
	}
	var buf [4]resource.Entry
	es := buf[:0]
	for obj.Next() {
		k := obj.Key()
		f := field + "." + truncate(k)
		if len(es) >= resource.MaxDims {
			return nil, errs.Invalid(field, "at most %d resources may be named", resource.MaxDims)
		}
		for _, e := range es {
			if e.Name == k {
				return nil, errs.Invalid(f, "given twice")
			}
		}
		var text string
		switch r.Peek() {
		case jsonread.String:
			text, err = r.ReadString()
		case jsonread.Number:
			text, err = r.ReadNumber()
		default:
			return nil, errs.Invalid(f, "quantity must be a number or a string like \"500m\" or \"16Gi\", got %s", r.Peek())
		}
		if err != nil {
			return nil, syntax(f, err)
		}
		es = append(es, resource.Entry{Name: k, Text: text})
	}
	if err := obj.Err(); err != nil {
		return nil, syntax(field, err)
	}
	l, err := resource.ParseEntries(es)
	if err != nil {
		return nil, errs.Prefix(field, err)
	}
	return l, nil
}

// alternativeMembers are the members of an alternative.
var alternativeMembers = newMembers("resources", "speed", "deviceClasses")

func readAlternatives(r *jsonread.Reader, field string) ([]Alternative, error) {
	return readList(r, field, "a list of alternatives", "alternatives", MaxAlternatives, readAlternative)
}

func readAlternative(r *jsonread.Reader, f string) (Alternative, error) {
	return readValue(r, f, &alternativeMembers, readAlternativeMember)
}

func readAlternativeMember(r *jsonread.Reader, a *Alternative, k, f string) (err error) {
	switch k {
	case "resources":
		a.Resources, err = readResources(r, f)
	case "speed":
		a.Speed, err = readFloat(r, f)
	case "deviceClasses":
		a.DeviceClasses, err = readStringMap(r, f)
	}
	return err
}

func readFloat(r *jsonread.Reader, field string) (float64, error) {
	if null(r) {
		return 0, nil
	}
	if r.Peek() != jsonread.Number {
		return 0, wrongType(r, field, "a number")
	}
	s, err := r.ReadNumber()
	if err != nil {
		return 0, syntax(field, err)
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errs.Invalid(field, "must be a number, got %s", truncate(s))
	}
	return v, nil
}

// localityMembers are the members of a locality.
var localityMembers = newMembers("nodes", "labels")

// readLocality reads {"nodes": [...], "labels": {...}}.
func readLocality(r *jsonread.Reader, field string) (*Locality, error) {
	return readNew(r, field, &localityMembers, readLocalityMember)
}

func readLocalityMember(r *jsonread.Reader, l *Locality, k, f string) (err error) {
	switch k {
	case "nodes":
		l.Nodes, err = readStrings(r, f)
	case "labels":
		l.Labels, err = readStringMap(r, f)
	}
	return err
}

// inputMembers are the members of an input.
var inputMembers = newMembers("name", "locality")

// readInputs reads [{"name": ..., "locality": {...}}, ...].
func readInputs(r *jsonread.Reader, field string) ([]Input, error) {
	return readList(r, field, "a list of inputs", "inputs", MaxShards, readInput)
}

func readInput(r *jsonread.Reader, f string) (Input, error) {
	return readValue(r, f, &inputMembers, readInputMember)
}

func readInputMember(r *jsonread.Reader, in *Input, k, f string) (err error) {
	switch k {
	case "name":
		in.Name, err = readString(r, f)
	case "locality":
		in.Locality, err = readLocality(r, f)
	}
	return err
}
