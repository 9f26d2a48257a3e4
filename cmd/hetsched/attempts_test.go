package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/up"
)

// startUpInProcess serves `hetsched up` (server and in-process agents
// running commands on this machine; the shims are this test binary)
// until the test ends, and returns its URL.
func startUpInProcess(t *testing.T) string {
	t.Helper()
	return startUpWith(t, func(*up.Options) {})
}

// startUpWith is startUpInProcess with set changing the options first.
func startUpWith(t *testing.T, set func(*up.Options)) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready, done := make(chan string, 1), make(chan error, 1)
	var out childproc.SyncBuffer
	opt := up.Options{DataDir: t.TempDir(), Listen: "127.0.0.1:0", Grace: time.Second,
		Shim: []string{exe, "agent-shim"}, ShimEnv: []string{asCLI + "=1"}, Ready: func(u string) { ready <- u }}
	set(&opt)
	go func() { done <- up.Run(ctx, &out, opt) }()
	select {
	case base := <-ready:
		t.Cleanup(func() { cancel(); <-done })
		return base
	case err := <-done:
		t.Fatalf("up: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("up not ready in 60s:\n%s", out.String())
	}
	return ""
}

// until retries f (every 50ms, up to 60s) until it returns "", else
// fails with its last answer.
func until(t *testing.T, f func() string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestEarlierAttempts: a task moved off a drained node runs again; describe
// lists the earlier attempt and the current one, and logs --previous and
// --attempt N print each attempt's own output. (Needs the server's
// "attempts" in the task view and logs' ?attempt= and ?previous= of issue
// 16 §2.)
func TestEarlierAttempts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs commands under hetsched up")
	}
	base := startUpInProcess(t)
	script := `echo "attempt $HETSCHED_ATTEMPT on $HETSCHED_NODE"; sleep 120`
	if out, err := run(t, "run", "-d", "--id", "again", "--cpu", "100m", "--server", base, "--", "sh", "-c", script); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	where := func() (state, node string) {
		out, err := run(t, "describe", "task", "again", "-o", "json", "--server", base)
		var v struct{ State, Node string }
		if err != nil || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("describe: %v\n%s", err, out)
		}
		return v.State, v.Node
	}
	var first, second string
	until(t, func() string {
		state, node := where()
		first = node
		if state != "running" {
			return "not running: " + state
		}
		out, _ := run(t, "logs", "again", "--server", base)
		if !strings.Contains(out, " on "+node) {
			return "no output yet: " + out
		}
		return ""
	})
	if out, err := run(t, "drain", first, "--server", base); err != nil {
		t.Fatalf("drain: %v %s", err, out)
	}
	until(t, func() string {
		state, node := where()
		second = node
		if state != "running" || node == first {
			return "not running elsewhere: " + state + " on " + node
		}
		out, _ := run(t, "logs", "again", "--server", base)
		if !strings.Contains(out, " on "+node) {
			return "no output of the new attempt yet: " + out
		}
		return ""
	})
	defer run(t, "cancel", "again", "--server", base)
	for _, c := range []struct {
		args      []string
		want, not string
	}{
		{[]string{"logs", "again"}, " on " + second, " on " + first},
		{[]string{"logs", "again", "--previous"}, " on " + first, " on " + second},
		{[]string{"logs", "again", "-p"}, " on " + first, " on " + second},
		{[]string{"logs", "again", "--attempt", "0"}, " on " + first, " on " + second},
		{[]string{"logs", "again", "--attempt", "1"}, " on " + second, " on " + first},
	} {
		out, err := run(t, append(c.args, "--server", base)...)
		if err != nil || !strings.Contains(out, c.want) || strings.Contains(out, c.not) {
			t.Errorf("%v: %v %q, want %q", c.args, err, out, c.want)
		}
	}
	out, err := run(t, "describe", "task", "again", "--server", base)
	for _, w := range []string{
		`(?m)^Attempts:\n  ATTEMPT +NODE +DEVICES +STARTED +FINISHED +EXIT +REASON\n  0 \(requeued\) +` + regexp.QuoteMeta(first) + ` .*\n  1 \(current\) +` + regexp.QuoteMeta(second) + ` .* running$`,
		`(?m)^  \d+s +attempt 0: scheduled on ` + regexp.QuoteMeta(first) + `\b`,
		`(?m)^  \d+s +attempt 0: ended`,
		`(?m)^  \d+s +attempt 1: scheduled on ` + regexp.QuoteMeta(second) + `\b`,
	} {
		if err != nil || !regexp.MustCompile(w).MatchString(out) {
			t.Errorf("describe: %v: no %s in\n%s", err, w, out)
		}
	}
}
