package main

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

// runUntil runs the CLI with args until ctx ends, its output into out;
// the returned channel has its error.
func runUntil(ctx context.Context, out *childproc.SyncBuffer, args ...string) <-chan error {
	root := newRoot()
	root.SetOut(out)
	root.SetErr(out)
	root.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	return done
}

// waitLines waits until out has lines matching wants, in that order.
func waitLines(t *testing.T, out *childproc.SyncBuffer, wants ...string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		text, i := out.String(), 0
		for _, l := range strings.Split(text, "\n") {
			if i < len(wants) && regexp.MustCompile(wants[i]).MatchString(l) {
				i++
			}
		}
		if i == len(wants) {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("no line matching %q (after the earlier ones) within 30s:\n%s", wants[i], text)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGetWatch: `get tasks -w` prints the table, then a row per change
// (a lease placed, then completed; a task that cannot fit, pending), until
// its context ends (Ctrl-C), when it exits 0.
func TestGetWatch(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	// A connection the transport dialled but did not use holds up the
	// server's shutdown for 5s (net/http treats it as new, not idle).
	t.Cleanup(http.DefaultTransport.(*http.Transport).CloseIdleConnections)
	if _, err := run(t, "run", "-d", "--id", "old", "--server", base, "--", "true"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out childproc.SyncBuffer
	done := runUntil(ctx, &out, "get", "tasks", "-w", "--server", base)
	waitLines(t, &out, `^ID +NAME +PRIORITY +STATE +NODE +DEVICES +ATTEMPT +AGE +REASON$`, `^old +- +2 +scheduled +gpu-a `)
	lease := specFile(t, "lease.yaml", "id: l1\nresources: {cpu: \"1\", nvidia.com/gpu: 1}\n")
	if _, err := run(t, "submit", "-f", lease, "--server", base); err != nil {
		t.Fatal(err)
	}
	waitLines(t, &out, `^l1 +\S+ +2 +scheduled +gpu-a +gpu:0 `)
	if _, err := run(t, "complete", "l1", "--server", base); err != nil {
		t.Fatal(err)
	}
	big := specFile(t, "big.yaml", "id: big\nresources: {nvidia.com/gpu: 4}\n")
	if _, err := run(t, "submit", "-f", big, "--server", base); err != nil {
		t.Fatal(err)
	}
	text := waitLines(t, &out, `^l1 +\S+ +2 +scheduled `, `^l1 +\S+ +2 +succeeded +gpu-a +gpu:0 `, `^big +\S+ +2 +pending +0`)
	if strings.Count(text, "PRIORITY") != 1 {
		t.Errorf("the header is printed more than once:\n%s", text)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("the watch ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not stop within 10s of Ctrl-C")
	}
}

// TestGetWatchFlags: a watch of jobs or queues refuses --selector, and a
// malformed selector is refused before anything is sent.
func TestGetWatchFlags(t *testing.T) {
	for _, args := range [][]string{
		{"get", "jobs", "-w", "-l", "a=b"},
		{"get", "queues", "--watch", "--selector", "a"},
	} {
		_, err := run(t, append(args, "--server", "http://127.0.0.1:1")...)
		if err == nil || !strings.Contains(err.Error(), "--selector: "+args[1]+" have no labels") {
			t.Errorf("%v: %v", args, err)
		}
	}
	_, err := run(t, "get", "tasks", "-w", "-l", "team in a", "--server", "http://127.0.0.1:1")
	if err == nil || !strings.Contains(err.Error(), "--selector") || strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("a malformed selector: %v", err)
	}
}
