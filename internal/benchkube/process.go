package benchkube

// The scheduler processes a run starts, and how their CPU is measured.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// startProc starts a scheduler process with its output in the cluster's
// directory.
func startProc(ctx context.Context, c *kubetest.Cluster, logf func(string, ...any), bin string, args ...string) (*exec.Cmd, error) {
	return startProcEnv(ctx, c, logf, nil, bin, args...)
}

// startProcEnv is startProc with env added to this process's environment.
func startProcEnv(ctx context.Context, c *kubetest.Cluster, logf func(string, ...any), env []string, bin string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(filepath.Join(c.Dir, filepath.Base(bin)+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	err = cmd.Start()
	f.Close() // the child has its own descriptor
	if err != nil {
		return nil, err
	}
	logf("started %s (log %s)", filepath.Base(bin), f.Name())
	return cmd, nil
}

// hetschedArgs are `hetsched kube`'s arguments in a run: the cluster,
// the scheduler name, the client limits, no leader election, metrics on
// listen ("": none), then Options.HetschedArgs.
func hetschedArgs(c *kubetest.Cluster, o Options, name, listen string) []string {
	args := []string{"kube", "--kubeconfig", c.Kubeconfig, "--scheduler-name", name,
		"--kube-api-qps", strconv.FormatFloat(float64(o.QPS), 'f', -1, 32), "--kube-api-burst", strconv.Itoa(o.Burst),
		"--leader-elect=false", "--listen", listen}
	return append(args, o.HetschedArgs...)
}

// Quiet is when a started scheduler counts as ready for the pods: over
// its last QuietWindow it used less than QuietCPU of a core (its lists
// of the nodes and pods decoded, its caches synced), polled each
// QuietPoll, given up after QuietMax.
const (
	QuietWindow = time.Second
	QuietCPU    = 0.05
	QuietPoll   = 250 * time.Millisecond
	QuietMax    = time.Minute
)

// quietAfter waits until the CPU seconds cpu reports have gone quiet
// (see QuietWindow) and says how long that took, or, after QuietMax or
// when ctx ends, how long it waited and false. A fixed pause would
// measure a scheduler still listing on a slow machine and charge it for
// its start.
func quietAfter(ctx context.Context, cpu func() float64, now func() time.Time, sleep func(time.Duration)) (time.Duration, bool) {
	t0 := now()
	type sample struct {
		at  time.Time
		cpu float64
	}
	var seen []sample
	for ctx.Err() == nil && now().Sub(t0) < QuietMax {
		s := sample{now(), cpu()}
		seen = append(seen, s)
		// The oldest sample at least a window back: the CPU since then.
		for len(seen) > 1 && s.at.Sub(seen[1].at) >= QuietWindow {
			seen = seen[1:]
		}
		if span := s.at.Sub(seen[0].at); span >= QuietWindow && (s.cpu-seen[0].cpu)/span.Seconds() < QuietCPU {
			return s.at.Sub(t0), true
		}
		sleep(QuietPoll)
	}
	return now().Sub(t0), false
}

// DefaultIdleWindow is how long a quiet scheduler's CPU is measured
// before the pods come (Result.IdleCores).
const DefaultIdleWindow = 5 * time.Second

// idleCores is the CPU, in cores, cpu reports over the next window
// (0 when ctx ends first).
func idleCores(ctx context.Context, window time.Duration, cpu func() float64) float64 {
	if window <= 0 {
		window = DefaultIdleWindow
	}
	c0, t0 := cpu(), time.Now()
	select {
	case <-ctx.Done():
		return 0
	case <-time.After(window):
	}
	return (cpu() - c0) / time.Since(t0).Seconds()
}

// procCPU is the process's user+system CPU seconds so far (0 without a
// process, or when /proc cannot say).
func procCPU(cmd *exec.Cmd) float64 {
	if cmd == nil || cmd.Process == nil {
		return 0
	}
	d, err := childproc.ReadCPU(cmd.Process.Pid)
	if err != nil {
		return 0
	}
	return d.Seconds()
}

// procSyscalls is the process's read and write system calls so far (zero
// without a process, or when /proc cannot say).
func procSyscalls(cmd *exec.Cmd) childproc.Syscalls {
	if cmd == nil || cmd.Process == nil {
		return childproc.Syscalls{}
	}
	n, err := childproc.ReadSyscalls(cmd.Process.Pid)
	if err != nil {
		return childproc.Syscalls{}
	}
	return n
}

// runEnv are the items of a run's extras that set the Go runtime's
// environment of its process (GOMAXPROCS=1, GOGC=400, GOMEMLIMIT=1GiB,
// GODEBUG=gctrace=1 into its log) rather than flags: the only extras
// kube-scheduler takes.
var runEnv = []string{"GOMAXPROCS=", "GOGC=", "GOMEMLIMIT=", "GODEBUG="}

// splitEnv parts a run's extras into environment settings and flags.
func splitEnv(extra []string) (env, flags []string) {
	for _, x := range extra {
		if slices.ContainsFunc(runEnv, func(p string) bool { return strings.HasPrefix(x, p) }) {
			env = append(env, x)
		} else {
			flags = append(flags, x)
		}
	}
	return env, flags
}

// checkExtra refuses extras a run's scheduler does not take: flags go to
// hetsched and bind-floor only; the Go environment (runEnv) to those and
// kube-scheduler.
func checkExtra(r, base string, extra []string) error {
	env, flags := splitEnv(extra)
	switch {
	case len(flags) > 0 && base != Hetsched && base != BindFloor:
		return fmt.Errorf("runs: %q: only hetsched and bind-floor take flags of their own (hetsched:--flag=v+--other=w; kube-scheduler:GOMAXPROCS=1 sets its environment)", r)
	case len(env) > 0 && (!isProcess(base) || base == Baseline):
		return fmt.Errorf("runs: %q: only scheduler processes take %s", r, strings.Join(runEnv, ", "))
	}
	return nil
}

// splitRun reads a run's name: "hetsched:--flag=v+--other=w" is the
// hetsched run with two more flags of its own (A/B runs in one bench).
func splitRun(r string) (string, []string) {
	base, rest, ok := strings.Cut(r, ":")
	if !ok || rest == "" {
		return base, nil
	}
	return base, strings.Split(rest, "+")
}

// profileWindowFlag is the hetsched kube flag with which its --cpu-profile
// covers only the measured window, opened by SIGUSR1 and closed by
// SIGUSR2: markWindow sends them to a run started with it.
const profileWindowFlag = "--cpu-profile-window"

// markWindow opens (open) or closes the CPU profile window of a run's
// process when the run's flags ask for one; it sends nothing otherwise,
// since the signals would end a process that does not catch them.
func markWindow(label string, proc *exec.Cmd, open bool) {
	_, extra := splitRun(label)
	_, flags := splitEnv(extra)
	asked := slices.ContainsFunc(flags, func(f string) bool {
		return f == profileWindowFlag || f == profileWindowFlag+"=true"
	})
	if !asked || proc == nil || proc.Process == nil {
		return
	}
	s := syscall.SIGUSR2
	if open {
		s = syscall.SIGUSR1
	}
	_ = proc.Process.Signal(s)
}
