package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Names of the files in a task attempt's directory. Each has exactly one
// writer (see the package documentation).
const (
	specFile   = "spec.json"
	resultFile = "result.json"
	pidFile    = "shim.pid"
	pgidFile   = "pgid"
	killFile   = "kill"
	ackedFile  = "acked"
	shimLog    = "shim.log"
	workDir    = "work"
	stdoutLog  = "stdout.log"
	stderrLog  = "stderr.log"
	outputLog  = "output.log"
)

// errResultExists is returned by writeResult when the attempt already has
// a result.json: the first result written wins.
var errResultExists = errors.New("executor: result already written")

// validTaskID reports whether id may name a task directory: it matches
// ^[A-Za-z0-9]([-A-Za-z0-9_.:]*[A-Za-z0-9])?$ and has at most 253 bytes,
// so it can hold no path separator and never be "." or "..".
func validTaskID(id string) bool {
	if id == "" || len(id) > 253 {
		return false
	}
	alnum := func(c byte) bool {
		return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
	}
	if !alnum(id[0]) || !alnum(id[len(id)-1]) {
		return false
	}
	for i := 1; i < len(id)-1; i++ {
		if c := id[i]; !alnum(c) && c != '-' && c != '_' && c != '.' && c != ':' {
			return false
		}
	}
	return true
}

// attemptName is the directory name of a task attempt.
func attemptName(task string, attempt int) string {
	return task + "_" + strconv.Itoa(attempt)
}

// parseAttemptName splits a directory name made by attemptName. Task ids
// may hold '_', the attempt number never does, so the last '_' splits.
func parseAttemptName(name string) (task string, attempt int, ok bool) {
	i := strings.LastIndexByte(name, '_')
	if i < 0 {
		return "", 0, false
	}
	task = name[:i]
	n, err := strconv.Atoi(name[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != name[i+1:] || !validTaskID(task) {
		return "", 0, false
	}
	return task, n, true
}

// writeFileAtomic replaces dir/name with data durably: a temporary file is
// written and fsynced, renamed over name, and dir is fsynced. Readers see
// the old file or the whole new one.
func writeFileAtomic(dir, name string, data []byte) error {
	tmp, err := writeTemp(dir, name, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// writeFileExclusive is writeFileAtomic that never replaces: it links the
// temporary file to name and returns errResultExists when name exists.
func writeFileExclusive(dir, name string, data []byte) error {
	tmp, err := writeTemp(dir, name, data)
	if err != nil {
		return err
	}
	err = os.Link(tmp, filepath.Join(dir, name))
	_ = os.Remove(tmp)
	if errors.Is(err, fs.ErrExist) {
		return errResultExists
	}
	if err != nil {
		return err
	}
	return syncDir(dir)
}

func writeTemp(dir, name string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeResult stores r as dir/result.json; the first result written wins
// (errResultExists for the others).
func writeResult(dir string, r Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return writeFileExclusive(dir, resultFile, append(b, '\n'))
}

// readResult reads dir/result.json; fs.ErrNotExist when there is none.
func readResult(dir string) (Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, resultFile))
	if err != nil {
		return Result{}, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return Result{}, fmt.Errorf("%s: %w", filepath.Join(dir, resultFile), err)
	}
	return r, nil
}

func readSpec(dir string) (Spec, error) {
	b, err := os.ReadFile(filepath.Join(dir, specFile))
	if err != nil {
		return Spec{}, err
	}
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return Spec{}, fmt.Errorf("%s: %w", filepath.Join(dir, specFile), err)
	}
	return s, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// procID is a process id with the start time that guards against pid
// reuse; it is what shim.pid and pgid hold ("PID STARTTIME\n").
type procID struct {
	Pid   int
	Start uint64 // /proc/PID/stat field 22: clock ticks after boot
}

func (p procID) String() string { return fmt.Sprintf("%d %d\n", p.Pid, p.Start) }

func readProcID(path string) (procID, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return procID{}, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return procID{}, fmt.Errorf("%s: want \"PID STARTTIME\", got %q", path, b)
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return procID{}, fmt.Errorf("%s: want \"PID STARTTIME\", got %q", path, b)
	}
	return procID{pid, start}, nil
}

// procStat is what /proc/PID/stat says about a process.
type procStat struct {
	State byte   // field 3: R, S, D, Z, ...
	Pgrp  int    // field 5
	Start uint64 // field 22
	// CPUTicks is the CPU it and the children it waited for used, in
	// clock ticks: utime, stime, cutime and cstime (fields 14-17).
	CPUTicks uint64
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold anything.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	pgrp, err1 := strconv.Atoi(f[2])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil || len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	st := procStat{State: f[0][0], Pgrp: pgrp, Start: start}
	for _, k := range []int{11, 12, 13, 14} { // utime stime cutime cstime (fields 14-17)
		v, err := strconv.ParseUint(f[k], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: malformed", pid)
		}
		st.CPUTicks += v
	}
	return st, nil
}

// selfID is the calling process's procID.
func selfID() (procID, error) {
	pid := os.Getpid()
	st, err := readProcStat(pid)
	if err != nil {
		return procID{}, err
	}
	return procID{pid, st.Start}, nil
}

// alive reports whether p still runs: it exists, is no zombie and started
// when p says.
func alive(p procID) bool {
	st, err := readProcStat(p.Pid)
	return err == nil && (p.Start == 0 || st.Start == p.Start) && st.State != 'Z' && st.State != 'X'
}

// reaped reports whether p is gone for good, reaping it if it is a zombie
// child of ours. A multithreaded process shows as a zombie before its
// last thread exits and is only reaped after, so a zombie may take more
// than one call.
func reaped(p procID) bool {
	st, err := readProcStat(p.Pid)
	if err != nil || p.Start != 0 && st.Start != p.Start {
		return true
	}
	if st.State != 'Z' && st.State != 'X' {
		return false
	}
	var ws syscall.WaitStatus
	pid, err := syscall.Wait4(p.Pid, &ws, syscall.WNOHANG, nil)
	return pid == p.Pid || err != nil // ECHILD: not our child, its parent reaps it
}

// signalProc sends sig to p unless p is gone or its pid now names another
// process. The handle is a pidfd taken before the start time is checked,
// so the signal cannot reach a process that reused the pid.
func signalProc(p procID, sig syscall.Signal) error {
	proc, err := os.FindProcess(p.Pid)
	if err != nil {
		return err
	}
	defer func() { _ = proc.Release() }()
	if !alive(p) {
		return os.ErrProcessDone
	}
	return proc.Signal(sig)
}

// killOrphanGroup SIGKILLs the process group recorded in dir/pgid, unless
// the group's leader pid now belongs to a process that started later
// (the group id was reused). It reports whether a signal was sent.
func killOrphanGroup(dir string) (bool, error) {
	g, err := readProcID(filepath.Join(dir, pgidFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	// A pid is not reused while a process group of that id exists, so a
	// live leader with another start time means our group is gone.
	if st, err := readProcStat(g.Pid); err == nil && st.Start != g.Start {
		return false, nil
	}
	err = syscall.Kill(-g.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return false, nil
	}
	return err == nil, err
}

// groupGone reports whether no process (zombies included) is left in the
// process group pgid.
func groupGone(pgid int) bool {
	return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
}

// signalName names the common signals the way people write them.
func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGILL:
		return "SIGILL"
	case syscall.SIGTRAP:
		return "SIGTRAP"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGFPE:
		return "SIGFPE"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGALRM:
		return "SIGALRM"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGXCPU:
		return "SIGXCPU"
	case syscall.SIGXFSZ:
		return "SIGXFSZ"
	case syscall.SIGSYS:
		return "SIGSYS"
	}
	return "signal " + strconv.Itoa(int(s))
}

// stopSignals are the signals a stop may use (a checkpoint's), by name.
var stopSignals = map[string]syscall.Signal{"SIGTERM": syscall.SIGTERM, "SIGINT": syscall.SIGINT,
	"SIGHUP": syscall.SIGHUP, "SIGQUIT": syscall.SIGQUIT, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2}

// signalNamed is the stop signal called name.
func signalNamed(name string) (syscall.Signal, bool) {
	s, ok := stopSignals[name]
	return s, ok
}

// checkpointMark is the kill file's second line when the attempt is
// stopped to resume later (Executor.Checkpoint).
const checkpointMark = "checkpoint"

// modTime is the modification time of path, or the zero time.
func modTime(path string) time.Time {
	fi, err := os.Stat(path)
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}
