package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/jsonread"
)

// These tests read Task's fields from its json tags, so a field added to
// Task (or to Alternative, Locality, Input) that the generator, the
// hand-written decoder (DecodeTask, ReadTask) or the hand-written encoder
// (AppendJSON) does not know fails one of them by name.

// jsonPaths lists the json members of struct t and, for members holding
// structs (through pointers and slices), theirs: "locality.nodes",
// "inputs[].locality.labels".
func jsonPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		p := prefix + name
		out = append(out, p)
		ft, list := f.Type, ""
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice {
			if ft.Kind() == reflect.Slice {
				list = "[]"
			}
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct {
			out = append(out, jsonPaths(ft, p+list+".")...)
		}
	}
	return out
}

// isSet reports whether v is a value encoding/json writes under omitempty.
func isSet(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() > 0
	case reflect.Pointer:
		return !v.IsNil()
	}
	return !v.IsZero()
}

// setPaths adds to out the json paths (as jsonPaths names them) that are
// set in struct value v.
func setPaths(v reflect.Value, prefix string, out map[string]bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fv := v.Field(i)
		if !isSet(fv) {
			continue
		}
		p := prefix + name
		out[p] = true
		switch {
		case fv.Kind() == reflect.Pointer && fv.Elem().Kind() == reflect.Struct:
			setPaths(fv.Elem(), p+".", out)
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.Struct:
			for j := 0; j < fv.Len(); j++ {
				setPaths(fv.Index(j), p+"[].", out)
			}
		}
	}
}

// fill sets every unset field of dst (a struct) to src's, and fills the
// structs inside dst's set fields from src's (first elements of lists).
func fill(dst, src reflect.Value) {
	for i := 0; i < dst.NumField(); i++ {
		d, s := dst.Field(i), src.Field(i)
		if !d.CanSet() || !isSet(s) {
			continue
		}
		switch {
		case !isSet(d):
			d.Set(s)
		case d.Kind() == reflect.Pointer && d.Elem().Kind() == reflect.Struct:
			fill(d.Elem(), s.Elem())
		case d.Kind() == reflect.Slice && d.Type().Elem().Kind() == reflect.Struct:
			fill(d.Index(0), s.Index(0))
		}
	}
}

// fullGenerated merges tasks drawn from genTask, those keep accepts, until
// every path of want is set, and fails naming the paths it never reached.
func fullGenerated(t *testing.T, want []string, keep func(*Task) bool) Task {
	t.Helper()
	var full Task
	var missing []string
	for seed := 0; seed < 20000; seed++ {
		ex := genTask().Example(seed)
		if keep != nil && !keep(&ex) {
			continue
		}
		fill(reflect.ValueOf(&full).Elem(), reflect.ValueOf(&ex).Elem())
		got := map[string]bool{}
		setPaths(reflect.ValueOf(full), "", got)
		if missing = slices.DeleteFunc(slices.Clone(want), func(p string) bool { return got[p] }); len(missing) == 0 {
			return full
		}
	}
	t.Fatalf("genTask never sets %v: add them to the generator", missing)
	return full
}

// hasJSONPath reports whether the decoded JSON value v has the member at
// path (a jsonPaths path: "[]" is any element of a list).
func hasJSONPath(v any, path string) bool {
	name, rest, _ := strings.Cut(path, ".")
	list := strings.HasSuffix(name, "[]")
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	m, ok := obj[strings.TrimSuffix(name, "[]")]
	if !ok {
		return false
	}
	if rest == "" {
		return true
	}
	if !list {
		return hasJSONPath(m, rest)
	}
	arr, _ := m.([]any)
	for _, e := range arr {
		if hasJSONPath(e, rest) {
			return true
		}
	}
	return false
}

func missingJSONPaths(t *testing.T, b []byte, paths []string) []string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	var out []string
	for _, p := range paths {
		if !hasJSONPath(v, p) {
			out = append(out, p)
		}
	}
	return out
}

var taskPaths = jsonPaths(reflect.TypeFor[Task](), "")

// TestJSONPathsSeeNestedFields: the table the tests below are built on
// holds Task's nested structs' fields, not only its own.
func TestJSONPathsSeeNestedFields(t *testing.T) {
	for _, p := range []string{"id", "alternatives[].speed", "locality.labels", "inputs[].locality.nodes", "metadata"} {
		if !slices.Contains(taskPaths, p) {
			t.Errorf("jsonPaths(Task) lacks %s: %v", p, taskPaths)
		}
	}
}

// TestGenTaskSetsEveryField: the property generator reaches every json
// field of Task and of the structs inside it.
func TestGenTaskSetsEveryField(t *testing.T) {
	fullGenerated(t, taskPaths, nil)
}

// TestDecodeTaskKnowsEveryField: a task with every field set (values from
// the generator) encodes with every member, and DecodeTask (and ReadTask,
// where the task is valid) decodes it to what encoding/json decodes.
func TestDecodeTaskKnowsEveryField(t *testing.T) {
	full := fullGenerated(t, taskPaths, nil)
	b, err := json.Marshal(&full)
	if err != nil {
		t.Fatal(err)
	}
	if missing := missingJSONPaths(t, b, taskPaths); len(missing) > 0 {
		t.Fatalf("the full task's JSON lacks %v:\n%s", missing, b)
	}
	var want Task
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&want); err != nil {
		t.Fatalf("encoding/json: %v\n%s", err, b)
	}
	r := jsonread.New(b)
	got, err := DecodeTask(r)
	if err == nil {
		err = r.Finish()
	}
	if err != nil {
		t.Fatalf("DecodeTask: %v\n%s", err, b)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("DecodeTask differs from encoding/json (-encoding/json +DecodeTask):\n%s\n%s", d, b)
	}
	// taskFields (the decoder's member table, which also feeds the
	// unknown-field suggestions) holds exactly Task's members.
	var names []string
	for _, p := range taskPaths {
		if !strings.ContainsAny(p, ".[") {
			names = append(names, p)
		}
	}
	table := slices.Clone(taskMembers.names)
	sort.Strings(names)
	sort.Strings(table)
	if !slices.Equal(names, table) {
		t.Errorf("taskMembers %v, Task's json members %v", table, names)
	}
}

// appendFallback are the members for which AppendJSON hands the task to
// encoding/json rather than writing it by hand.
var appendFallback = []string{"alternatives", "locality", "inputs", "service", "liveness", "readiness", "startup"}

// TestAppendJSONKnowsEveryField: AppendJSON writes every member of a task
// with every field set, by hand for every member but appendFallback, and
// writes what json.Marshal writes.
func TestAppendJSONKnowsEveryField(t *testing.T) {
	// The hand-written path: tasks it takes (plain strings, no fallback
	// member), merged until every other member is set.
	var handPaths []string
	for _, p := range taskPaths {
		if top, _, _ := strings.Cut(strings.Split(p, ".")[0], "["); !slices.Contains(appendFallback, top) {
			handPaths = append(handPaths, p)
		}
	}
	hand := fullGenerated(t, handPaths, func(task *Task) bool {
		_, ok := task.appendFast(nil)
		return ok
	})
	got, ok := hand.appendFast(nil)
	if !ok {
		t.Fatalf("appendFast refused a merge of tasks it took: %+v", hand)
	}
	if missing := missingJSONPaths(t, got, handPaths); len(missing) > 0 {
		t.Fatalf("AppendJSON's hand-written path leaves out %v:\n%s", missing, got)
	}
	want, _ := json.Marshal(&hand)
	if !bytes.Equal(got, want) {
		t.Fatalf("appendFast\n got %s\nwant %s", got, want)
	}
	// Each fallback member does send the task to encoding/json.
	full := fullGenerated(t, taskPaths, nil)
	for _, m := range appendFallback {
		one, i := hand, fieldIndex(t, m)
		reflect.ValueOf(&one).Elem().FieldByIndex(i).Set(reflect.ValueOf(full).FieldByIndex(i))
		if _, ok := one.appendFast(nil); ok {
			t.Errorf("appendFast wrote a task with %s by hand: it is not in appendFallback's list of what it leaves to encoding/json", m)
		}
	}
	// And the whole task, fallback members included.
	got, err := full.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if missing := missingJSONPaths(t, got, taskPaths); len(missing) > 0 {
		t.Fatalf("AppendJSON leaves out %v:\n%s", missing, got)
	}
}

// fieldIndex is the index of Task's field with json name m.
func fieldIndex(t *testing.T, m string) []int {
	tt := reflect.TypeFor[Task]()
	for i := 0; i < tt.NumField(); i++ {
		if name, _, _ := strings.Cut(tt.Field(i).Tag.Get("json"), ","); name == m {
			return []int{i}
		}
	}
	t.Fatalf("Task has no member %s", m)
	return nil
}
