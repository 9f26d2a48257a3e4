package engine

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
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
			Trace: rapid.SampledFrom([]string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}).Draw(t, "trace"),
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
			r.Devices = append(r.Devices, api.DeviceRef{Type: "nvidia.com/gpu", ID: text.Draw(t, "dev"), Share: int32(i * 100)})
		}
		for i := rapid.IntRange(0, MaxAttempts).Draw(t, "attempts"); i > 0; i-- {
			a := Attempt{Attempt: i, Node: text.Draw(t, "anode"), Scheduled: optTime(t, "asched"), Started: optTime(t, "astart"),
				Finished: *timePtr(time.Unix(rapid.Int64Range(0, 4e9).Draw(t, "afin"), 0).UTC()), Reason: text.Draw(t, "areason")}
			if rapid.Bool().Draw(t, "aexit") {
				c := rapid.IntRange(-255, 255).Draw(t, "acode")
				a.ExitCode = &c
			}
			a.State = rapid.SampledFrom([]string{"", AttemptPreempted, AttemptFailed}).Draw(t, "astate")
			if rapid.Bool().Draw(t, "astop") {
				a.Stop = &agentapi.StopReport{Signal: "SIGUSR1", Seconds: rapid.Float64Range(0, 3600).Draw(t, "asecs"),
					Forced: rapid.Bool().Draw(t, "aforced"), Checkpoint: rapid.Bool().Draw(t, "ackpt")}
			}
			if rapid.Bool().Draw(t, "adev") {
				a.Devices = []api.DeviceRef{{Type: "google.com/tpu", ID: text.Draw(t, "adevid"), Model: "v5e", Share: 1000}}
			}
			r.Attempts = append(r.Attempts, a)
		}
		r.Restarts = rapid.IntRange(0, 3).Draw(t, "restarts")
		if rapid.Bool().Draw(t, "preempted") {
			r.Preemption = &PreemptionCost{Count: rapid.IntRange(1, 9).Draw(t, "pcount"),
				StopSeconds: rapid.Float64Range(0, 1e4).Draw(t, "pstop"), RestartSeconds: rapid.Float64Range(0, 1e4).Draw(t, "prestart")}
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

// TestEndAttemptKeepsTheLastAttempts: the history is bounded, keeps the
// newest, and never writes into an array a copy of the record shares.
func TestEndAttemptKeepsTheLastAttempts(t *testing.T) {
	now := time.Unix(100, 0).UTC()
	code := 3
	r := &TaskRecord{Node: "n1", ExitCode: &code}
	for i := 0; i < MaxAttempts+5; i++ {
		r.Attempt = i
		shared := *r // a published copy
		r.endAttempt(now, "lost")
		if i == 0 && (r.Attempts[0].ExitCode == nil || *r.Attempts[0].ExitCode != 3 || r.Attempts[0].Node != "n1") {
			t.Fatalf("the ended attempt lost its exit code or node: %+v", r.Attempts[0])
		}
		if len(shared.Attempts) > 0 && shared.Attempts[len(shared.Attempts)-1].Attempt != i-1 {
			t.Fatalf("attempt %d: the copy's history changed: %+v", i, shared.Attempts)
		}
		if r.ExitCode != nil {
			t.Fatalf("attempt %d: the exit code stays with the ended attempt, the record still has %d", i, *r.ExitCode)
		}
	}
	if len(r.Attempts) != MaxAttempts || r.Attempts[0].Attempt != 5 || r.Attempts[MaxAttempts-1].Attempt != MaxAttempts+4 {
		t.Fatalf("history: %d attempts, first %d, last %d", len(r.Attempts), r.Attempts[0].Attempt, r.Attempts[len(r.Attempts)-1].Attempt)
	}
}

// TestSavedServedFromTheAttempts: a record's ended attempts give the core
// the service the task attained (from each start, else its placement, to
// its end), so time-sharing ranks survive a restart.
func TestSavedServedFromTheAttempts(t *testing.T) {
	at := func(s int) *time.Time { v := time.Unix(int64(s), 0); return &v }
	r := TaskRecord{State: "pending", Attempts: []Attempt{
		{Attempt: 0, Scheduled: at(0), Started: at(10), Finished: *at(70)},     // ran 60 s
		{Attempt: 1, Scheduled: at(100), Finished: *at(130)},                   // placed 30 s, never started
		{Attempt: 2, Scheduled: at(200), Started: at(190), Finished: *at(180)}, // a clock step back: nothing
	}}
	if got := r.saved().Served; got != 90*time.Second {
		t.Errorf("served %v, want 1m30s", got)
	}
}
