package executor

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// defaultGrace is the SIGTERM→SIGKILL wait when a Spec sets none.
const defaultGrace = 10 * time.Second

// Bounds on the shim's waits after the command's leader exited: for the
// killed group to disappear, and for the output pipes to reach EOF once
// it has (a descendant that left the group may still hold them).
const (
	groupGoneWait = 10 * time.Second
	drainWait     = 2 * time.Second
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// RunShim runs one task attempt; it is the body of the agent's hidden shim
// subcommand and returns the process's exit status. args is the attempt's
// directory, which holds spec.json.
//
// Contracts:
//   - The shim is in its own session (it calls setsid unless its parent
//     already made it a session leader) and ignores SIGHUP, so it outlives
//     the agent and any terminal. It is a child subreaper, so descendants
//     of the command that lose their parent are reaped by it, not left as
//     zombies.
//   - It writes shim.pid only after its SIGTERM handler is installed; the
//     agent signals only shims that wrote it (others read the kill file
//     before starting the command).
//   - The command runs in its own process group with cwd DIR/work, stdin
//     /dev/null and the shim's environment overlaid by Spec.Env and
//     PWD=DIR/work (an explicit PWD in Spec.Env wins). Its stdout and
//     stderr are copied to stdout.log and stderr.log and both, in the
//     order the shim reads them, to output.log.
//   - Timeout and SIGTERM (the agent's Kill, reason in DIR/kill) stop the
//     group: SIGTERM, then SIGKILL once the grace passed unless the whole
//     group is gone before. A checkpoint stop (the kill file's second
//     line) sends the spec's CheckpointSignal and waits CheckpointGrace
//     instead. The result's Stop says how it went.
//   - Spec.WorkDir, when set, replaces DIR/work (the directory the
//     attempts of a checkpointed task share).
//   - Whenever the leader exits, including normally, the members left in
//     its group are SIGKILLed, so no orphan keeps devices busy; processes
//     that left the group (setsid, setpgid) are not tracked.
//   - result.json is written last, after the group is gone (or 10s passed)
//     and the logs are drained and fsynced; every path, a command that
//     cannot start included, ends with one. If the directory already has a
//     result.json (the agent declared the attempt lost), the shim runs
//     nothing.
func RunShim(args []string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if len(args) != 1 || args[0] == "" {
		fmt.Fprintln(os.Stderr, "usage: agent-shim TASKDIR")
		return 2
	}
	dir := args[0]
	log = log.With("dir", dir)
	if sid, _, _ := syscall.RawSyscall(syscall.SYS_GETSID, 0, 0, 0); int(sid) != os.Getpid() {
		if _, err := syscall.Setsid(); err != nil {
			log.Warn("setsid failed: the shim dies with the agent's session", "err", err)
		}
	}
	if err := becomeSubreaper(); err != nil {
		log.Warn("cannot become a child subreaper", "err", err)
	}
	stop := make(chan os.Signal, 4)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	// Caught rather than ignored: an ignored signal would stay ignored in
	// the command.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)

	self, err := selfID()
	if err == nil {
		err = writeFileAtomic(dir, pidFile, []byte(self.String()))
	}
	if err != nil {
		log.Error("cannot write shim.pid", "err", err)
		return 1
	}
	if exists(filepath.Join(dir, resultFile)) {
		log.Warn("the attempt already has a result; not running it")
		return 0
	}
	s := &shim{dir: dir, log: log, stop: stop, hup: hup}
	r := s.run()
	r.Finished = time.Now()
	if err := writeResult(dir, r); err != nil {
		if errors.Is(err, errResultExists) {
			log.Warn("the attempt got a result from elsewhere; this one is dropped", "result", r)
			return 0
		}
		log.Error("cannot write result.json", "err", err, "result", r)
		return 1
	}
	log.Info("done", "exitCode", r.ExitCode, "reason", r.Reason)
	return 0
}

type shim struct {
	dir  string
	log  *slog.Logger
	stop chan os.Signal // SIGTERM, SIGINT
	hup  chan os.Signal // SIGHUP: the agent asks for a restart (restart.go)
}

// killReason is the agent's reason in the kill file, or "killed".
func (s *shim) killReason() (string, bool) {
	r, _, ok := s.killOrder()
	return r, ok
}

// killOrder reads the kill file: the reason (its first line, "killed"
// when empty) and whether the stop is a checkpoint (its second line).
func (s *shim) killOrder() (reason string, checkpoint, ok bool) {
	b, err := os.ReadFile(filepath.Join(s.dir, killFile))
	if err != nil {
		return "killed", false, false
	}
	first, rest, _ := strings.Cut(string(b), "\n")
	checkpoint = strings.TrimSpace(rest) == checkpointMark
	if r := strings.TrimSpace(first); r != "" {
		return r, checkpoint, true
	}
	return "killed", checkpoint, true
}

// stopHow is the signal and grace of a stop: the spec's checkpoint ones
// for a checkpoint (when it names them), else SIGTERM and the grace.
func stopHow(spec Spec, checkpoint bool, grace time.Duration) (syscall.Signal, time.Duration) {
	sig := syscall.SIGTERM
	if !checkpoint {
		return sig, grace
	}
	if s, ok := signalNamed(spec.CheckpointSignal); ok {
		sig = s
	}
	if spec.CheckpointGrace > 0 {
		grace = spec.CheckpointGrace
	}
	return sig, grace
}

// cannotStart is the result of a command that never ran.
func cannotStart(spec Spec, started time.Time, format string, a ...any) Result {
	return Result{Task: spec.Task, Attempt: spec.Attempt, ExitCode: 127,
		Reason: fmt.Sprintf(format, a...), Started: started}
}

// run runs the command and returns its result, Finished unset. A spec
// with Restart runs the command again when it exits, or when the agent
// asks for a restart (restart.go), until it is stopped.
func (s *shim) run() Result {
	started := time.Now()
	spec, err := readSpec(s.dir)
	if err != nil {
		return cannotStart(spec, started, "cannot read the spec: %v", err)
	}
	if len(spec.Command) == 0 {
		return cannotStart(spec, started, "empty command")
	}
	if reason, ok := s.killReason(); ok {
		return Result{Task: spec.Task, Attempt: spec.Attempt, ExitCode: 128 + int(syscall.SIGKILL),
			Killed: true, Reason: reason + " (before the command started)", Started: started}
	}
	work := filepath.Join(s.dir, workDir)
	if spec.WorkDir != "" {
		work = spec.WorkDir
	}
	if err := os.MkdirAll(work, 0o755); err != nil {
		return cannotStart(spec, started, "cannot create the work directory: %v", err)
	}
	env := commandEnv(os.Environ(), spec.Env, work)
	path, err := lookPath(spec.Command[0], env, work)
	if err != nil {
		return cannotStart(spec, started, "command not found: %v", err)
	}
	logs, err := openLogs(s.dir)
	if err != nil {
		return cannotStart(spec, started, "cannot open the logs: %v", err)
	}
	defer logs.close()
	c := &command{spec: spec, path: path, env: env, work: work, logs: logs, reap: newReaper()}
	c.exits = c.reap.exits
	go c.reap.run()
	if spec.Timeout > 0 {
		t := time.NewTimer(spec.Timeout)
		defer t.Stop()
		c.timeout = t.C
	}
	if spec.FenceFile != "" {
		t := time.NewTicker(fencePoll)
		defer t.Stop()
		c.fence = t.C
	}
	var rs restarts
	for {
		r, again := s.runOnce(c)
		if !again {
			return r
		}
		if r, stopped := s.backoff(c, &rs, r); stopped {
			return r
		}
	}
}

// command is what each run of a spec's command shares: the command, its
// logs, the reaper's channel of the current leader's exits, and the
// attempt's timeout and fence.
type command struct {
	spec           Spec
	path, work     string
	env            []string
	logs           *logs
	reap           *reaper
	exits          <-chan syscall.WaitStatus // reap's
	timeout, fence <-chan time.Time
}

// runOnce starts the command and waits for its end. again: it ended in a
// way a restarting spec restarts from (it exited by itself, or the agent
// asked for a restart); r is then the run's end.
func (s *shim) runOnce(c *command) (r Result, again bool) {
	spec := c.spec
	started := time.Now()
	outR, outW, err := os.Pipe()
	if err != nil {
		return cannotStart(spec, started, "cannot make a pipe: %v", err), false
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		_ = outR.Close()
		_ = outW.Close()
		return cannotStart(spec, started, "cannot make a pipe: %v", err), false
	}
	cmd := &exec.Cmd{
		Path:        c.path,
		Args:        spec.Command,
		Dir:         c.work,
		Env:         c.env,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	started = time.Now()
	err = cmd.Start()
	_ = outW.Close()
	_ = errW.Close()
	if err != nil {
		_ = outR.Close()
		_ = errR.Close()
		return cannotStart(spec, started, "cannot start %q: %v", spec.Command[0], err), false
	}
	pgid := cmd.Process.Pid // Setpgid with Pgid 0: the leader's pid
	c.reap.setLeader(pgid)
	_ = cmd.Process.Release() // reaped by the reaper, never by cmd.Wait
	// Not reaped yet, so /proc has the leader even if it exited.
	st, err := readProcStat(pgid)
	if err == nil {
		err = writeFileAtomic(s.dir, pgidFile, []byte(procID{pgid, st.Start}.String()))
	}
	if err != nil {
		s.log.Warn("cannot write the pgid file: the group cannot be killed if the shim dies", "err", err)
	}
	s.log.Info("started", "pgid", pgid, "command", spec.Command)
	var copiers sync.WaitGroup
	copiers.Add(2)
	go c.logs.copy(outR, c.logs.stdout, &copiers, s.log)
	go c.logs.copy(errR, c.logs.stderr, &copiers, s.log)

	r = Result{Task: spec.Task, Attempt: spec.Attempt, Started: started}
	var ws syscall.WaitStatus
	ws, again = s.wait(c, pgid, &r)
	// The leader is gone; so must be everyone left in its group.
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err == nil {
		s.log.Info("killed the members left in the group", "pgid", pgid)
	}
	if !waitGroupGone(pgid, groupGoneWait) {
		s.log.Warn("the process group is still there", "pgid", pgid, "waited", groupGoneWait)
	}
	// Data the dead wrote is still in the pipes; only a process outside
	// the group can keep them open past the deadline.
	deadline := time.Now().Add(drainWait)
	_ = outR.SetReadDeadline(deadline)
	_ = errR.SetReadDeadline(deadline)
	copiers.Wait()
	_ = outR.Close()
	_ = errR.Close()
	c.logs.sync()
	exitOf(&r, ws)
	return r, again
}

// wait waits for the run's end: its leader's exit, the timeout, the
// agent's stop (SIGTERM), the fence, or (Restart) the agent's restart.
// again: the run ended by itself or by a restart, with Restart set.
func (s *shim) wait(c *command, pgid int, r *Result) (ws syscall.WaitStatus, again bool) {
	spec := c.spec
	grace := spec.Grace
	if grace <= 0 {
		grace = defaultGrace
	}
	for {
		select {
		case ws = <-c.exits:
			if reason, ok := s.killReason(); ok && ws.Signaled() {
				// Killed from outside the shim (Executor.KillNow's SIGKILL
				// to the group) before the shim saw its own signal.
				r.Killed, r.Reason = true, reason
				return ws, false
			}
			return ws, spec.Restart
		case <-c.timeout:
			r.TimedOut = true
			r.Reason = "timed out after " + spec.Timeout.String()
			s.log.Info("timed out; stopping the group", "pgid", pgid, "grace", grace)
			ws, r.Stop = s.stopGroup(pgid, syscall.SIGTERM, grace, c.exits)
			return ws, false
		case <-s.stop:
			r.Killed = true
			var checkpoint bool
			r.Reason, checkpoint, _ = s.killOrder()
			sig, g := stopHow(spec, checkpoint, grace)
			s.log.Info("killed; stopping the group", "pgid", pgid, "signal", signalName(sig), "grace", g, "reason", r.Reason, "checkpoint", checkpoint)
			ws, r.Stop = s.stopGroup(pgid, sig, g, c.exits)
			r.Stop.Checkpoint = checkpoint
			return ws, false
		case <-s.hup:
			why, ok := s.takeRestart()
			if !ok || !spec.Restart {
				continue
			}
			r.Reason = why
			s.log.Info("restart asked; stopping the group", "pgid", pgid, "grace", grace, "reason", why)
			ws, r.Stop = s.stopGroup(pgid, syscall.SIGTERM, grace, c.exits)
			if reason, ok := s.killReason(); ok { // stopped meanwhile: for good
				r.Killed, r.Reason = true, reason
				return ws, false
			}
			return ws, true
		case now := <-c.fence:
			why, expired := fenceExpired(spec.FenceFile, now)
			if !expired {
				continue
			}
			r.Killed = true
			r.Reason = why
			s.log.Warn("fenced: the agent's lease expired; SIGKILL to the group", "pgid", pgid, "reason", why)
			ws, _ = s.stopGroup(pgid, syscall.SIGKILL, 0, c.exits)
			return ws, false
		}
	}
}

// exitOf sets r's exit code (and a reason when none) from the leader's
// wait status.
func exitOf(r *Result, ws syscall.WaitStatus) {
	switch {
	case ws.Exited():
		r.ExitCode = ws.ExitStatus()
		if r.Reason == "" && r.ExitCode != 0 {
			r.Reason = fmt.Sprintf("exited with code %d", r.ExitCode)
		}
	case ws.Signaled():
		r.ExitCode = 128 + int(ws.Signal())
		r.Signal = signalName(ws.Signal())
		if r.Reason == "" {
			r.Reason = "killed by " + r.Signal
		}
	default:
		r.ExitCode = -1
		r.Reason = fmt.Sprintf("unexpected wait status %#x", uint32(ws))
	}
}

// stopGroup sends sig to the group, and SIGKILL when grace passed with
// any of it left. It returns the leader's wait status and how the stop
// went (the leader's exit time, whether SIGKILL was needed).
func (s *shim) stopGroup(pgid int, sig syscall.Signal, grace time.Duration, leader <-chan syscall.WaitStatus) (syscall.WaitStatus, *Stop) {
	st := &Stop{Signal: signalName(sig), Sent: time.Now()}
	_ = syscall.Kill(-pgid, sig)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var ws syscall.WaitStatus
	exited := false
	for {
		select {
		case ws = <-leader:
			exited = true
			st.Exited = time.Now()
			if groupGone(pgid) {
				return ws, st
			}
		case <-tick.C:
			if exited && groupGone(pgid) {
				return ws, st
			}
		case <-s.stop: // already stopping
		case <-deadline.C:
			s.log.Info("grace passed; SIGKILL to the group", "pgid", pgid)
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			st.Forced = sig != syscall.SIGKILL
			if !exited {
				ws = <-leader
				st.Exited = time.Now()
			}
			return ws, st
		}
	}
}

// reaper reaps the shim's children for the rest of its life (a
// subreaper inherits orphans) and sends the current leader's status on
// exits: each run's leader exits once, and its status is read before the
// next run starts. A leader that exits before the shim has named it
// (setLeader; a quick command) is kept in early until it is.
type reaper struct {
	mu     sync.Mutex
	leader int
	early  map[int]syscall.WaitStatus
	exits  chan syscall.WaitStatus
}

// maxEarly bounds the exits kept for a leader not named yet (orphans'
// exits land there too).
const maxEarly = 1024

func newReaper() *reaper {
	return &reaper{early: map[int]syscall.WaitStatus{}, exits: make(chan syscall.WaitStatus, 1)}
}

// setLeader names the current run's leader; its exit, if it came
// already, is sent now.
func (r *reaper) setLeader(pid int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader = pid
	if ws, ok := r.early[pid]; ok {
		delete(r.early, pid)
		r.exits <- ws
	}
}

func (r *reaper) run() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
		case err != nil: // ECHILD: none now, orphans may come
			time.Sleep(10 * time.Millisecond)
		case ws.Exited() || ws.Signaled():
			r.mu.Lock()
			if pid == r.leader {
				r.leader = 0
				r.exits <- ws
			} else {
				if len(r.early) >= maxEarly {
					clear(r.early)
				}
				r.early[pid] = ws
			}
			r.mu.Unlock()
		}
	}
}

// waitGroupGone polls until the process group pgid is empty or d passed.
func waitGroupGone(pgid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !groupGone(pgid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// commandEnv is env overlaid by spec (spec wins) with PWD and
// HETSCHED_WORK_DIR set to work unless spec sets them; spec's variables
// come last, sorted.
func commandEnv(env []string, spec map[string]string, work string) []string {
	over := make(map[string]string, len(spec)+2)
	over["PWD"] = work
	over["HETSCHED_WORK_DIR"] = work
	for k, v := range spec {
		over[k] = v
	}
	out := make([]string, 0, len(env)+len(over))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := over[k]; !ok {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(over))
	for k := range over {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+over[k])
	}
	return out
}

// lookPath resolves name like a shell in work with env's PATH: a name
// holding '/' is used as it is (the kernel resolves it in work), relative
// PATH entries are relative to work.
func lookPath(name string, env []string, work string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			d = filepath.Join(work, d)
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q: %w in $PATH", name, fs.ErrNotExist)
}

// logs are the attempt's three log files.
type logs struct {
	stdout, stderr *os.File
	mu             sync.Mutex // orders writes to output
	output         *os.File
	failed         sync.Once
}

func openLogs(dir string) (*logs, error) {
	open := func(name string) (*os.File, error) {
		return os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	}
	l := &logs{}
	var err error
	if l.stdout, err = open(stdoutLog); err != nil {
		return nil, err
	}
	if l.stderr, err = open(stderrLog); err != nil {
		_ = l.stdout.Close()
		return nil, err
	}
	if l.output, err = open(outputLog); err != nil {
		_ = l.stdout.Close()
		_ = l.stderr.Close()
		return nil, err
	}
	return l, nil
}

// copy copies r to own and output until r ends. Write errors are logged
// once and the copy goes on, so the command never blocks on a full disk.
func (l *logs) copy(r *os.File, own *os.File, wg *sync.WaitGroup, log *slog.Logger) {
	defer wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, werr := own.Write(buf[:n])
			l.mu.Lock()
			_, werr2 := l.output.Write(buf[:n])
			l.mu.Unlock()
			if werr = errors.Join(werr, werr2); werr != nil {
				l.failed.Do(func() { log.Error("cannot write the logs; output is lost", "err", werr) })
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				log.Warn("an output pipe is still open after the group ended: a process outside the group holds it")
			}
			return
		}
	}
}

func (l *logs) sync() {
	_ = l.stdout.Sync()
	_ = l.stderr.Sync()
	_ = l.output.Sync()
}

func (l *logs) close() {
	_ = l.stdout.Close()
	_ = l.stderr.Close()
	_ = l.output.Close()
}

// fencePoll is how often a shim reads its fence file.
const fencePoll = 100 * time.Millisecond

// FencedPrefix starts the reason of an attempt killed by its fence.
const FencedPrefix = "fenced: "

// fenceExpired reads a fence file (the deadline in Unix nanoseconds,
// decimal) and reports whether now is past it. A missing or unreadable
// file does not fence: the agent that promised a deadline writes it
// before it starts a task that names it.
func fenceExpired(path string, now time.Time) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || ns <= 0 {
		return "", false
	}
	if d := time.Unix(0, ns); now.After(d) {
		return fmt.Sprintf("%sthe agent's lease on this node expired %v ago (no heartbeat acknowledged by the server)", FencedPrefix, now.Sub(d).Round(time.Millisecond)), true
	}
	return "", false
}

// FenceMargin is how much earlier than the server's re-queue deadline a
// fence falls (FenceDeadline): a shim notices the fence up to fencePoll
// late, and its SIGKILL must land before a re-queued attempt can start
// elsewhere, which may be at once after the server's deadline.
const FenceMargin = 3 * fencePoll

// FenceDeadline is the fence for a heartbeat sent at sent that the server
// acknowledged with its re-queue deadline: FenceMargin before sent +
// deadline (half the deadline when that is shorter than the margin), so
// that the node's tasks are dead before the server re-queues them (it
// counts from when it received the heartbeat, not before sent).
func FenceDeadline(sent time.Time, deadline time.Duration) time.Time {
	margin := FenceMargin
	if deadline < 2*margin {
		margin = deadline / 2
	}
	return sent.Add(deadline - margin)
}

// WriteFence records deadline in a fence file (atomically): every shim
// whose spec names the file kills its task once the deadline passes. An
// agent moves the deadline forward after each heartbeat the server
// acknowledged, so its tasks stop when the server would re-queue them,
// even if the agent itself is dead.
func WriteFence(path string, deadline time.Time) error {
	return writeFileAtomic(filepath.Dir(path), filepath.Base(path), []byte(strconv.FormatInt(deadline.UnixNano(), 10)+"\n"))
}
