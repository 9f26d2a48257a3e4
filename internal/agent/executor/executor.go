// Package executor runs a node agent's task commands so that they survive
// an agent crash, are killed as a whole process group, and leave their
// logs and exit status on disk.
//
// Each task attempt gets a shim process (RunShim, the agent binary's
// hidden subcommand) in its own session, which runs the command in its own
// process group, copies its output to log files, enforces its timeout and
// writes result.json. The agent only starts shims, signals them, and
// watches their directories; a restarted agent finds everything again with
// Recover.
//
// On disk, under Options.Dir:
//
//	tasks/<task>_<attempt>/   one attempt; created by Start, the attempt's claim
//	  spec.json    the Spec (agent, before the shim starts)
//	  shim.log     the shim's own log (its stdout and stderr)
//	  shim.pid     "PID STARTTIME" of the shim (shim, once it handles SIGTERM)
//	  pgid         "PGID STARTTIME" of the command's group leader (shim)
//	  work/        the command's working directory (shim)
//	  stdout.log, stderr.log, output.log   the command's output (shim;
//	               created empty by Start)
//	  kill         the reason for a Kill (agent, before it signals the shim)
//	  restart      the reason for a Restart (agent, before its SIGHUP)
//	  runs         the restarts of a Restart spec (shim; restart.go)
//	  result.json  the Result (shim; or the agent for a lost attempt; the
//	               first one written wins)
//	  acked        the Result was reported (agent, Ack)
//
// Contracts:
//   - Every file but the logs is written atomically and durably (temporary
//     file, fsync, rename or link, fsync of the directory).
//   - Close stops watching; it never kills a task. Tasks outlive the agent
//     by design, and a later executor adopts them with Recover.
//   - Each attempt's Result is delivered on Results at most once per
//     Executor; a Result that was not Acked is delivered again by the next
//     executor's Recover.
//   - A shim that died without a result (reboot, SIGKILL) makes its
//     attempt "lost" (ExitCode -1); the command's process group, if still
//     there, is SIGKILLed.
package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"syscall"
	"time"
)

// Spec is one attempt of a task: what to run and for how long. In JSON
// (spec.json) the durations are nanoseconds.
type Spec struct {
	Task    string            `json:"task"`
	Attempt int               `json:"attempt"`
	Command []string          `json:"command"`
	Env     map[string]string `json:"env,omitempty"`
	Timeout time.Duration     `json:"timeout,omitempty"` // 0: none
	Grace   time.Duration     `json:"grace,omitempty"`   // SIGTERM→SIGKILL; 0 means 10s
	// FenceFile, when set, names a file holding a deadline (see
	// WriteFence); the shim SIGKILLs the task's group once it passes.
	FenceFile string `json:"fenceFile,omitempty"`
	// CheckpointSignal and CheckpointGrace replace SIGTERM and Grace when
	// the attempt is stopped to resume later (Executor.Checkpoint); empty
	// and 0: SIGTERM and Grace.
	CheckpointSignal string        `json:"checkpointSignal,omitempty"`
	CheckpointGrace  time.Duration `json:"checkpointGrace,omitempty"`
	// WorkDir, when set, is the command's working directory (an absolute
	// path the shim creates if missing) instead of the attempt's own
	// work/: the directory the attempts of a checkpointed task share.
	WorkDir string `json:"workDir,omitempty"`
	// Devices are the devices the attempt holds (type:id), so that an
	// agent can tell which attempts a new one must wait for.
	Devices []string `json:"devices,omitempty"`
	// Restart runs the command again when it exits, and on the agent's
	// Restart, until it is stopped (restart.go): a service's replica.
	Restart bool `json:"restart,omitempty"`
}

// Result is how an attempt ended; it is also the format of result.json.
type Result struct {
	Task     string `json:"task"`
	Attempt  int    `json:"attempt"`
	ExitCode int    `json:"exitCode"` // 128+signo when a signal ended it; 127: could not start; -1: lost
	TimedOut bool   `json:"timedOut"`
	Killed   bool   `json:"killed"` // stopped by Kill (cancel, preemption, revoke)
	Signal   string `json:"signal"` // "SIGKILL" when a signal ended the command, else ""
	Reason   string `json:"reason"`
	// Started is when the command started (when the shim gave up, for one
	// that never ran; the spec's write time for a lost attempt).
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Stop, for a command the shim stopped (a kill or a timeout), says
	// how: the signal, when it was sent, when the command's leader exited
	// and whether the grace ran out (SIGKILL).
	Stop *Stop `json:"stop,omitempty"`
}

// Stop is how the shim stopped a command.
type Stop struct {
	Signal string    `json:"signal"`
	Sent   time.Time `json:"sent"`
	Exited time.Time `json:"exited"`
	Forced bool      `json:"forced"` // the grace passed: SIGKILL
	// Checkpoint: the attempt was stopped to resume later, with the
	// spec's checkpoint signal and grace.
	Checkpoint bool `json:"checkpoint,omitempty"`
}

// Took is how long the command took to exit after the signal.
func (s *Stop) Took() time.Duration { return max(s.Exited.Sub(s.Sent), 0) }

// LostReason is the Reason of an attempt whose shim died without a result.
const LostReason = "lost: the shim died without a result"

// ErrNoLog is returned by OpenLog for a task or attempt with no directory.
var ErrNoLog = errors.New("executor: no such task attempt")

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("executor: closed")

// launchWait is how long an attempt whose shim has not written shim.pid
// yet counts as starting (after spec.json was written) before it is lost.
const launchWait = 10 * time.Second

// Options configure an Executor.
type Options struct {
	Dir string // work dir; tasks live in Dir/tasks/<task>_<attempt>/
	// Shim is the argv prefix that starts a shim; the attempt's directory
	// is appended. Default: this executable with "agent-shim".
	Shim []string
	// ShimEnv is added to the agent's environment for the shim (and so for
	// the command).
	ShimEnv []string
	Logger  *slog.Logger
	// Poll is how often shims this executor did not start are checked;
	// default 500ms. Shims it started are also checked when they exit.
	Poll time.Duration
}

// Executor starts and watches task attempts. Its methods are safe for
// concurrent use.
type Executor struct {
	tasks   string // Dir/tasks
	shim    []string
	shimEnv []string
	log     *slog.Logger
	poll    time.Duration

	mu    sync.Mutex
	live  map[key]*attempt // watched: no result seen yet
	sent  map[key]bool     // results queued in this executor's life
	queue []Result         // results not yet on the channel
	// exiting are finished attempts' shims, until reaped or gone.
	exiting []procID
	closed  bool

	wake    chan struct{} // check the live attempts now
	queued  chan struct{} // the queue grew
	results chan Result
	sigchld chan os.Signal
	done    chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

type key struct {
	task    string
	attempt int
}

// attempt is a watched attempt. Only the watch goroutine changes it after
// it is in live, and then only shim.
type attempt struct {
	spec Spec
	dir  string
	shim procID // Pid 0: the shim has not written shim.pid yet
	// launched bounds the wait for shim.pid of an adopted attempt.
	launched time.Time
}

// New makes an Executor over o.Dir and starts its watcher. Call Recover
// next, then Start.
func New(o Options) (*Executor, error) {
	if o.Dir == "" {
		return nil, errors.New("executor: Options.Dir is empty")
	}
	shim := o.Shim
	if len(shim) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("executor: finding the shim: %w", err)
		}
		shim = []string{exe, "agent-shim"}
	}
	// The shims get attempt directories as arguments and run in them: a
	// relative path would not name them from there.
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	tasks := filepath.Join(dir, "tasks")
	if err := os.MkdirAll(tasks, 0o755); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	poll := o.Poll
	if poll <= 0 {
		poll = 500 * time.Millisecond
	}
	x := &Executor{
		tasks:   tasks,
		shim:    append([]string(nil), shim...),
		shimEnv: append([]string(nil), o.ShimEnv...),
		log:     log,
		poll:    poll,
		live:    map[key]*attempt{},
		sent:    map[key]bool{},
		wake:    make(chan struct{}, 1),
		queued:  make(chan struct{}, 1),
		results: make(chan Result, 16),
		sigchld: make(chan os.Signal, 1),
		done:    make(chan struct{}),
	}
	signal.Notify(x.sigchld, syscall.SIGCHLD)
	x.wg.Add(2)
	go x.watch()
	go x.forward()
	return x, nil
}

func (s Spec) validate() error {
	if !validTaskID(s.Task) {
		return fmt.Errorf("executor: invalid task id %q", s.Task)
	}
	if s.Attempt < 0 {
		return fmt.Errorf("executor: task %s: negative attempt %d", s.Task, s.Attempt)
	}
	if len(s.Command) == 0 || s.Command[0] == "" {
		return fmt.Errorf("executor: task %s: empty command", s.Task)
	}
	if s.Timeout < 0 || s.Grace < 0 || s.CheckpointGrace < 0 {
		return fmt.Errorf("executor: task %s: negative timeout or grace", s.Task)
	}
	if s.CheckpointSignal != "" {
		if _, ok := signalNamed(s.CheckpointSignal); !ok {
			return fmt.Errorf("executor: task %s: unknown checkpoint signal %q", s.Task, s.CheckpointSignal)
		}
	}
	if s.WorkDir != "" && !filepath.IsAbs(s.WorkDir) {
		return fmt.Errorf("executor: task %s: the work directory %q is not absolute", s.Task, s.WorkDir)
	}
	return nil
}

// SharedWorkDir is the work directory the attempts of task on this
// executor share (Spec.WorkDir): Options.Dir/work/<task>.
func (x *Executor) SharedWorkDir(task string) string {
	return filepath.Join(filepath.Dir(x.tasks), "work", task)
}

func (x *Executor) dir(task string, attempt int) string {
	return filepath.Join(x.tasks, attemptName(task, attempt))
}

// Start runs spec unless that task attempt already has a task dir (then it
// is a no-op returning nil: idempotent, the reconcile path relies on it).
// Errors: an invalid spec (bad task id, empty command), directories that
// cannot be made, a shim that cannot start; after an error the attempt has
// no directory, so Start may be retried.
func (x *Executor) Start(spec Spec) error {
	_, err := x.Launch(spec)
	return err
}

// Launch is Start that also says whether it started the attempt's shim
// (false: the attempt already had a task dir, or an error).
func (x *Executor) Launch(spec Spec) (launched bool, err error) {
	if err := spec.validate(); err != nil {
		return false, err
	}
	x.mu.Lock()
	closed := x.closed
	x.mu.Unlock()
	if closed {
		return false, ErrClosed
	}
	dir := x.dir(spec.Task, spec.Attempt)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("executor: %w", err)
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
			err = fmt.Errorf("executor: starting %s: %w", attemptName(spec.Task, spec.Attempt), err)
		}
	}()
	if err := syncDir(x.tasks); err != nil {
		return false, err
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return false, err
	}
	if err := writeFileAtomic(dir, specFile, b); err != nil {
		return false, err
	}
	for _, name := range []string{stdoutLog, stderrLog, outputLog} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return false, err
		}
		_ = f.Close()
	}
	out, err := os.OpenFile(filepath.Join(dir, shimLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return false, err
	}
	defer func() { _ = out.Close() }()
	args := append(append([]string(nil), x.shim[1:]...), dir)
	cmd := exec.Command(x.shim[0], args...)
	cmd.Env = append(os.Environ(), x.shimEnv...)
	cmd.Dir = dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // the shim setsids too; this closes the gap
	if err := cmd.Start(); err != nil {
		return false, err
	}
	a := &attempt{spec: spec, dir: dir, shim: procID{Pid: cmd.Process.Pid}, launched: time.Now()}
	// Unreaped, so /proc has it even if it exited already.
	if st, err := readProcStat(a.shim.Pid); err == nil {
		a.shim.Start = st.Start
	}
	_ = cmd.Process.Release() // reaped by alive, never by cmd.Wait
	x.mu.Lock()
	x.live[key{spec.Task, spec.Attempt}] = a
	x.mu.Unlock()
	x.poke() // its SIGCHLD may have come before it was in live
	x.log.Info("task started", "task", spec.Task, "attempt", spec.Attempt, "shimPid", a.shim.Pid)
	return true, nil
}

// Kill stops the task's running attempts (any attempt) with reason; see
// KillAttempt.
func (x *Executor) Kill(task, reason string) { x.kill(task, -1, reason, false) }

// Checkpoint stops the task's running attempts (any attempt) to resume
// later: as Kill, but with the spec's CheckpointSignal and
// CheckpointGrace, and the Result's Stop says Checkpoint.
func (x *Executor) Checkpoint(task, reason string) { x.kill(task, -1, reason, true) }

// CheckpointAttempt is Checkpoint for one attempt.
func (x *Executor) CheckpointAttempt(task string, attempt int, reason string) {
	x.kill(task, attempt, reason, true)
}

// KillAttempt stops one attempt of a task with reason: it writes the kill
// file, then SIGTERMs the shim, which stops the group with the spec's
// grace. A shim that has not written shim.pid yet is not signalled: it
// reads the kill file before it starts the command. Unknown or finished
// attempt: no-op.
func (x *Executor) KillAttempt(task string, attempt int, reason string) {
	x.kill(task, attempt, reason, false)
}

// KillNow stops every running attempt at once: it writes each one's kill
// file and SIGKILLs its command's process group, without the grace (the
// second Ctrl-C of `hetsched up`). The shims then see their command die
// and write their results as for any kill. An attempt whose command has
// not started reads the kill file first and never starts it; one whose
// group is not recorded yet gets Kill's SIGTERM to its shim, so calling
// KillNow again shortly after catches it. It returns how many groups it
// signalled.
func (x *Executor) KillNow(reason string) int {
	x.mu.Lock()
	targets := make([]*attempt, 0, len(x.live))
	for _, a := range x.live {
		targets = append(targets, a)
	}
	x.mu.Unlock()
	n := 0
	for _, a := range targets {
		log := x.log.With("task", a.spec.Task, "attempt", a.spec.Attempt, "reason", reason)
		if _, err := os.Stat(filepath.Join(a.dir, killFile)); errors.Is(err, fs.ErrNotExist) {
			if err := writeFileAtomic(a.dir, killFile, []byte(reason+"\n")); err != nil {
				log.Error("cannot write the kill file; killing anyway", "err", err)
			}
		}
		sent, err := killOrphanGroup(a.dir)
		switch {
		case err != nil:
			log.Error("cannot SIGKILL the command's group", "err", err)
		case sent:
			n++
			log.Info("SIGKILL sent to the command's group, without grace")
		default:
			x.kill(a.spec.Task, a.spec.Attempt, reason, false)
		}
	}
	return n
}

// kill writes the kill file (the reason; a second line "checkpoint" for
// a stop to resume later) and SIGTERMs the shims of task's attempt which
// (any, when negative).
func (x *Executor) kill(task string, which int, reason string, checkpoint bool) {
	body := reason + "\n"
	if checkpoint {
		body += checkpointMark + "\n"
	}
	x.mu.Lock()
	var targets []*attempt
	for k, a := range x.live {
		if k.task == task && (which < 0 || a.spec.Attempt == which) {
			targets = append(targets, a)
		}
	}
	x.mu.Unlock()
	for _, a := range targets {
		log := x.log.With("task", a.spec.Task, "attempt", a.spec.Attempt, "reason", reason)
		if err := writeFileAtomic(a.dir, killFile, []byte(body)); err != nil {
			log.Error("cannot write the kill file; killing anyway", "err", err)
		}
		p, err := readProcID(filepath.Join(a.dir, pidFile))
		if errors.Is(err, fs.ErrNotExist) {
			log.Info("kill requested before the shim was ready; it will read the kill file")
			continue
		}
		if err == nil {
			err = signalProc(p, syscall.SIGTERM)
		}
		if err != nil && !errors.Is(err, os.ErrProcessDone) {
			log.Error("cannot signal the shim", "err", err)
			continue
		}
		log.Info("kill sent")
	}
}

// Results delivers each attempt's Result once (per executor life) when its
// result.json appears. Results queue without bound inside the executor, so
// a slow reader never stalls the watcher. The channel is closed by Close.
func (x *Executor) Results() <-chan Result { return x.results }

// Running lists the attempts whose shim is alive (or still starting) and
// that have no result yet, ordered by task and attempt.
func (x *Executor) Running() []Spec {
	x.mu.Lock()
	out := make([]Spec, 0, len(x.live))
	for _, a := range x.live {
		out = append(out, a.spec)
	}
	x.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Task != out[j].Task {
			return out[i].Task < out[j].Task
		}
		return out[i].Attempt < out[j].Attempt
	})
	return out
}

// Quiet reports whether nothing this executor watches can still write in
// its directory: every attempt it started or adopted has its result and
// every such shim whose pid it knows has exited (and was reaped, for the
// ones it started). Running tasks' shims outlive Close; an agent that
// kills its tasks on exit waits for Quiet before it returns.
func (x *Executor) Quiet() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.live) == 0 && len(x.exiting) == 0
}

// Recover scans Dir after an agent restart: attempts with a result.json
// not yet Acked are delivered on Results (before anything Start adds);
// attempts whose shim is still alive are adopted (watched by polling pid
// liveness and result.json; Running lists them); attempts whose shim died
// without a result get a result.json and Result with ExitCode -1 and
// Reason LostReason, and their process group is SIGKILLed. An attempt
// whose shim has not written shim.pid yet counts as starting for 10s after
// its spec was written. Call once after New, before Start.
func (x *Executor) Recover() error {
	entries, err := os.ReadDir(x.tasks)
	if err != nil {
		return fmt.Errorf("executor: recover: %w", err)
	}
	for _, e := range entries {
		task, n, ok := parseAttemptName(e.Name())
		if !e.IsDir() || !ok {
			x.log.Warn("recover: ignoring a stray entry", "name", e.Name())
			continue
		}
		k := key{task, n}
		dir := filepath.Join(x.tasks, e.Name())
		x.mu.Lock()
		_, watched := x.live[k]
		x.mu.Unlock()
		if watched || exists(filepath.Join(dir, ackedFile)) {
			continue
		}
		if r, err := readResult(dir); !errors.Is(err, fs.ErrNotExist) {
			shim, _ := readProcID(filepath.Join(dir, pidFile))
			x.finish(k, x.settle(k, r, err), shim)
			continue
		}
		spec, err := readSpec(dir)
		if err != nil {
			x.log.Warn("recover: unreadable spec", "task", task, "attempt", n, "err", err)
		}
		spec.Task, spec.Attempt = task, n // the directory names the attempt
		a := &attempt{spec: spec, dir: dir, launched: modTime(filepath.Join(dir, specFile))}
		if r, done := x.check(a); done {
			x.finish(k, r, a.shim)
			continue
		}
		x.mu.Lock()
		x.live[k] = a
		x.mu.Unlock()
		x.log.Info("recover: adopted a running attempt", "task", task, "attempt", n, "shimPid", a.shim.Pid)
	}
	x.poke()
	return nil
}

// poke makes the watcher check the live attempts soon.
func (x *Executor) poke() {
	select {
	case x.wake <- struct{}{}:
	default:
	}
}

// Ack marks an attempt's result as reported to the server (the file
// acked), so Recover does not deliver it again. The attempt must have a
// result.
func (x *Executor) Ack(task string, attempt int) error {
	if !validTaskID(task) {
		return fmt.Errorf("executor: invalid task id %q", task)
	}
	dir := x.dir(task, attempt)
	if !exists(filepath.Join(dir, resultFile)) {
		return fmt.Errorf("executor: ack %s: no result", attemptName(task, attempt))
	}
	return writeFileAtomic(dir, ackedFile, nil)
}

// Remove deletes a finished attempt's directory (garbage collection); an
// attempt without a result is refused, a missing one is no error.
func (x *Executor) Remove(task string, attempt int) error {
	if !validTaskID(task) {
		return fmt.Errorf("executor: invalid task id %q", task)
	}
	dir := x.dir(task, attempt)
	if !exists(dir) {
		return nil
	}
	if !exists(filepath.Join(dir, resultFile)) {
		return fmt.Errorf("executor: remove %s: it has no result", attemptName(task, attempt))
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("executor: %w", err)
	}
	x.mu.Lock()
	delete(x.sent, key{task, attempt})
	x.mu.Unlock()
	return nil
}

// Close stops the watchers and closes Results; it does NOT kill running
// tasks: they outlive the agent by design. Every goroutine of the executor
// has ended when it returns. Shims this executor started and that exit
// afterwards stay zombies until the agent process exits.
func (x *Executor) Close() {
	x.once.Do(func() {
		x.mu.Lock()
		x.closed = true
		x.mu.Unlock()
		signal.Stop(x.sigchld)
		close(x.done)
		x.wg.Wait()
		close(x.results)
	})
}

// watch checks the live attempts on every tick, SIGCHLD and wake. It also
// reaps the shims this process started once they exit (nothing else waits
// for them); ones still exiting at Close stay zombies until the agent
// exits.
func (x *Executor) watch() {
	defer x.wg.Done()
	t := time.NewTicker(x.poll)
	defer t.Stop()
	for {
		select {
		case <-x.done:
			return
		case <-t.C:
		case <-x.sigchld:
		case <-x.wake:
		}
		x.mu.Lock()
		live := make(map[key]*attempt, len(x.live))
		for k, a := range x.live {
			live[k] = a
		}
		x.mu.Unlock()
		for k, a := range live {
			if r, done := x.check(a); done {
				x.finish(k, r, a.shim)
			}
		}
		// Under the lock, so that Quiet never sees a shim in neither list.
		x.mu.Lock()
		x.exiting = slices.DeleteFunc(x.exiting, reaped)
		x.mu.Unlock()
	}
}

// check looks at an attempt: done with its Result when it has a
// result.json or its shim died (then it is lost).
func (x *Executor) check(a *attempt) (Result, bool) {
	k := key{a.spec.Task, a.spec.Attempt}
	if a.shim.Pid == 0 {
		p, err := readProcID(filepath.Join(a.dir, pidFile))
		switch {
		case err == nil:
			a.shim = p
		case errors.Is(err, fs.ErrNotExist) && time.Since(a.launched) < launchWait:
			return Result{}, false
		default:
			// Never started, or shim.pid unreadable: nothing to watch.
			return x.lose(a, err), true
		}
	}
	if r, err := readResult(a.dir); !errors.Is(err, fs.ErrNotExist) {
		return x.settle(k, r, err), true
	}
	if alive(a.shim) {
		return Result{}, false
	}
	// The shim writes result.json before it exits: look again.
	if r, err := readResult(a.dir); !errors.Is(err, fs.ErrNotExist) {
		return x.settle(k, r, err), true
	}
	return x.lose(a, nil), true
}

// settle completes a result read from disk: the directory names the
// attempt, and an unreadable result.json still ends it.
func (x *Executor) settle(k key, r Result, err error) Result {
	if err != nil {
		x.log.Error("unreadable result", "task", k.task, "attempt", k.attempt, "err", err)
		r = Result{ExitCode: -1, Reason: "unreadable result.json: " + err.Error()}
	}
	r.Task, r.Attempt = k.task, k.attempt
	return r
}

// lose records that a's shim died without a result: it SIGKILLs the
// command's group if it is still there and writes a lost result.json
// (unless the shim's appeared meanwhile, which then wins).
func (x *Executor) lose(a *attempt, why error) Result {
	k := key{a.spec.Task, a.spec.Attempt}
	log := x.log.With("task", k.task, "attempt", k.attempt)
	if killed, err := killOrphanGroup(a.dir); err != nil {
		log.Error("cannot kill the orphaned process group", "err", err)
	} else if killed {
		log.Warn("killed the orphaned process group of a lost attempt")
	}
	r := Result{Task: k.task, Attempt: k.attempt, ExitCode: -1, Reason: LostReason,
		Started: modTime(filepath.Join(a.dir, specFile)), Finished: time.Now()}
	if why != nil && !errors.Is(why, fs.ErrNotExist) {
		r.Reason += " (" + why.Error() + ")"
	}
	err := writeResult(a.dir, r)
	if errors.Is(err, errResultExists) {
		got, err := readResult(a.dir)
		return x.settle(k, got, err)
	}
	if err != nil {
		log.Error("cannot write the lost result", "err", err)
	}
	log.Warn("attempt lost", "shimPid", a.shim.Pid)
	return r
}

// finish ends the attempt's watch, queues r unless this executor queued
// that attempt's result before, and has the watcher reap the attempt's
// shim (Pid 0: unknown). The attempt leaves live and its shim enters
// exiting at once, so Quiet never misses it.
func (x *Executor) finish(k key, r Result, shim procID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.live, k)
	if shim.Pid != 0 {
		x.exiting = append(x.exiting, shim)
	}
	if x.sent[k] {
		return
	}
	x.sent[k] = true
	x.queue = append(x.queue, r)
	select {
	case x.queued <- struct{}{}:
	default:
	}
	x.log.Info("task finished", "task", r.Task, "attempt", r.Attempt, "exitCode", r.ExitCode,
		"timedOut", r.TimedOut, "killed", r.Killed, "reason", r.Reason)
}

// forward moves queued results onto the Results channel.
func (x *Executor) forward() {
	defer x.wg.Done()
	for {
		x.mu.Lock()
		if len(x.queue) == 0 {
			x.mu.Unlock()
			select {
			case <-x.queued:
				continue
			case <-x.done:
				return
			}
		}
		r := x.queue[0]
		x.mu.Unlock()
		select {
		case x.results <- r:
			x.mu.Lock()
			x.queue[0] = Result{}
			x.queue = x.queue[1:]
			x.mu.Unlock()
		case <-x.done:
			return
		}
	}
}
