package executor

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Restarts of a spec with Restart (a service's replica), as the kubelet
// restarts a container of a pod whose restartPolicy is Always:
//
//	restart    the agent's request (Executor.Restart: the reason in
//	           DIR/restart, then SIGHUP to the shim): the shim stops the
//	           group (SIGTERM, the grace, SIGKILL) and runs the command
//	           again
//	runs       DIR/runs, the shim's account (JSON Runs): how many times
//	           the command was restarted, when the current run started,
//	           and why the last one ended
//	backoff    the wait before a restart: none for the first, then 10 s
//	           doubling to 5 minutes (CrashLoopBackOff); a run that lasted
//	           10 minutes starts the count again
//
// A command that exits by itself restarts too; only a stop (the agent's
// kill, the timeout, the fence) ends the attempt with a result.
const (
	restartFile = "restart"
	runsFile    = "runs"

	RestartBackoff    = 10 * time.Second
	RestartBackoffMax = 5 * time.Minute
	RestartReset      = 10 * time.Minute
)

// Runs is DIR/runs.
type Runs struct {
	Restarts int       `json:"restarts"`
	Started  time.Time `json:"started"` // the current run's start (zero while waiting to restart)
	Next     time.Time `json:"next"`    // when the next run starts (zero while one runs)
	Reason   string    `json:"reason"`  // why the last run ended
}

// restarts is the shim's count of restarts in a row.
type restarts struct {
	total, inRow int
}

// delay is the wait before the next run, after one that lasted ran.
func (rs *restarts) delay(ran time.Duration) time.Duration {
	if ran >= RestartReset {
		rs.inRow = 0
	}
	rs.inRow++
	rs.total++
	if rs.inRow == 1 {
		return 0
	}
	d := RestartBackoff
	for i := 2; i < rs.inRow && d < RestartBackoffMax; i++ {
		d *= 2
	}
	return min(d, RestartBackoffMax)
}

// takeRestart reads and removes the agent's restart request.
func (s *shim) takeRestart() (string, bool) {
	path := filepath.Join(s.dir, restartFile)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	_ = os.Remove(path)
	why := strings.TrimSpace(string(b))
	if why == "" {
		why = "restarted"
	}
	return why, true
}

// backoff waits before the next run after r ended (recording it in
// DIR/runs); stopped: the agent stopped the attempt meanwhile (or its
// timeout or fence came), and the result is the one to report.
func (s *shim) backoff(c *command, rs *restarts, r Result) (Result, bool) {
	d := rs.delay(time.Since(r.Started))
	s.log.Info("the command ended; restarting", "reason", r.Reason, "exitCode", r.ExitCode, "after", d, "restarts", rs.total)
	s.writeRuns(Runs{Restarts: rs.total, Next: time.Now().Add(d), Reason: r.Reason})
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			s.writeRuns(Runs{Restarts: rs.total, Started: time.Now(), Reason: r.Reason})
			return r, false
		case <-s.hup:
			_, _ = s.takeRestart() // nothing runs: the next run is the restart
		case <-s.stop:
			r.Killed, r.Stop = true, nil
			r.Reason, _, _ = s.killOrder()
			r.Reason += " (waiting to restart)"
			return r, true
		case <-c.timeout:
			r.TimedOut, r.Stop = true, nil
			r.Reason = "timed out after " + c.spec.Timeout.String()
			return r, true
		case now := <-c.fence:
			if why, expired := fenceExpired(c.spec.FenceFile, now); expired {
				r.Killed, r.Reason, r.Stop = true, why, nil
				return r, true
			}
		}
	}
}

func (s *shim) writeRuns(r Runs) {
	b, _ := json.Marshal(r)
	if err := writeFileAtomic(s.dir, runsFile, b); err != nil {
		s.log.Warn("cannot write the runs file", "err", err)
	}
}

// Restart asks the shim of a running attempt of a restarting spec to
// stop its command and run it again (a failed liveness probe). It is a
// no-op for an attempt that is not running.
func (x *Executor) Restart(task string, attempt int, reason string) error {
	x.mu.Lock()
	a := x.live[key{task, attempt}]
	x.mu.Unlock()
	if a == nil {
		return errors.New("not running")
	}
	if err := writeFileAtomic(a.dir, restartFile, []byte(reason+"\n")); err != nil {
		return err
	}
	p, err := readProcID(filepath.Join(a.dir, pidFile))
	if err != nil || !alive(p) {
		return errors.New("its shim is not running")
	}
	return syscall.Kill(p.Pid, syscall.SIGHUP)
}

// WorkDir is a running attempt's working directory ("" when it is not
// running).
func (x *Executor) WorkDir(task string, attempt int) string {
	x.mu.Lock()
	defer x.mu.Unlock()
	a := x.live[key{task, attempt}]
	switch {
	case a == nil:
		return ""
	case a.spec.WorkDir != "":
		return a.spec.WorkDir
	}
	return filepath.Join(a.dir, workDir)
}

// RunsOf reads a running attempt's runs (zero Runs and ok before the
// first restart: the spec started it once).
func (x *Executor) RunsOf(task string, attempt int) (Runs, bool) {
	x.mu.Lock()
	a := x.live[key{task, attempt}]
	x.mu.Unlock()
	if a == nil {
		return Runs{}, false
	}
	b, err := os.ReadFile(filepath.Join(a.dir, runsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Runs{}, true
	}
	var r Runs
	if err != nil || json.Unmarshal(b, &r) != nil {
		return Runs{}, false
	}
	return r, true
}

// CPU is the CPU a running attempt's command used so far: its group
// leader's and the children it waited for (/proc/PID/stat utime, stime,
// cutime, cstime), in the current run. ok false: not known.
func (x *Executor) CPU(task string, attempt int) (time.Duration, bool) {
	x.mu.Lock()
	a := x.live[key{task, attempt}]
	x.mu.Unlock()
	if a == nil {
		return 0, false
	}
	p, err := readProcID(filepath.Join(a.dir, pgidFile))
	if err != nil {
		return 0, false
	}
	st, err := readProcStat(p.Pid)
	if err != nil || p.Start != 0 && st.Start != p.Start {
		return 0, false // gone, or the pid is another process's now
	}
	return time.Duration(st.CPUTicks) * time.Second / clockTicks, true
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100
