package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/jsonread"
	"github.com/hetsched/hetsched/internal/resource"
)

// A member given twice is refused (encoding/json would keep the last one
// silently), naming the member: for every member of every object of a
// task, node, queue and job that has every field set.

// dupVariant is a document with one member given twice.
type dupVariant struct {
	body  []byte
	field string // the member's path, as the error names it
}

// dupVariants returns, for every member of every object in the JSON value
// raw, a copy of raw with that member repeated (same value) at the end of
// its object.
func dupVariants(t *testing.T, raw json.RawMessage, path string) []dupVariant {
	t.Helper()
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) > 0 && raw[0] == '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		// object writes the object back, member replace's value swapped for
		// with (when with is set: "" is a key like any other), and member
		// again written a second time at the end.
		object := func(replace string, with json.RawMessage, again string, twice bool) []byte {
			var b bytes.Buffer
			b.WriteByte('{')
			member := func(k string, v json.RawMessage) {
				if b.Len() > 1 {
					b.WriteByte(',')
				}
				b.Write(AppendJSONString(nil, k))
				b.WriteByte(':')
				b.Write(v)
			}
			for _, k := range keys {
				if with != nil && k == replace {
					member(k, with)
				} else {
					member(k, m[k])
				}
			}
			if twice {
				member(again, m[again])
			}
			b.WriteByte('}')
			return b.Bytes()
		}
		var out []dupVariant
		for _, k := range keys {
			p := joinPath(path, truncate(k))
			out = append(out, dupVariant{object("", nil, k, true), p})
			for _, sub := range dupVariants(t, m[k], p) {
				out = append(out, dupVariant{object(k, sub.body, "", false), sub.field})
			}
		}
		return out
	case len(raw) > 0 && raw[0] == '[':
		var a []json.RawMessage
		if err := json.Unmarshal(raw, &a); err != nil {
			t.Fatal(err)
		}
		var out []dupVariant
		for i := range a {
			for _, sub := range dupVariants(t, a[i], path+"["+strconv.Itoa(i)+"]") {
				c := append([]json.RawMessage(nil), a...)
				c[i] = sub.body
				b, _ := json.Marshal(c)
				out = append(out, dupVariant{b, sub.field})
			}
		}
		return out
	}
	return nil
}

// wantGivenTwice fails unless err refuses a member given twice at field.
func wantGivenTwice(t *testing.T, who string, v dupVariant, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s accepted %s given twice:\n%s", who, v.field, v.body)
		return
	}
	if errs.CodeOf(err) != errs.InvalidArgument || errs.FieldOf(err) != v.field || !strings.Contains(err.Error(), "given twice") {
		t.Errorf("%s on %s given twice: %v, want invalid_argument on %q saying \"given twice\"\n%s", who, v.field, err, v.field, v.body)
	}
}

// checkVariants checks that the document has members at every json path
// of its type (so a new field is covered), that it decodes, and that each
// of its duplicate variants is refused by decode.
func checkVariants(t *testing.T, typ reflect.Type, b []byte, decode map[string]func([]byte) error) int {
	t.Helper()
	if missing := missingJSONPaths(t, b, jsonPaths(typ, "")); len(missing) > 0 {
		t.Fatalf("the sample %s lacks %v (set them in the test):\n%s", typ, missing, b)
	}
	for who, dec := range decode {
		if err := dec(b); err != nil {
			t.Fatalf("%s refused the sample itself: %v\n%s", who, err, b)
		}
	}
	vs := dupVariants(t, b, "")
	for _, v := range vs {
		for who, dec := range decode {
			wantGivenTwice(t, who, v, dec(v.body))
		}
	}
	return len(vs)
}

func TestTaskMemberGivenTwice(t *testing.T) {
	full := fullGenerated(t, taskPaths, nil)
	b, err := json.Marshal(&full)
	if err != nil {
		t.Fatal(err)
	}
	whole := func(read func(*jsonread.Reader) (Task, error)) func([]byte) error {
		return func(b []byte) error {
			r := jsonread.New(b)
			if _, err := read(r); err != nil {
				return err
			}
			return r.Finish()
		}
	}
	n := checkVariants(t, reflect.TypeFor[Task](), b, map[string]func([]byte) error{
		"DecodeTask": whole(DecodeTask),
		"CheckDuplicates": func(b []byte) error {
			return CheckDuplicates(b, &Task{})
		},
	})
	// ReadTask (DecodeTask and Validate) refuses the generated task for
	// what Validate finds; a repeated member must still be what it names.
	for _, v := range dupVariants(t, b, "") {
		_, err := ReadTask(jsonread.New(v.body))
		wantGivenTwice(t, "ReadTask", v, err)
	}
	if n < len(taskPaths) {
		t.Errorf("only %d variants for %d paths", n, len(taskPaths))
	}
	// The plain cases, spelled out.
	for _, c := range []struct{ body, field string }{
		{`{"id":"a","id":"a"}`, "id"},
		{`{"id":"a","name":"n","id":"b"}`, "id"},
		{`{"resources":{"cpu":1,"cpu":1}}`, "resources.cpu"},
		{`{"env":{"A":"1","A":"2"}}`, "env.A"},
		{`{"alternatives":[{"speed":1},{"speed":1,"speed":2}]}`, "alternatives[1].speed"},
		{`{"inputs":[{"name":"x","locality":{"nodes":["a"],"nodes":["b"]}}]}`, "inputs[0].locality.nodes"},
	} {
		_, err := ReadTask(jsonread.New([]byte(c.body)))
		wantGivenTwice(t, "ReadTask", dupVariant{[]byte(c.body), c.field}, err)
	}
}

func fullNode() *Node {
	n := goodNode()
	n.Devices[0].Unhealthy, n.Devices[0].Simulated = true, true
	return n
}

func TestNodeMemberGivenTwice(t *testing.T) {
	b, err := json.Marshal(fullNode())
	if err != nil {
		t.Fatal(err)
	}
	checkVariants(t, reflect.TypeFor[Node](), b, map[string]func([]byte) error{
		"Node.UnmarshalJSON": func(b []byte) error { var n Node; return json.Unmarshal(b, &n) },
		"[]Node": func(b []byte) error {
			var ns []Node
			return json.Unmarshal(append(append([]byte("["), b...), ']'), &ns)
		},
	})
	// A struct member matches in any case, as encoding/json matches it; a
	// map's keys are distinct when they differ in case.
	var n Node
	err = json.Unmarshal([]byte(`{"name":"a","Name":"b"}`), &n)
	wantGivenTwice(t, "Node.UnmarshalJSON", dupVariant{[]byte(`{"name":"a","Name":"b"}`), "name"}, err)
	if err := json.Unmarshal([]byte(`{"name":"a","labels":{"k":"1","K":"2"}}`), &n); err != nil || len(n.Labels) != 2 {
		t.Errorf("labels k and K: %v %v", n.Labels, err)
	}
}

func TestQueueMemberGivenTwice(t *testing.T) {
	q := Queue{Name: "a", Parent: "root", Guaranteed: resource.List{resource.CPU: 1000, gpu: 2000},
		Max: resource.List{resource.CPU: 4000}, Weight: 2}
	b, err := json.Marshal(&q)
	if err != nil {
		t.Fatal(err)
	}
	checkVariants(t, reflect.TypeFor[Queue](), b, map[string]func([]byte) error{
		"Queue.UnmarshalJSON": func(b []byte) error { var q Queue; return json.Unmarshal(b, &q) },
	})
}

// Jobs are decoded by the server (encoding/json for the job, DecodeTask for
// each task); CheckDuplicates is what it runs on the body, on its jobWire
// (a Job whose tasks are raw) as on a Job.
func TestJobMemberGivenTwice(t *testing.T) {
	full := fullGenerated(t, taskPaths, nil)
	j := Job{ID: "j", Name: "n", Queue: "q", Priority: intp(1), Tasks: []Task{{ID: "a"}, full},
		Gang: &Gang{MinMember: 2, Timeout: Duration(time.Minute), Tasks: []string{"a"}, Topology: []string{"rack"},
			RequiredTopology: "zone", SameModel: new(false), Disruption: DisruptMember},
		FailurePolicy: Continue, Retries: &Retries{Limit: 2, Backoff: Duration(time.Second)},
		Depends: []string{"afterany:other"}, User: "ann"}
	b, err := json.Marshal(&j)
	if err != nil {
		t.Fatal(err)
	}
	type jobWire struct {
		Job
		Tasks []json.RawMessage `json:"tasks"`
	}
	// The server's path: CheckDuplicates on the jobWire (it skips the raw
	// tasks whole), then DecodeTask on each task (which refuses its own
	// repeats).
	asTheServer := func(b []byte) error {
		var w jobWire
		if err := json.Unmarshal(b, &w); err != nil {
			return err
		}
		if err := CheckDuplicates(b, &jobWire{}); err != nil {
			return err
		}
		for i, raw := range w.Tasks {
			if _, err := DecodeTask(jsonread.New(raw)); err != nil {
				return errs.Prefix(fmt.Sprintf("tasks[%d]", i), err)
			}
		}
		return nil
	}
	checkVariants(t, reflect.TypeFor[Job](), b, map[string]func([]byte) error{
		"CheckDuplicates(Job)":                func(b []byte) error { return CheckDuplicates(b, &Job{}) },
		"CheckDuplicates(jobWire)+DecodeTask": asTheServer,
	})
	// "ID" is "id" to encoding/json in a job, but not inside a raw task
	// (DecodeTask refuses it there as an unknown field).
	wantGivenTwice(t, "CheckDuplicates(Job)", dupVariant{nil, "id"}, CheckDuplicates([]byte(`{"id":"a","ID":"b"}`), &Job{}))
	if err := CheckDuplicates([]byte(`{"tasks":[{"id":"a","ID":"b"}]}`), &jobWire{}); err != nil {
		t.Errorf("raw task members compared exactly: %v", err)
	}
}

// TestCheckDuplicatesLeavesTheRestToTheDecoder: malformed or deep input is
// not its to report (callers decode first), and it does not recurse.
func TestCheckDuplicatesLeavesTheRestToTheDecoder(t *testing.T) {
	for _, in := range []string{``, `{`, `{"a":1,"b"`, `[1,2`, `"x"`, `1`, `null`, `{"a":{"b":1},"b":2}`, `[{"a":1},{"a":1}]`} {
		if err := CheckDuplicates([]byte(in), &Node{}); err != nil {
			t.Errorf("%q: %v", in, err)
		}
	}
	deep := strings.Repeat(`{"a":`, 20000) + `1` + strings.Repeat(`}`, 20000)
	if err := CheckDuplicates([]byte(deep), nil); err != nil {
		t.Errorf("deep: %v", err)
	}
	wantGivenTwice(t, "CheckDuplicates", dupVariant{nil, "a.a.b"}, CheckDuplicates([]byte(`{"a":{"a":{"b":1,"b":2}}}`), nil))
}
