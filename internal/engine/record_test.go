package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestAppendJSONMatchesMarshal: the hand-built store encoding decodes to
// the same record as json.Marshal's, for any record.
func TestAppendJSONMatchesMarshal(t *testing.T) {
	text := rapid.StringOf(rapid.RuneFrom([]rune{'a', 'Z', '0', '"', '\\', '\n', '\x01', 'é', '😀', '<', '\u2028'}))
	optTime := func(t *rapid.T, label string) *time.Time {
		if !rapid.Bool().Draw(t, label+"Set") {
			return nil
		}
		v := time.Unix(rapid.Int64Range(0, 4e9).Draw(t, label), rapid.Int64Range(0, 1e9-1).Draw(t, label+"ns")).UTC()
		return &v
	}
	rapid.Check(t, func(t *rapid.T) {
		prio := rapid.IntRange(0, 3).Draw(t, "prio")
		r := &TaskRecord{
			Spec: api.Task{ID: rapid.StringMatching(`[a-z][a-z0-9]{0,8}`).Draw(t, "id"), Name: text.Draw(t, "name"),
				Priority: &prio, Resources: resource.List{"cpu": rapid.Int64Range(0, 1e6).Draw(t, "cpu")},
				Env: map[string]string{"A": text.Draw(t, "env")}},
			Tenant:  text.Draw(t, "tenant"),
			Seq:     rapid.Uint64().Draw(t, "seq"),
			State:   rapid.SampledFrom([]string{"pending", "scheduled", "running", "succeeded"}).Draw(t, "state"),
			Node:    text.Draw(t, "node"),
			Chosen:  rapid.IntRange(-1, 7).Draw(t, "chosen"),
			Attempt: rapid.IntRange(0, 100).Draw(t, "attempt"),
			Reason:  text.Draw(t, "reason"),
			Submitted: time.Unix(rapid.Int64Range(0, 4e9).Draw(t, "sub"), rapid.Int64Range(0, 1e9-1).Draw(t, "subns")).
				In(time.FixedZone("x", rapid.IntRange(-12, 12).Draw(t, "zone")*3600)),
			Scheduled: optTime(t, "sched"), Started: optTime(t, "start"), Finished: optTime(t, "fin"),
		}
		if rapid.Bool().Draw(t, "exit") {
			c := rapid.IntRange(-255, 255).Draw(t, "code")
			r.ExitCode = &c
		}
		if rapid.Bool().Draw(t, "hasCause") {
			c := text.Draw(t, "cause") // "" too: a task's own empty reason
			r.Cause = &c
		}
		for i := rapid.IntRange(0, 3).Draw(t, "devs"); i > 0; i-- {
			r.Devices = append(r.Devices, core.DeviceRef{Type: "nvidia.com/gpu", ID: text.Draw(t, "dev"), Share: int32(i * 100)})
		}
		got, err := r.appendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		var a, b TaskRecord
		if err := json.Unmarshal(got, &a); err != nil {
			t.Fatalf("appendJSON wrote invalid JSON %s: %v", got, err)
		}
		if err := json.Unmarshal(want, &b); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(b, a, cmpopts.IgnoreUnexported(TaskRecord{})); diff != "" {
			t.Fatalf("decoded records differ (-marshal +appendJSON):\n%s", diff)
		}
		// decodeTask, the restart path, reads both encodings as encoding/json does.
		for _, enc := range [][]byte{got, want} {
			c, err := decodeTask(r.Spec.ID, enc)
			if err != nil {
				t.Fatalf("decodeTask(%s): %v", enc, err)
			}
			if diff := cmp.Diff(&b, c, cmpopts.IgnoreUnexported(TaskRecord{})); diff != "" {
				t.Fatalf("decodeTask differs from encoding/json (-json +decodeTask):\n%s", diff)
			}
		}
	})
}

// TestDecodeTaskTakesIDFromKey: a spec stored without its generated id
// gets it back from the store key.
func TestDecodeTaskTakesIDFromKey(t *testing.T) {
	r := &TaskRecord{Spec: api.Task{}, State: "pending", Submitted: time.Unix(1, 0).UTC()}
	b, err := r.appendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeTask("t42", b)
	if err != nil || got.Spec.ID != "t42" {
		t.Fatalf("got %+v, %v", got, err)
	}
}
