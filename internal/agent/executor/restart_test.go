package executor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRestartingSpecRunsAgain: a command of a Restart spec that exits is
// run again at once the first time (the runs file counts it), and the
// agent's Restart stops the running command and records the restart
// with the first backoff step before the next run; a kill while it waits
// ends the attempt with one result.
func TestRestartingSpecRunsAgain(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	s := sh("replica", `echo "run $$"; [ -e once ] && exec sleep 100; touch once; exit 3`)
	s.Restart = true
	s.Grace = 20 * time.Second
	if err := x.Start(s); err != nil {
		t.Fatal(err)
	}
	d := taskDir(dir, "replica", 0)
	runs := func() Runs {
		r, ok := x.RunsOf("replica", 0)
		if !ok {
			t.Fatal("RunsOf: not running")
		}
		return r
	}
	waitFor(t, "the exited command to run again", func() bool {
		return strings.Count(readFile(t, filepath.Join(d, stdoutLog)), "run ") == 2 && !runs().Started.IsZero()
	})
	if r := runs(); r.Restarts != 1 || !strings.Contains(r.Reason, "exited with code 3") {
		t.Errorf("after an exit: runs %+v, want 1 restart and why", r)
	}
	before, err := readProcID(filepath.Join(d, pgidFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Restart("replica", 0, "liveness probe failed: connection refused"); err != nil {
		t.Fatal(err)
	}
	// The second restart in a row waits the first backoff step.
	waitFor(t, "the restart to be recorded", func() bool { return runs().Restarts == 2 })
	if r := runs(); !strings.Contains(r.Reason, "liveness probe failed") || time.Until(r.Next) > RestartBackoff {
		t.Errorf("after the restart: runs %+v, want the reason and the next run within %v", r, RestartBackoff)
	}
	assertGroupGone(t, before.Pid)
	// Stopped while it waits to run again: the attempt ends at once.
	x.Kill("replica", "stopped")
	r := waitResult(t, x, "replica")
	if !r.Killed || !strings.Contains(r.Reason, "stopped") || !strings.Contains(r.Reason, "waiting to restart") {
		t.Errorf("killed while waiting to restart: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(d, restartFile)); err == nil {
		t.Error("the restart request was left behind")
	}
}

// TestRestartOfAPlainSpecIsIgnored: a spec without Restart is not run
// again: its exit is its result, and a restart request does nothing.
func TestRestartOfAPlainSpecIsIgnored(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	if err := x.Start(sh("plain", "echo $$; sleep 100")); err != nil {
		t.Fatal(err)
	}
	d := taskDir(dir, "plain", 0)
	waitFor(t, "the command to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(d, stdoutLog))
		return strings.HasSuffix(string(b), "\n")
	})
	if err := x.Restart("plain", 0, "liveness"); err != nil {
		t.Fatal(err)
	}
	x.Kill("plain", "done")
	r := waitResult(t, x, "plain")
	if !r.Killed || strings.Count(readFile(t, filepath.Join(d, stdoutLog)), "\n") != 1 {
		t.Errorf("plain spec after a restart request: %+v, output %q", r, readFile(t, filepath.Join(d, stdoutLog)))
	}
}
