package server

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestAppendTaskViewMatchesEncodingJSON: the hand-written task responses
// are byte for byte what encoding/json wrote for view(r).
func TestAppendTaskViewMatchesEncodingJSON(t *testing.T) {
	now := time.Date(2026, 11, 30, 5, 6, 7, 891011, time.UTC)
	later := now.Add(1500 * time.Millisecond).In(time.FixedZone("x", 3600))
	p, no, code := 1, false, 3
	recs := []*engine.TaskRecord{
		{State: "pending", Chosen: -1, Submitted: now},
		{Spec: api.Task{ID: "a", Priority: &p, Resources: resource.List{"cpu": 10}, Lease: api.Duration(5 * time.Minute)},
			Tenant: "default", State: "scheduled", Node: "node-1", Chosen: -1, Attempt: 1, Submitted: now, Scheduled: &later},
		{Spec: api.Task{ID: "b<&>", Name: "ü\u2028", Command: []string{"sh", "-c", "echo \"hi\""}, Env: map[string]string{"B": "2", "A": "1"},
			Preemptible: &no, Alternatives: []api.Alternative{{Resources: resource.List{"cpu": 1000}, Speed: 1.5}}},
			State: "succeeded", Node: "gpu-a", Devices: []api.DeviceRef{{Type: "nvidia.com/gpu", ID: "0", Model: "L4"}},
			Chosen: 0, Attempt: 2, ExitCode: &code, Reason: "done <ok> \x01", Submitted: now, Scheduled: &now, Started: &later, Finished: &later,
			Attempts: []engine.Attempt{{Attempt: 0, Node: "gpu-b", Devices: []api.DeviceRef{{Type: "nvidia.com/gpu", ID: "1", Share: 500}},
				Scheduled: &now, Started: &now, Finished: later, ExitCode: &code, Reason: "node gpu-b is gone <&>"}, {Attempt: 1, Finished: later}},
			Trace: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	}
	for _, r := range recs {
		want, err := json.Marshal(view(r))
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendTaskView([]byte("["), r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got[1:]) != string(want) {
			t.Errorf("appendTaskView\n got %s\nwant %s", got[1:], want)
		}
		for _, batch := range []bool{false, true} {
			rec := httptest.NewRecorder()
			writeTasks(rec, 202, []*engine.TaskRecord{r, r}[:1+btoi(batch)], batch)
			old := httptest.NewRecorder()
			if batch {
				writeJSON(old, 202, map[string]any{"tasks": []taskView{view(r), view(r)}})
			} else {
				writeJSON(old, 202, view(r))
			}
			if rec.Code != 202 || rec.Body.String() != old.Body.String() || rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("writeTasks(batch %v): %d %q\nwant %q", batch, rec.Code, rec.Body, old.Body)
			}
		}
	}
	if _, err := appendTaskView(nil, &engine.TaskRecord{Submitted: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("a time past year 9999 encoded")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestDecodeCompletionMatchesDecodeStrict: the completion body reader
// accepts and rejects what decodeStrict did, with the same fields.
func TestDecodeCompletionMatchesDecodeStrict(t *testing.T) {
	for _, body := range []string{
		`{"exitCode":0}`, `{"exitCode":3,"reason":"oom"}`, `{"ExitCode":2,"REASON":"x"}`, `{}`, `null`,
		`{"exitCode":null,"reason":null}`, ` {"exitCode":1} `, `{"exitCode":1,"exitCode":2}`,
		`{"exitCode":"zero"}`, `{"exitCode":1.5}`, `{"exitCode":1e0}`, `{"exitCode":99999999999999999999}`,
		`{"reason":3}`, `{"bogus":1}`, `{"exitCode":1}x`, `{"exitCode":1}{}`, `[1]`, `"s"`, `{"exitCode":`, `{`,
		`{"reason":"a\"b\u00e9"}`, `{"exitCode":-1}`, `{"exitCode":true}`,
	} {
		var want struct {
			ExitCode int    `json:"exitCode"`
			Reason   string `json:"reason,omitempty"`
		}
		wantErr := decodeStrict([]byte(body), &want)
		code, reason, err := decodeCompletion([]byte(body))
		if (err == nil) != (wantErr == nil) {
			t.Errorf("%s: error %v, decodeStrict's %v", body, err, wantErr)
			continue
		}
		if err != nil {
			if errs.CodeOf(err) != errs.InvalidArgument || errs.FieldOf(err) != errs.FieldOf(wantErr) {
				t.Errorf("%s: %v (field %q), decodeStrict's %v (field %q)", body, err, errs.FieldOf(err), wantErr, errs.FieldOf(wantErr))
			}
			continue
		}
		if code != want.ExitCode || reason != want.Reason {
			t.Errorf("%s: %d %q, decodeStrict's %d %q", body, code, reason, want.ExitCode, want.Reason)
		}
	}
}

// TestExpiry: a wait's channel closes no earlier than its deadline and
// within a slot after it; deadlines of one slot share a channel.
func TestExpiry(t *testing.T) {
	var x expiry
	if ch := x.at(x.deadline(0), 0); !isClosed(ch) {
		t.Fatal("a zero wait is not over at once")
	}
	start := time.Now()
	d := 30 * time.Millisecond
	dl := x.deadline(d)
	ch := x.at(dl, d)
	if ch2 := x.at(dl, d); ch2 != ch {
		t.Error("two waits of one slot hold two channels")
	}
	<-ch
	if el := time.Since(start); el < d {
		t.Fatalf("closed after %v, before the wait of %v", el, d)
	}
	x.mu.Lock()
	n := len(x.slots)
	x.mu.Unlock()
	if n != 0 {
		t.Errorf("%d slots left after they ended", n)
	}
	if slotWidth(2*time.Second) != 10*time.Millisecond || slotWidth(10*time.Millisecond) != time.Millisecond {
		t.Error("slot widths")
	}
}

// TestQueryGetMatchesURLQuery: queryGet reads what url.Values.Get does.
func TestQueryGetMatchesURLQuery(t *testing.T) {
	for _, raw := range []string{"", "wait=2s", "wait=2s&wait=3s", "a=1&wait=1m", "wai%74=5s", "wait=1%6Ds", "wait=%zz&wait=2s",
		"wait;x=1&wait=4s", "wait", "wait=", "&&wait=7s&", "w+ait=1s", "wait=1+s", "x=%zz", "wait=a;b&wait=2s"} {
		want := (&url.URL{RawQuery: raw}).Query().Get("wait")
		if got := queryGet(raw, "wait"); got != want {
			t.Errorf("%q: %q, url.Values %q", raw, got, want)
		}
	}
}
