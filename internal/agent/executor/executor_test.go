package executor

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// shimEnv makes the test binary act as the shim (see TestMain).
const shimEnv = "HETSCHED_EXECUTOR_SHIM"

// deadline bounds every wait in these tests; the machine may be slow.
const deadline = 30 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(shimEnv) == "1" {
		_ = os.Unsetenv(shimEnv) // not for the command
		os.Exit(RunShim(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// newExec makes an executor over dir whose shim is this test binary; it is
// closed, and checked to have left no goroutine, when the test ends.
func newExec(t *testing.T, dir string) *Executor {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	x, err := New(Options{
		Dir:  dir,
		Shim: []string{exe},
		// A race-enabled shim would otherwise sleep 1s at exit.
		ShimEnv: []string{shimEnv + "=1", "GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")},
		Logger:  slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})),
		Poll:    50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAndCheck(t, x) })
	return x
}

// closeAndCheck closes x and fails if an executor goroutine is left (one
// that ran wg.Done may take a moment to return: like goleak, it retries).
func closeAndCheck(t *testing.T, x *Executor) {
	t.Helper()
	x.Close()
	end := time.Now().Add(5 * time.Second)
	for {
		var left []string
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "executor.(*Executor)") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("goroutines left after Close:\n%s", strings.Join(left, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func sh(task, script string) Spec {
	return Spec{Task: task, Command: []string{"sh", "-c", script}}
}

// waitResult returns the next Result of task, skipping others.
func waitResult(t *testing.T, x *Executor, task string) Result {
	t.Helper()
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		select {
		case r, ok := <-x.Results():
			if !ok {
				t.Fatalf("Results closed while waiting for %s", task)
			}
			if r.Task == task {
				return r
			}
			t.Logf("skipping the result of %s: %+v", r.Task, r)
		case <-timer.C:
			t.Fatalf("no result for %s within %v", task, deadline)
		}
	}
}

// nextResult returns the next Result, whichever task's.
func nextResult(t *testing.T, x *Executor) Result {
	t.Helper()
	select {
	case r, ok := <-x.Results():
		if !ok {
			t.Fatal("Results closed")
		}
		return r
	case <-time.After(deadline):
		t.Fatalf("no result within %v", deadline)
	}
	panic("unreachable")
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func taskDir(dir, task string, attempt int) string {
	return filepath.Join(dir, "tasks", attemptName(task, attempt))
}

// pgidOf is the command's process group from the pgid file, checked
// against the leader's pid the command printed as its first line.
func pgidOf(t *testing.T, dir string) int {
	t.Helper()
	g, err := readProcID(filepath.Join(dir, pgidFile))
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(readFile(t, filepath.Join(dir, stdoutLog)), "\n")
	if first != strconv.Itoa(g.Pid) {
		t.Fatalf("the command printed its pid %q; the pgid file says %d", first, g.Pid)
	}
	return g.Pid
}

// liveMembers lists the processes of group pgid that are not zombies.
func liveMembers(pgid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(pid); err == nil && st.Pgrp == pgid && st.State != 'Z' && st.State != 'X' {
			out = append(out, pid)
		}
	}
	return out
}

// assertGroupGone checks that no process, zombies included, is in pgid.
func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process group %d still there (kill 0: %v); live members %v", pgid, err, liveMembers(pgid))
	}
}

func TestOutputExitCodeEnvWorkDirAndLeftovers(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	if err := x.Recover(); err != nil {
		t.Fatal(err)
	}
	env := sh("env", `echo "$FOO"; pwd -P`)
	env.Env = map[string]string{"FOO": "bar baz", "PATH": os.Getenv("PATH")}
	// No shell: a shell fixes PWD itself.
	pwd := Spec{Task: "pwd", Command: []string{"printenv", "PWD", "FOO", "HETSCHED_WORK_DIR"}, Env: map[string]string{"FOO": "x"}}
	specs := []Spec{
		sh("out", "echo out; echo err >&2"),
		sh("exit3", "exit 3"),
		env,
		pwd,
		sh("signalled", "kill -KILL $$"),
		sh("leftover", "echo $$; sleep 100 & echo $!"),
	}
	for _, s := range specs {
		if err := x.Start(s); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]Result{}
	for range specs {
		select {
		case r := <-x.Results():
			got[r.Task] = r
		case <-time.After(deadline):
			t.Fatalf("results so far: %v", got)
		}
	}

	out := taskDir(dir, "out", 0)
	if r := got["out"]; r.ExitCode != 0 || r.Reason != "" || r.TimedOut || r.Killed || r.Started.IsZero() || r.Finished.Before(r.Started) {
		t.Errorf("out: %+v", r)
	}
	if s := readFile(t, filepath.Join(out, stdoutLog)); s != "out\n" {
		t.Errorf("stdout.log = %q", s)
	}
	if s := readFile(t, filepath.Join(out, stderrLog)); s != "err\n" {
		t.Errorf("stderr.log = %q", s)
	}
	if s := readFile(t, filepath.Join(out, outputLog)); s != "out\nerr\n" && s != "err\nout\n" {
		t.Errorf("output.log = %q", s)
	}
	// The shims are reaped, not left zombies.
	for _, s := range specs {
		p, err := readProcID(filepath.Join(taskDir(dir, s.Task, 0), pidFile))
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, s.Task+"'s shim to be reaped", func() bool { return !exists("/proc/" + strconv.Itoa(p.Pid)) })
	}
	onDisk, err := readResult(out)
	if err != nil || onDisk.ExitCode != 0 || onDisk.Task != "out" {
		t.Errorf("result.json: %+v, %v", onDisk, err)
	}

	if r := got["exit3"]; r.ExitCode != 3 || r.Signal != "" {
		t.Errorf("exit3: %+v", r)
	}

	work := filepath.Join(taskDir(dir, "env", 0), workDir)
	real, err := filepath.EvalSymlinks(work)
	if err != nil {
		t.Fatal(err)
	}
	if s, want := readFile(t, filepath.Join(taskDir(dir, "env", 0), stdoutLog)), "bar baz\n"+real+"\n"; s != want {
		t.Errorf("env: stdout %q, want %q", s, want)
	}
	pwdWork := filepath.Join(taskDir(dir, "pwd", 0), workDir)
	if s, want := readFile(t, filepath.Join(taskDir(dir, "pwd", 0), stdoutLog)), pwdWork+"\nx\n"+pwdWork+"\n"; s != want {
		t.Errorf("pwd: stdout %q, want %q", s, want)
	}

	if r := got["signalled"]; r.ExitCode != 137 || r.Signal != "SIGKILL" || r.Reason != "killed by SIGKILL" || r.Killed {
		t.Errorf("signalled: %+v", r)
	}

	// On a normal exit the group's leftovers are SIGKILLed too.
	ld := taskDir(dir, "leftover", 0)
	if r := got["leftover"]; r.ExitCode != 0 {
		t.Errorf("leftover: %+v", r)
	}
	pgid := pgidOf(t, ld)
	assertGroupGone(t, pgid)
	lines := strings.Fields(readFile(t, filepath.Join(ld, stdoutLog)))
	if len(lines) != 2 {
		t.Fatalf("leftover printed %q", lines)
	}
	sleeper, _ := strconv.Atoi(lines[1])
	if st, err := readProcStat(sleeper); err == nil && st.Pgrp == pgid {
		t.Errorf("the background sleep %d survived: %+v", sleeper, st)
	}
	if len(x.Running()) != 0 {
		t.Errorf("Running after all results: %+v", x.Running())
	}
}

func TestTimeoutKillsTheWholeGroup(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	polite := sh("polite", "echo $$; sleep 100 & echo $!; sleep 100 & echo $!; wait")
	stubborn := sh("stubborn", `trap "" TERM; echo $$; sleep 100`)
	for _, s := range []*Spec{&polite, &stubborn} {
		s.Timeout, s.Grace = 300*time.Millisecond, 200*time.Millisecond
		if err := x.Start(*s); err != nil {
			t.Fatal(err)
		}
	}

	r := waitResult(t, x, "polite")
	if !r.TimedOut || r.Killed || r.Reason != "timed out after 300ms" || r.ExitCode != 128+int(syscall.SIGTERM) {
		t.Errorf("polite: %+v", r)
	}
	pd := taskDir(dir, "polite", 0)
	assertGroupGone(t, pgidOf(t, pd))
	for _, s := range strings.Fields(readFile(t, filepath.Join(pd, stdoutLog)))[1:] {
		pid, _ := strconv.Atoi(s)
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("background sleep %d still there: %v", pid, err)
		}
	}

	// SIGTERM is ignored (by sleep too: ignored signals survive exec), so
	// only SIGKILL after the grace ends it.
	r = waitResult(t, x, "stubborn")
	if !r.TimedOut || r.ExitCode != 137 || r.Signal != "SIGKILL" || r.Reason != "timed out after 300ms" {
		t.Errorf("stubborn: %+v", r)
	}
	if d := r.Finished.Sub(r.Started); d < 500*time.Millisecond {
		t.Errorf("stubborn ended %v after it started; want timeout+grace = 500ms at least", d)
	}
	assertGroupGone(t, pgidOf(t, taskDir(dir, "stubborn", 0)))
}

func TestKillStopsTheGroupWithTheReason(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	s := sh("victim", "echo $$; sleep 100")
	s.Grace = 20 * time.Second // ends on SIGTERM, long before
	if err := x.Start(s); err != nil {
		t.Fatal(err)
	}
	vd := taskDir(dir, "victim", 0)
	waitFor(t, "the command to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(vd, stdoutLog))
		return strings.HasSuffix(string(b), "\n")
	})
	if run := x.Running(); len(run) != 1 || run[0].Task != "victim" {
		t.Errorf("Running = %+v", run)
	}
	x.Kill("no-such-task", "whatever")
	x.Kill("victim", "preempted by x")
	r := waitResult(t, x, "victim")
	if !r.Killed || r.TimedOut || !strings.Contains(r.Reason, "preempted by x") || r.ExitCode != 143 || r.Signal != "SIGTERM" {
		t.Errorf("victim: %+v", r)
	}
	if d := r.Finished.Sub(r.Started); d > 15*time.Second {
		t.Errorf("victim took %v: the grace was waited out", d)
	}
	assertGroupGone(t, pgidOf(t, vd))
	x.Kill("victim", "again") // finished: no-op

	// Killed at once, maybe before the shim handles SIGTERM: the kill
	// file covers that.
	if err := x.Start(sh("early", "sleep 100")); err != nil {
		t.Fatal(err)
	}
	x.Kill("early", "cancelled")
	r = waitResult(t, x, "early")
	if !r.Killed || !strings.Contains(r.Reason, "cancelled") {
		t.Errorf("early: %+v", r)
	}
	if g, err := readProcID(filepath.Join(taskDir(dir, "early", 0), pgidFile)); err == nil {
		assertGroupGone(t, g.Pid)
	}
}

func TestAgentCrashAdoptsTheTaskAndRedeliversUnackedResults(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(t.TempDir(), "gate")
	x1 := newExec(t, dir)
	s := sh("survivor", `while [ ! -e "$GATE" ]; do sleep 0.02; done; echo done`)
	s.Env = map[string]string{"GATE": gate}
	if err := x1.Start(s); err != nil {
		t.Fatal(err)
	}
	closeAndCheck(t, x1) // the agent dies; the shim must not

	x2 := newExec(t, dir)
	if err := x2.Recover(); err != nil {
		t.Fatal(err)
	}
	if run := x2.Running(); len(run) != 1 || run[0].Task != "survivor" || run[0].Command[2] != s.Command[2] {
		t.Fatalf("Running after Recover = %+v", run)
	}
	if err := x2.Start(s); err != nil { // idempotent: already there
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, x2, "survivor")
	if r.ExitCode != 0 || r.Killed || r.TimedOut || r.Reason != "" {
		t.Errorf("survivor: %+v", r)
	}
	if s := readFile(t, filepath.Join(taskDir(dir, "survivor", 0), outputLog)); s != "done\n" {
		t.Errorf("output.log = %q", s)
	}
	if len(x2.Running()) != 0 {
		t.Errorf("Running = %+v", x2.Running())
	}
	closeAndCheck(t, x2)

	// Not acked: delivered again.
	x3 := newExec(t, dir)
	for range 2 { // against the contract, but still once per executor
		if err := x3.Recover(); err != nil {
			t.Fatal(err)
		}
	}
	if r := waitResult(t, x3, "survivor"); r.ExitCode != 0 || r.Attempt != 0 {
		t.Errorf("redelivered: %+v", r)
	}
	if err := x3.Start(sh("marker3", "true")); err != nil {
		t.Fatal(err)
	}
	if r := nextResult(t, x3); r.Task != "marker3" {
		t.Errorf("a result was delivered twice: %+v", r)
	}
	if err := x3.Ack("marker3", 0); err != nil {
		t.Fatal(err)
	}
	if err := x3.Ack("survivor", 0); err != nil {
		t.Fatal(err)
	}
	if err := x3.Ack("nothing", 0); err == nil {
		t.Error("Ack of an attempt without a result succeeded")
	}
	closeAndCheck(t, x3)

	// Acked: not delivered. Recover queues before Start, so the marker's
	// result comes after any recovered one.
	x4 := newExec(t, dir)
	if err := x4.Recover(); err != nil {
		t.Fatal(err)
	}
	if err := x4.Start(sh("marker", "true")); err != nil {
		t.Fatal(err)
	}
	if r := nextResult(t, x4); r.Task != "marker" {
		t.Errorf("an acked result was delivered again: %+v", r)
	}
	if err := x4.Remove("survivor", 0); err != nil {
		t.Fatal(err)
	}
	if exists(taskDir(dir, "survivor", 0)) {
		t.Error("Remove left the directory")
	}
	if err := x4.Start(sh("long", "sleep 100")); err != nil {
		t.Fatal(err)
	}
	if err := x4.Remove("long", 0); err == nil {
		t.Error("Remove of a running attempt succeeded")
	}
	x4.Kill("long", "test over")
	waitResult(t, x4, "long")
}

func TestShimKilledMakesTheAttemptLostAndKillsTheOrphans(t *testing.T) {
	dir := t.TempDir()
	x1 := newExec(t, dir)
	if err := x1.Start(sh("orphaned", "echo $$; sleep 100")); err != nil {
		t.Fatal(err)
	}
	od := taskDir(dir, "orphaned", 0)
	waitFor(t, "the command to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(od, stdoutLog))
		return strings.HasSuffix(string(b), "\n") && exists(filepath.Join(od, pgidFile))
	})
	pgid := pgidOf(t, od)
	shimPid, err := readProcID(filepath.Join(od, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	closeAndCheck(t, x1)
	if err := syscall.Kill(shimPid.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The shim is this process's child: reap it, as an agent that died
	// would no longer be its parent.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(shimPid.Pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	if len(liveMembers(pgid)) == 0 {
		t.Fatal("the command died with the shim; nothing to test")
	}

	x2 := newExec(t, dir)
	if err := x2.Recover(); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, x2, "orphaned")
	if r.ExitCode != -1 || r.Reason != LostReason || r.Killed {
		t.Errorf("orphaned: %+v", r)
	}
	if onDisk, err := readResult(od); err != nil || onDisk.Reason != LostReason {
		t.Errorf("result.json: %+v, %v", onDisk, err)
	}
	// Its parent is gone, so zombies may stay until init reaps them.
	waitFor(t, "the orphaned group to die", func() bool { return len(liveMembers(pgid)) == 0 })
	if len(x2.Running()) != 0 {
		t.Errorf("Running = %+v", x2.Running())
	}
}

func TestOpenLog(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	first := sh("chatty", "for i in 1 2 3 4 5; do echo line$i; sleep 0.1; done; echo bye >&2")
	first.Attempt = 1
	if err := x.Start(first); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	rc, err := x.OpenLog(ctx, "chatty", -1, "", true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc)
	_ = rc.Close()
	if want := "line1\nline2\nline3\nline4\nline5\nbye\n"; err != nil || string(b) != want {
		t.Errorf("followed output %q, %v; want %q", b, err, want)
	}
	waitResult(t, x, "chatty")

	rc, err = x.OpenLog(ctx, "chatty", -1, "stderr", false)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(rc); err != nil || string(b) != "bye\n" {
		t.Errorf("stderr %q, %v", b, err)
	}
	_ = rc.Close()

	// The latest attempt is read unless one is named (attempt 0 too,
	// which once read the latest).
	s := sh("chatty", "echo second")
	s.Attempt = 2
	if err := x.Start(s); err != nil {
		t.Fatal(err)
	}
	waitResult(t, x, "chatty")
	zeroth := sh("chatty", "echo zeroth")
	if err := x.Start(zeroth); err != nil {
		t.Fatal(err)
	}
	waitResult(t, x, "chatty")
	for attempt, want := range map[int]string{1: "line1\n", 2: "second\n", -1: "second\n", 0: "zeroth\n"} {
		rc, err := x.OpenLog(ctx, "chatty", attempt, "stdout", true)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil || !strings.HasPrefix(string(b), want) {
			t.Errorf("attempt %d: %q, %v", attempt, b, err)
		}
	}

	if _, err := x.OpenLog(ctx, "nobody", -1, "", false); !errors.Is(err, ErrNoLog) {
		t.Errorf("unknown task: %v", err)
	}
	if _, err := x.OpenLog(ctx, "chatty", 7, "", false); !errors.Is(err, ErrNoLog) {
		t.Errorf("unknown attempt: %v", err)
	}
	if _, err := x.OpenLog(ctx, "chatty", -1, "stdin", false); err == nil {
		t.Error("unknown stream accepted")
	}

	// Following a task that runs on ends with the context.
	if err := x.Start(sh("quiet", "sleep 100")); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	rc, err = x.OpenLog(short, "quiet", -1, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("follow with an ending context: %v", err)
	}
	_ = rc.Close()
	x.Kill("quiet", "test over")
	waitResult(t, x, "quiet")
}

func TestCommandThatCannotStart(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	if err := x.Start(Spec{Task: "missing", Command: []string{"no-such-command-hetsched"}}); err != nil {
		t.Fatal(err)
	}
	r := waitResult(t, x, "missing")
	if r.ExitCode != 127 || !strings.Contains(r.Reason, "not found") || !strings.Contains(r.Reason, "no-such-command-hetsched") {
		t.Errorf("missing: %+v", r)
	}
	if err := x.Start(Spec{Task: "nopath", Command: []string{"/no/such/file"}}); err != nil {
		t.Fatal(err)
	}
	r = waitResult(t, x, "nopath")
	if r.ExitCode != 127 || !strings.Contains(r.Reason, "/no/such/file") {
		t.Errorf("nopath: %+v", r)
	}
}

func TestStartValidatesAndIsIdempotent(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	for _, id := range []string{"../x", "", "a/b", ".", "..", "-a", "a-", "a b", "/abs", strings.Repeat("a", 254)} {
		if err := x.Start(sh(id, "true")); err == nil {
			t.Errorf("task id %q accepted", id)
		}
	}
	if err := x.Start(Spec{Task: "empty"}); err == nil {
		t.Error("empty command accepted")
	}
	if err := x.Start(Spec{Task: "neg", Attempt: -1, Command: []string{"true"}}); err == nil {
		t.Error("negative attempt accepted")
	}
	entries, _ := os.ReadDir(filepath.Join(dir, "tasks"))
	if len(entries) != 0 || exists(filepath.Join(dir, "x_0")) {
		t.Errorf("rejected specs left directories: %v", entries)
	}

	ok := sh("job-1.a:b_c", "echo once")
	ok.Attempt = 2
	ok.Task = strings.Repeat("a", 240) + ok.Task
	if launched, err := x.Launch(ok); err != nil || !launched {
		t.Fatalf("first Launch: %v, %v; want launched", launched, err)
	}
	if launched, err := x.Launch(ok); err != nil || launched {
		t.Fatalf("second Launch: %v, %v; want a no-op", launched, err)
	}
	r := waitResult(t, x, ok.Task)
	if r.Attempt != 2 || r.ExitCode != 0 {
		t.Errorf("result %+v", r)
	}
	if launched, err := x.Launch(ok); err != nil || launched { // finished: still a no-op
		t.Fatalf("Launch of a finished attempt: %v, %v; want a no-op", launched, err)
	}
	if err := x.Start(ok); err != nil {
		t.Fatal(err)
	}
	if err := x.Start(sh("marker", "true")); err != nil {
		t.Fatal(err)
	}
	if r := nextResult(t, x); r.Task != "marker" {
		t.Errorf("a second result: %+v", r)
	}
	if s := readFile(t, filepath.Join(taskDir(dir, ok.Task, 2), outputLog)); s != "once\n" {
		t.Errorf("output %q: the attempt ran more than once", s)
	}
}

// TestKillAttemptSparesOtherAttempts: killing attempt 0 of a task leaves
// its attempt 1 running.
func TestKillAttemptSparesOtherAttempts(t *testing.T) {
	x := newExec(t, t.TempDir())
	a0, a1 := sh("twice", "sleep 30"), sh("twice", "sleep 30")
	a1.Attempt = 1
	for _, s := range []Spec{a0, a1} {
		if err := x.Start(s); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "both attempts running", func() bool { return len(x.Running()) == 2 })
	x.KillAttempt("twice", 0, "revoked")
	r := nextResult(t, x)
	if r.Attempt != 0 || !r.Killed || !strings.Contains(r.Reason, "revoked") {
		t.Fatalf("result %+v", r)
	}
	if run := x.Running(); len(run) != 1 || run[0].Attempt != 1 {
		t.Fatalf("running after killing attempt 0: %+v", run)
	}
	x.Kill("twice", "done")
	if r := nextResult(t, x); r.Attempt != 1 || !r.Killed {
		t.Fatalf("result %+v", r)
	}
}

// TestFenceFileKillsAtTheDeadline: a shim whose fence file's deadline has
// passed SIGKILLs its task at once, with a fenced reason; a later deadline
// leaves it running.
func TestFenceFileKillsAtTheDeadline(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	fence := filepath.Join(dir, "fence")
	if err := WriteFence(fence, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	s := sh("fenced", "trap '' TERM; sleep 30")
	s.FenceFile = fence
	s.Grace = time.Minute
	opens := watchOpens(t, dir, "fence")
	if err := x.Start(s); err != nil {
		t.Fatal(err)
	}
	// The shim opens the fence file once per check and only goes on
	// checking while the deadline is ahead: a 4th open proves that 3
	// checks saw the future deadline and let the task run.
	for i := 0; i < 4; i++ {
		select {
		case <-opens:
		case r := <-x.Results():
			t.Fatalf("killed before its deadline: %+v", r)
		case <-time.After(deadline):
			t.Fatalf("the shim opened the fence file %d times within %v", i, deadline)
		}
	}
	if len(x.Running()) != 1 || exists(filepath.Join(taskDir(dir, "fenced", 0), resultFile)) {
		t.Fatal("killed before its deadline")
	}
	if err := WriteFence(fence, time.Now().Add(-time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	r := nextResult(t, x)
	if !r.Killed || !strings.HasPrefix(r.Reason, FencedPrefix) || r.Signal != "SIGKILL" {
		t.Fatalf("result %+v", r)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("fenced after %v despite a 1-minute grace", took)
	}
}

// TestQuietWaitsForTheShimToExit: Quiet holds only once a killed
// attempt's shim has written its result and exited (and was reaped).
func TestQuietWaitsForTheShimToExit(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	if !x.Quiet() {
		t.Fatal("a new executor is not quiet")
	}
	if err := x.Start(sh("q", "sleep 30")); err != nil {
		t.Fatal(err)
	}
	if x.Quiet() {
		t.Fatal("quiet with an attempt running")
	}
	d := taskDir(dir, "q", 0)
	waitFor(t, "shim.pid", func() bool { return exists(filepath.Join(d, pidFile)) })
	p, err := readProcID(filepath.Join(d, pidFile))
	if err != nil {
		t.Fatal(err)
	}
	x.Kill("q", "stop")
	waitFor(t, "quiet", x.Quiet)
	if !exists(filepath.Join(d, resultFile)) {
		t.Error("quiet before the result was written")
	}
	if st, err := readProcStat(p.Pid); err == nil && st.Start == p.Start {
		t.Errorf("quiet while the shim %d is still there (not exited or not reaped)", p.Pid)
	}
}

// watchOpens reports on the channel each time a process opens dir/name
// (inotify IN_OPEN on dir, so that a file renamed over name is watched
// too). It stops when the test ends.
func watchOpens(t *testing.T, dir, name string) <-chan struct{} {
	t.Helper()
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(fd), "inotify") // pollable: Close ends the Read
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_OPEN); err != nil {
		f.Close()
		t.Fatal(err)
	}
	out := make(chan struct{}, 64)
	done := make(chan struct{})
	t.Cleanup(func() { f.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 64*(syscall.SizeofInotifyEvent+syscall.NAME_MAX+1))
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+syscall.SizeofInotifyEvent <= n; {
				ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
				raw := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
				off += syscall.SizeofInotifyEvent + int(ev.Len)
				if string(bytes.TrimRight(raw, "\x00")) == name {
					select {
					case out <- struct{}{}:
					default: // the test stopped counting
					}
				}
			}
		}
	}()
	return out
}

// TestKillNowSkipsTheGrace: a command that ignores SIGTERM, killed with a
// long grace, ends at once on KillNow (SIGKILL to its group), with the
// kill's reason; an attempt killed before its command started never
// starts it.
func TestKillNowSkipsTheGrace(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	s := sh("stubborn", "trap '' TERM; echo $$; while :; do sleep 0.05; done")
	s.Grace = time.Hour
	if err := x.Start(s); err != nil {
		t.Fatal(err)
	}
	sd := taskDir(dir, "stubborn", 0)
	waitFor(t, "the command to start", func() bool {
		b, _ := os.ReadFile(filepath.Join(sd, stdoutLog))
		return strings.HasSuffix(string(b), "\n")
	})
	x.Kill("stubborn", "agent stopped") // SIGTERM, ignored; the grace is an hour
	if n := x.KillNow("agent stopped"); n != 1 {
		t.Fatalf("KillNow signalled %d groups, want 1", n)
	}
	r := waitResult(t, x, "stubborn")
	if !r.Killed || r.Signal != "SIGKILL" || r.ExitCode != 137 || !strings.Contains(r.Reason, "agent stopped") {
		t.Fatalf("stubborn: %+v", r)
	}
	assertGroupGone(t, pgidOf(t, sd))
	if n := x.KillNow("again"); n != 0 {
		t.Fatalf("KillNow with nothing running signalled %d", n)
	}
}

// TestRelativeDirRuns: a relative work dir (hetsched agent --work-dir
// rel) runs commands: the shims get absolute attempt directories.
func TestRelativeDirRuns(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	x := newExec(t, "rel")
	if err := x.Start(sh("here", "echo ok")); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, x, "here"); r.ExitCode != 0 || r.Reason != "" {
		t.Fatalf("a task in a relative work dir: %+v", r)
	}
	if s := readFile(t, filepath.Join(taskDir(filepath.Join(base, "rel"), "here", 0), stdoutLog)); s != "ok\n" {
		t.Fatalf("stdout %q", s)
	}
}

// TestFenceDeadlineComesFirst: a fence falls FenceMargin before the
// server's re-queue deadline, more than a shim's poll, and never before
// the heartbeat was sent.
func TestFenceDeadlineComesFirst(t *testing.T) {
	sent := time.Unix(1000, 0)
	for _, d := range []time.Duration{6 * time.Second, 3 * time.Second, 400 * time.Millisecond, 0} {
		f := FenceDeadline(sent, d)
		if f.After(sent.Add(d-fencePoll)) && d >= 2*FenceMargin || f.Before(sent) {
			t.Errorf("deadline %v: fence %v after the heartbeat, want at least a poll (%v) before the deadline and not before the heartbeat", d, f.Sub(sent), fencePoll)
		}
	}
	if got := FenceDeadline(sent, 3*time.Second); got != sent.Add(3*time.Second-FenceMargin) {
		t.Errorf("fence %v after the heartbeat, want %v", got.Sub(sent), 3*time.Second-FenceMargin)
	}
}

// TestCheckpointStopsWithTheTasksSignalInASharedWorkDir: a checkpoint stop
// sends the spec's signal (the command saves its progress and exits in
// the grace) and the next attempt works in the same directory; a plain
// kill of the same spec still sends SIGTERM; a command that ignores the
// signal is SIGKILLed when the checkpoint grace passes, and the stop says
// so.
func TestCheckpointStopsWithTheTasksSignalInASharedWorkDir(t *testing.T) {
	dir := t.TempDir()
	x := newExec(t, dir)
	work := filepath.Join(t.TempDir(), "shared")
	script := `n=$(cat progress 2>/dev/null || echo 0); echo "attempt $HETSCHED_ATTEMPT_TEST from $n in $PWD"
trap 'echo $n > progress; echo saved $n; exit 0' USR1
trap 'echo got TERM; exit 3' TERM
s=$n; while :; do n=$((n+1)); [ $n -eq $((s+1)) ] && echo stepped; sleep 0.02; done`
	spec := func(attempt int) Spec {
		s := sh("ckpt", script)
		s.Attempt = attempt
		s.Env = map[string]string{"HETSCHED_ATTEMPT_TEST": strconv.Itoa(attempt)}
		s.CheckpointSignal, s.CheckpointGrace, s.Grace, s.WorkDir = "SIGUSR1", 20*time.Second, 20*time.Second, work
		s.Devices = []string{"nvidia.com/gpu:0"}
		return s
	}
	started := func(attempt int) {
		waitFor(t, "attempt "+strconv.Itoa(attempt)+" to start", func() bool {
			b, _ := os.ReadFile(filepath.Join(taskDir(dir, "ckpt", attempt), stdoutLog))
			return strings.Contains(string(b), "in "+work) && strings.Contains(string(b), "stepped")
		})
	}
	if err := x.Start(spec(0)); err != nil {
		t.Fatal(err)
	}
	started(0)
	if run := x.Running(); len(run) != 1 || !slices.Equal(run[0].Devices, []string{"nvidia.com/gpu:0"}) {
		t.Errorf("Running = %+v, want the attempt with its devices", run)
	}
	x.CheckpointAttempt("ckpt", 0, "preempted by t2")
	r := waitResult(t, x, "ckpt")
	if !r.Killed || r.ExitCode != 0 || r.Stop == nil || r.Stop.Signal != "SIGUSR1" || !r.Stop.Checkpoint || r.Stop.Forced ||
		r.Stop.Exited.Before(r.Stop.Sent) || r.Stop.Took() > 15*time.Second {
		t.Fatalf("the checkpoint stop: %+v stop %+v", r, r.Stop)
	}
	saved := strings.TrimSpace(readFile(t, filepath.Join(work, "progress")))
	if n, err := strconv.Atoi(saved); err != nil || n <= 0 {
		t.Fatalf("progress after the checkpoint = %q, want a positive count", saved)
	}

	if err := x.Start(spec(1)); err != nil {
		t.Fatal(err)
	}
	started(1)
	if out := readFile(t, filepath.Join(taskDir(dir, "ckpt", 1), stdoutLog)); !strings.Contains(out, "attempt 1 from "+saved+" in ") {
		t.Errorf("attempt 1 did not resume from %s: %q", saved, out)
	}
	x.KillAttempt("ckpt", 1, "cancelled by request") // not a checkpoint: SIGTERM
	r = waitResult(t, x, "ckpt")
	if r.ExitCode != 3 || r.Stop == nil || r.Stop.Signal != "SIGTERM" || r.Stop.Checkpoint {
		t.Errorf("a cancel of a checkpointed task: %+v stop %+v, want SIGTERM (exit 3)", r, r.Stop)
	}

	stubborn := sh("stubborn", "trap '' USR1; echo up; while :; do sleep 0.05; done")
	stubborn.CheckpointSignal, stubborn.CheckpointGrace, stubborn.Grace = "SIGUSR1", 300*time.Millisecond, time.Minute
	if err := x.Start(stubborn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "stubborn to start", func() bool {
		return strings.Contains(readFile(t, filepath.Join(taskDir(dir, "stubborn", 0), stdoutLog)), "up")
	})
	x.Checkpoint("stubborn", "preempted by t3")
	r = waitResult(t, x, "stubborn")
	if r.Signal != "SIGKILL" || r.Stop == nil || !r.Stop.Forced || r.Stop.Took() < 300*time.Millisecond || r.Stop.Took() > 30*time.Second {
		t.Errorf("a command ignoring its checkpoint signal: %+v stop %+v, want SIGKILL after 300ms", r, r.Stop)
	}
}

func TestSpecValidatesTheCheckpoint(t *testing.T) {
	x := newExec(t, t.TempDir())
	for _, s := range []Spec{
		{Task: "a", Command: []string{"true"}, CheckpointSignal: "SIGKILL"},
		{Task: "a", Command: []string{"true"}, CheckpointGrace: -1},
		{Task: "a", Command: []string{"true"}, WorkDir: "relative/dir"},
	} {
		if err := x.Start(s); err == nil {
			t.Errorf("Start(%+v) = nil, want an error", s)
		}
	}
}
