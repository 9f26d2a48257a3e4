package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/jsonread"
	"github.com/hetsched/hetsched/internal/resource"
)

// decodeTask decodes one Task strictly, as the server does.
func decodeTask(data []byte) (*Task, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var t Task
	if err := dec.Decode(&t); err != nil {
		return nil, err
	}
	return &t, nil
}

func TestDecodeTaskQuantities(t *testing.T) {
	task, err := decodeTask([]byte(`{"resources":{"cpu":"500m","memory":"16Gi","nvidia.com/gpu":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := resource.List{resource.CPU: 500, resource.Memory: 17179869184, gpu: 2000}
	if d := cmp.Diff(want, task.Resources); d != "" {
		t.Errorf("resources (-want +got):\n%s", d)
	}

	task, err = decodeTask([]byte(`{"alternatives":[{"resources":{"cpu":2,"google.com/tpu":"4","memory":1.5e3},"speed":0.5}]}`))
	if err != nil {
		t.Fatal(err)
	}
	wantAlts := []Alternative{{Resources: resource.List{resource.CPU: 2000, "google.com/tpu": 4000, resource.Memory: 1500}, Speed: 0.5}}
	if d := cmp.Diff(wantAlts, task.Alternatives); d != "" {
		t.Errorf("alternatives (-want +got):\n%s", d)
	}
}

func TestDecodeTaskDurations(t *testing.T) {
	task, err := decodeTask([]byte(`{"duration":"250ms","timeout":"30m","queueTimeout":"90s","lease":"1.5s"}`))
	if err != nil {
		t.Fatal(err)
	}
	// A bare number is refused, naming the field (issue 16 §1), by both
	// decoders.
	for _, f := range []string{"duration", "timeout", "queueTimeout", "lease"} {
		if _, err := decodeTask([]byte(`{"` + f + `":5}`)); err == nil || !strings.Contains(err.Error(), `"5s"`) {
			t.Errorf("%s as a bare number (encoding/json): %v", f, err)
		}
		r := jsonread.New([]byte(`{"` + f + `":5}`))
		if _, err := ReadTask(r); errs.FieldOf(err) != f || !strings.Contains(err.Error(), `"5s"`) {
			t.Errorf("%s as a bare number (ReadTask): %v", f, err)
		}
	}
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"duration", task.Duration.D(), 250 * time.Millisecond},
		{"timeout", task.Timeout.D(), 30 * time.Minute},
		{"queueTimeout", task.QueueTimeout.D(), 90 * time.Second},
		{"lease", task.Lease.D(), 1500 * time.Millisecond},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	task, err = decodeTask([]byte(`{"timeout":null}`))
	if err != nil || task.Timeout != 0 {
		t.Errorf("null timeout: %v, %v; want 0, nil", task, err)
	}
}

func TestDecodeTaskBadDuration(t *testing.T) {
	for _, in := range []string{
		`{"timeout":"5 minutes"}`,
		`{"timeout":"30"}`,
		`{"timeout":""}`,
		`{"timeout":true}`,
		`{"timeout":[1]}`,
		`{"timeout":1e300}`,
		`{"duration":"99999999999h"}`,
	} {
		if task, err := decodeTask([]byte(in)); err == nil {
			t.Errorf("decode %s = %+v, want an error", in, task)
		}
	}
}

func TestDecodeTaskBadQuantity(t *testing.T) {
	for _, c := range []struct{ in, field string }{
		{`{"resources":{"cpu":"lots"}}`, "cpu"},
		{`{"resources":{"memory":"1Gb"}}`, "memory"},
		{`{"resources":{"cpu":"-1"}}`, "cpu"},
		{`{"resources":{"cpu":"1u"}}`, "cpu"},
		{`{"resources":{"nvidia.com/gpu":true}}`, "nvidia.com/gpu"},
		{`{"resources":{"gpu":1}}`, "gpu"},
		{`{"alternatives":[{"resources":{"google.com/tpu":"x"}}]}`, "google.com/tpu"},
	} {
		_, err := decodeTask([]byte(c.in))
		var e *errs.Error
		if !errors.As(err, &e) {
			t.Errorf("decode %s: error %v (%T) is not an *errs.Error", c.in, err, err)
			continue
		}
		if e.Code != errs.InvalidArgument || e.Field != c.field {
			t.Errorf("decode %s: code %q field %q, want %q %q", c.in, e.Code, e.Field, errs.InvalidArgument, c.field)
		}
	}
}

func TestDecodeTaskUnknownField(t *testing.T) {
	if _, err := decodeTask([]byte(`{"id":"a","bogus":1}`)); err == nil || !strings.Contains(err.Error(), "bogus") {
		t.Errorf("unknown field: err = %v, want one naming \"bogus\"", err)
	}
}

func TestTaskJSONRoundTrip(t *testing.T) {
	in := fullTask()
	in.Command = nil
	in.Timeout = 0                        // a lease has no run timeout
	in.Lease = Duration(90 * time.Second) // lease is set only without a command
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{
		`"cpu":"4"`, `"memory":"16Gi"`, `"nvidia.com/gpu":"2"`, `"nvidia.com/gpu":"0.5"`,
		`"queueTimeout":"10m0s"`, `"lease":"1m30s"`, `"priority":1`, `"preemptible":false`,
	} {
		if !bytes.Contains(data, []byte(frag)) {
			t.Errorf("marshaled task lacks %s:\n%s", frag, data)
		}
	}
	out, err := decodeTask(data)
	if err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	if d := cmp.Diff(in, out); d != "" {
		t.Errorf("round trip (-in +out):\n%s", d)
	}
	if err := out.Validate(); err != nil {
		t.Errorf("round-tripped task: %v", err)
	}

	// And the task with a command, as fullTask builds it.
	in = fullTask()
	if data, err = json.Marshal(in); err != nil {
		t.Fatal(err)
	}
	if out, err = decodeTask(data); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(in, out); d != "" {
		t.Errorf("round trip (-in +out):\n%s", d)
	}

	// An empty task marshals to an empty object.
	if data, err = json.Marshal(&Task{}); err != nil || string(data) != "{}" {
		t.Errorf("empty task = %s, %v; want {}", data, err)
	}
}

func TestDurationMarshal(t *testing.T) {
	for _, c := range []struct {
		d    Duration
		want string
	}{
		{Duration(250 * time.Millisecond), `"250ms"`},
		{Duration(30 * time.Minute), `"30m0s"`},
		{0, `"0s"`},
	} {
		got, err := json.Marshal(c.d)
		if err != nil || string(got) != c.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", c.d.D(), got, err, c.want)
		}
		var back Duration
		if err := json.Unmarshal(got, &back); err != nil || back != c.d {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", got, back.D(), err, c.d.D())
		}
	}
}

func TestBytesJSON(t *testing.T) {
	for _, c := range []struct {
		b    Bytes
		want string
	}{
		{80 << 30, `"80Gi"`},
		{1536 << 20, `"1536Mi"`},
		{1000, `"1000"`},
		{0, `"0"`},
	} {
		got, err := json.Marshal(c.b)
		if err != nil || string(got) != c.want {
			t.Errorf("Marshal(Bytes(%d)) = %s, %v; want %s", int64(c.b), got, err, c.want)
		}
		var back Bytes
		if err := json.Unmarshal(got, &back); err != nil || back != c.b {
			t.Errorf("Unmarshal(%s) = %d, %v; want %d", got, back, err, c.b)
		}
	}
	for _, c := range []struct {
		in   string
		want Bytes
	}{
		{`"80Gi"`, 85899345920},
		{`"16G"`, 16000000000},
		{`1024`, 1024},
		{`1e3`, 1000},
		{`"0.5Ki"`, 512},
		{`null`, 0},
	} {
		b := Bytes(7)
		if err := json.Unmarshal([]byte(c.in), &b); err != nil || b != c.want {
			t.Errorf("Unmarshal(%s) = %d, %v; want %d", c.in, b, err, c.want)
		}
	}
	for _, in := range []string{`"80GB"`, `"-1Gi"`, `true`, `{}`, `[]`, `"1Ei"`} {
		var b Bytes
		err := json.Unmarshal([]byte(in), &b)
		if errs.CodeOf(err) != errs.InvalidArgument {
			t.Errorf("Unmarshal(%s) = %d, %v; want an invalid_argument error", in, b, err)
		}
	}
}

// issue 16 §1: an explicit lease of 0 and shards of 0 are refused, naming
// the field; "never" is a lease that never expires and round-trips.
func TestExplicitZeroLeaseAndShards(t *testing.T) {
	for _, c := range []struct{ body, field string }{
		{`{"lease":"0s"}`, "lease"}, {`{"lease":"0"}`, "lease"}, {`{"shards":0}`, "shards"},
	} {
		if _, err := ReadTask(jsonread.New([]byte(c.body))); errs.FieldOf(err) != c.field {
			t.Errorf("%s: %v, want an error on %s", c.body, err, c.field)
		}
	}
	task, err := ReadTask(jsonread.New([]byte(`{"lease":"never","resources":{"cpu":"1"}}`)))
	if err != nil || task.Lease != NoExpiry {
		t.Fatalf("never: %v %v", task.Lease, err)
	}
	b, _ := json.Marshal(task)
	fast, _ := task.AppendJSON(nil)
	if !strings.Contains(string(b), `"lease":"never"`) || string(fast) != string(b) {
		t.Errorf("never does not round-trip: %s, AppendJSON %s", b, fast)
	}
	if _, err := ReadTask(jsonread.New([]byte(`{"lease":null}`))); err != nil {
		t.Errorf("a null lease is an absent one: %v", err)
	}
}
