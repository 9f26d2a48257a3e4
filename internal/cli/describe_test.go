package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDescribeTaskPage: a task re-run after its node was lost reads as a
// page: its fields, an Attempts table of the earlier attempt and the
// current one, and Events derived from the timestamps, oldest first (the
// view's "attempts" as the server writes them).
func TestDescribeTaskPage(t *testing.T) {
	now := time.Now()
	at := func(ago time.Duration) string { return now.Add(-ago).UTC().Format(time.RFC3339Nano) }
	raw := `{"id":"train","name":"resnet","queue":"team-a","priority":1,"state":"succeeded","node":"gpu-2",
		"devices":[{"type":"nvidia.com/gpu","id":"0","share":1000},{"type":"nvidia.com/gpu","id":"1","share":1000}],
		"resources":{"cpu":"2","nvidia.com/gpu":"2"},"command":["python3","train.py"],"metadata":{"team":"vision"},
		"attempt":1,"exitCode":0,"submitted":"` + at(10*time.Minute) + `","scheduled":"` + at(5*time.Minute) + `",
		"started":"` + at(4*time.Minute) + `","finished":"` + at(time.Minute) + `",
		"attempts":[{"attempt":0,"node":"gpu-1","devices":[{"type":"nvidia.com/gpu","id":"0","share":1000}],
			"scheduled":"` + at(9*time.Minute) + `","started":"` + at(8*time.Minute) + `","finished":"` + at(6*time.Minute) + `",
			"exitCode":137,"reason":"node gpu-1 is gone","state":"requeued"}],
		"checkpoint":{"signal":"SIGUSR1","grace":"2m","dir":"runs/r1"},"restarts":1,
		"preemption":{"count":1,"stopSeconds":12.5,"restartSeconds":40.25}}`
	var out bytes.Buffer
	p := &page{w: &out, now: now}
	if err := describeTask(p, []byte(raw)); err != nil || p.err != nil {
		t.Fatal(err, p.err)
	}
	text := out.String()
	for _, want := range []string{
		`(?m)^ID: +train$`, `(?m)^Name: +resnet$`, `(?m)^Queue: +team-a$`, `(?m)^Priority: +1 \(high\)$`,
		`(?m)^State: +succeeded$`, `(?m)^Node: +gpu-2$`, `(?m)^Devices: +gpu:0-1$`,
		`(?m)^Resources: +cpu=2,nvidia.com/gpu=2$`, `(?m)^Command: +python3 train.py$`, `(?m)^Metadata: +team=vision$`,
		`(?m)^Started: +\S+ \(4m ago\)$`, `(?m)^Exit Code: +0$`,
		`(?m)^Checkpoint: +SIGUSR1, grace 2m, dir runs/r1$`, `(?m)^Restarts: +1$`, `(?m)^Preemption: +1 times: 12.5s stopping, 40.25s to run again$`,
		`(?m)^Attempts:\n  ATTEMPT +NODE +DEVICES +STARTED +FINISHED +EXIT +REASON\n` +
			`  0 \(requeued\) +gpu-1 +gpu:0 +8m ago +6m ago +137 +node gpu-1 is gone\n` +
			`  1 \(current\) +gpu-2 +gpu:0-1 +4m ago +60s ago +0 +succeeded\n`,
		`(?m)^Events:\n  AGE +EVENT\n  10m +submitted\n  9m +attempt 0: scheduled on gpu-1 \(gpu:0\)\n  8m +attempt 0: started\n` +
			`  6m +attempt 0: ended \(exit 137\): node gpu-1 is gone\n  5m +attempt 1: scheduled on gpu-2 \(gpu:0-1\)\n` +
			`  4m +attempt 1: started\n  60s +attempt 1: succeeded \(exit 0\)\n`,
	} {
		if !regexp.MustCompile(want).MatchString(text) {
			t.Errorf("no %s in\n%s", want, text)
		}
	}
}

// TestDescribePendingLease: a lease never placed has no attempts; its
// command line says it is a lease.
func TestDescribePendingLease(t *testing.T) {
	var out bytes.Buffer
	p := &page{w: &out, now: time.Now()}
	raw := `{"id":"big","state":"pending","reason":"0/1 nodes fit: 1 insufficient nvidia.com/gpu","lease":"30s","attempt":0,"submitted":"` + time.Now().UTC().Format(time.RFC3339) + `"}`
	if err := describeTask(p, []byte(raw)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Attempts:        <none>", "Reason:          0/1 nodes fit", "Command:         a lease (no command: the holder uses the devices), ends 30s after its placement or last renewal", "Node:            -"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
}

// TestDescribeAttemptStop: an attempt's reason says how its command took
// the stop, as its agent reported it.
func TestDescribeAttemptStop(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{`{"reason":"preempted by s1","stop":{"signal":"SIGUSR1","seconds":0.5123}}`, "preempted by s1 (exited 512ms after SIGUSR1)"},
		{`{"reason":"node n1 drained","stop":{"signal":"SIGTERM","seconds":10,"forced":true}}`, "node n1 drained (SIGKILLed 10s after SIGTERM)"},
		{`{"reason":"lost"}`, "lost"},
	} {
		var a attempt
		if err := json.Unmarshal([]byte(c.raw), &a); err != nil {
			t.Fatal(err)
		}
		if got := a.reason(); got != c.want {
			t.Errorf("%s: %q, want %q", c.raw, got, c.want)
		}
	}
}
