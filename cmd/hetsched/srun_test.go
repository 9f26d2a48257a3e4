package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/cli"
	"github.com/hetsched/hetsched/internal/server/servertest"
	"github.com/hetsched/hetsched/internal/up"
)

// exitCode is the code an error ends the command with (main's rule).
func exitCode(err error) int {
	var exit *cli.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.Code
	}
	return 1
}

// TestSubmitWaitsForTheEnd (issue 45 §1.1): submit --wait returns when the
// work ends, with its exit code (sbatch --wait), not when it is placed;
// --wait=DUR gives up after DUR; a job is exit 1 unless every task
// succeeded.
func TestSubmitWaitsForTheEnd(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	lease := specFile(t, "lease.yaml", "id: held\nlease: 1h\nresources: {cpu: \"1\"}\n")
	done := make(chan error, 1)
	go func() {
		_, err := run(t, "submit", "--wait", "-f", lease, "--server", base)
		done <- err
	}()
	c := cli.NewClient(base, "", 10*time.Second)
	until(t, func() string {
		var v struct{ State string }
		if _, err := c.Do(context.Background(), "GET", "/api/v1/tasks/held", nil, &v); err != nil || v.State != "scheduled" {
			return fmt.Sprintf("held: %v %+v", err, v)
		}
		return ""
	})
	select {
	case err := <-done:
		t.Fatalf("submit --wait returned while the lease is held: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := run(t, "complete", "held", "--exit-code", "3", "--server", base); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if exitCode(err) != 3 {
			t.Errorf("submit --wait of a task that exited 3: %v (code %d)", err, exitCode(err))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("submit --wait did not return after the task ended")
	}
	other := specFile(t, "other.yaml", "id: other\nlease: 1h\nresources: {cpu: \"1\"}\n")
	if _, err := run(t, "submit", "--wait=500ms", "-f", other, "--server", base); exitCode(err) != 1 || !strings.Contains(err.Error(), "still scheduled after 500ms") {
		t.Errorf("--wait=500ms on a task that goes on: %v", err)
	}
	job := specFile(t, "job.yaml", "id: pair\ntasks:\n  - {id: a, lease: 1h, resources: {cpu: \"1\"}}\n  - {id: b, lease: 1h, resources: {cpu: \"1\"}}\n")
	go func() {
		_, err := run(t, "submit", "--wait", "-f", job, "--server", base)
		done <- err
	}()
	until(t, func() string {
		var v struct{ State string }
		if _, err := c.Do(context.Background(), "GET", "/api/v1/tasks/pair.b", nil, &v); err != nil || v.State != "scheduled" {
			return fmt.Sprintf("pair.b: %v %+v", err, v)
		}
		return ""
	})
	// a first: b's failure cancels what of the job is left (failFast).
	for _, c := range [][2]string{{"pair.a", "0"}, {"pair.b", "2"}} {
		if _, err := run(t, "complete", c[0], "--exit-code", c[1], "--server", base); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-done:
		if exitCode(err) != 1 || !strings.Contains(err.Error(), "b failed") {
			t.Errorf("submit --wait of a job with a failed task: %v (code %d)", err, exitCode(err))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("submit --wait of a job did not return")
	}
}

// TestRunIsLikeSrun (issue 45 §1.1, real processes under hetsched up):
// run streams the command's output, exits with its code, and Ctrl-C (the
// context's end) cancels the task.
func TestRunIsLikeSrun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs commands under hetsched up")
	}
	base := startUpInProcess(t)
	out, err := run(t, "run", "--id", "three", "--cpu", "100m", "--server", base, "--", "sh", "-c", "echo hello from the task; exit 3")
	if exitCode(err) != 3 || !strings.Contains(out, "hello from the task") || !strings.Contains(out, "task three failed (exit 3)") {
		t.Errorf("run of a command that exits 3: %v (code %d)\n%s", err, exitCode(err), out)
	}
	if out, err := run(t, "run", "--cpu", "100m", "--server", base, "--", "echo", "fine"); err != nil || !strings.Contains(out, "fine") {
		t.Errorf("run of a command that succeeds: %v\n%s", err, out)
	}

	// Ctrl-C: the root's context ends while the task runs.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRoot()
	var buf strings.Builder
	root.SetOut(&buf)
	root.SetErr(&buf)
	root.SetArgs([]string{"run", "--id", "long", "--cpu", "100m", "--server", base, "--", "sh", "-c", "echo started; exec sleep 600"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	c := cli.NewClient(base, "", 10*time.Second)
	until(t, func() string {
		var v struct{ State string }
		if _, err := c.Do(context.Background(), "GET", "/api/v1/tasks/long", nil, &v); err != nil || v.State != "running" {
			return fmt.Sprintf("long: %v %+v", err, v)
		}
		return ""
	})
	cancel()
	select {
	case err := <-done:
		if exitCode(err) != 130 {
			t.Errorf("run interrupted: %v (code %d)", err, exitCode(err))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after Ctrl-C")
	}
	var v struct{ State string }
	if _, err := c.Do(context.Background(), "GET", "/api/v1/tasks/long", nil, &v); err != nil || v.State != "cancelled" {
		t.Errorf("the interrupted run's task: %v %+v, want cancelled", err, v)
	}
}

// TestGetOneStatesAndCluster (issue 45 §1.4): get KIND NAME prints that
// one row; --state takes a list, by name or squeue's codes; get cluster
// shows capacity and allocation per resource and device model.
func TestGetOneStatesAndCluster(t *testing.T) {
	base := servertest.Start(t, oneGPUNode)
	file := specFile(t, "two.yaml", "- {id: a, name: prep, lease: 1h, resources: {cpu: \"1\"}}\n- {id: b, resources: {cpu: \"1\", nvidia.com/gpu: 2}}\n")
	if _, err := run(t, "submit", "-f", file, "--server", base); err != nil {
		t.Fatal(err)
	}
	job := specFile(t, "job.yaml", "id: etl\ntasks:\n  - {id: x, lease: 1h, resources: {cpu: \"1\"}}\n")
	if _, err := run(t, "submit", "-f", job, "--server", base); err != nil {
		t.Fatal(err)
	}
	until(t, func() string {
		out, _ := run(t, "get", "task", "a", "--server", base)
		if !strings.Contains(out, "scheduled") {
			return "a not scheduled yet:\n" + out
		}
		return ""
	})
	for _, c := range []struct {
		args      []string
		want, not []string
	}{
		{[]string{"get", "task", "a"}, []string{"prep", "scheduled"}, []string{"\nb "}},
		{[]string{"get", "node", "gpu-a"}, []string{"gpu-a", "ready"}, nil},
		{[]string{"get", "job", "etl"}, []string{"etl"}, nil},
		{[]string{"get", "tasks", "--state", "PD,R"}, []string{"\nb "}, []string{"prep"}},
		{[]string{"get", "tasks", "--state", "pending,scheduled"}, []string{"\nb ", "prep"}, nil},
		{[]string{"get", "cluster"}, []string{"RESOURCE", "cpu", "nvidia.com/gpu", "DEVICE", "L4"}, nil},
		{[]string{"top"}, nil, nil},
	} {
		if c.args[0] == "top" {
			continue // top is get cluster's other name: below
		}
		out, err := run(t, append(c.args, "--server", base)...)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: lacks %q:\n%s", c.args, w, out)
			}
		}
		for _, w := range c.not {
			if strings.Contains(out, w) {
				t.Errorf("%v: has %q:\n%s", c.args, w, out)
			}
		}
	}
	if out, err := run(t, "get", "top", "--server", base); err != nil || !strings.Contains(out, "RESOURCE") {
		t.Errorf("get top: %v\n%s", err, out)
	}
	if _, err := run(t, "get", "task", "nosuch", "--server", base); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("get task nosuch: %v", err)
	}
	if _, err := run(t, "get", "tasks", "--state", "asleep", "--server", base); err == nil || !strings.Contains(err.Error(), "asleep") {
		t.Errorf("--state asleep: %v", err)
	}
}

// TestJobLogs (issue 45 §1.4, real processes under hetsched up): logs JOB
// prints every task's output, each line prefixed with its task.
func TestJobLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs commands under hetsched up")
	}
	base := startUpInProcess(t)
	job := specFile(t, "job.yaml", "id: two\ntasks:\n  - {id: a, resources: {cpu: 100m}, command: [sh, -c, 'echo from a']}\n  - {id: b, resources: {cpu: 100m}, command: [sh, -c, 'echo from b']}\n")
	if _, err := run(t, "submit", "-f", job, "--wait", "--server", base); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, "logs", "two", "--server", base)
	if err != nil || !strings.Contains(out, "[two.a] from a") || !strings.Contains(out, "[two.b] from b") {
		t.Errorf("logs two: %v\n%s", err, out)
	}
	if _, err := run(t, "logs", "nothing", "--server", base); err == nil || !strings.Contains(err.Error(), `no task or job "nothing"`) {
		t.Errorf("logs of nothing: %v", err)
	}
}

// TestUpServesAgentMetrics (issue 45 §1.7): up serves its agents' metrics
// in one place, each series labelled with its node, the process's own
// once.
func TestUpServesAgentMetrics(t *testing.T) {
	murl := make(chan string, 1)
	base := startUpWith(t, func(o *up.Options) {
		o.AgentMetrics = "127.0.0.1:0"
		o.AgentMetricsReady = func(u string) { murl <- u }
	})
	_ = base
	var u string
	select {
	case u = <-murl:
	case <-time.After(30 * time.Second):
		t.Fatal("no agent metrics URL")
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	text := string(b)
	for _, want := range []string{`hetsched_agent_connected{node="gpu-h100"} 1`, `hetsched_agent_connected{node="cpu-1"} 1`, "go_goroutines "} {
		if !strings.Contains(text, want) {
			t.Errorf("agent metrics lack %q", want)
		}
	}
	if n := strings.Count(text, "\ngo_goroutines "); n != 1 {
		t.Errorf("go_goroutines %d times, want once", n)
	}
}
