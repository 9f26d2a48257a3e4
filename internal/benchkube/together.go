package benchkube

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// Together joins the schedulers of one run that places its pods at once,
// side by side on the same API server: "hetsched&hetsched:--stock-watch"
// gives half the pods to each (as many asking for a GPU). Each sees the other's pods (as on any
// shared cluster), so its CPU per pod is above what it costs alone; what
// such a run measures is the difference between the two under the same
// load at the same moment, which runs one after the other (the VM's and
// API server's speed drifting between them) cannot show.
const Together = "&"

// together runs the schedulers of spec at once over n new pods in
// namespace ns, pods 2i and 2i+1 (one asks for a GPU, the other not)
// going to scheduler i mod len(spec), and returns one
// Result for each (its own pods' figures; its process's CPU over the
// run, per pod of its own).
func (d *driver) together(ctx context.Context, c *kubetest.Cluster, o Options, spec, ns string, n int, logf func(string, ...any)) ([]*Result, error) {
	if _, err := d.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	labels := strings.Split(spec, Together)
	names := make([]string, len(labels))
	procs := make([]*exec.Cmd, len(labels))
	defer func() {
		for _, p := range procs {
			stopProc(p)
		}
	}()
	for i, label := range labels {
		names[i] = fmt.Sprintf("bench-%d-%s", i, strings.TrimPrefix(ns, "run"))
		p, err := startScheduler(ctx, c, o, label, names[i], logf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		procs[i] = p
	}
	cpu0 := make([]float64, len(procs))
	idle := make([]float64, len(procs))
	for i, p := range procs {
		waited, quiet := quietAfter(ctx, func() float64 { return procCPU(p) }, time.Now, time.Sleep)
		logf("%s: quiet %v after %v (measured either way)", labels[i], quiet, waited.Round(time.Millisecond))
	}
	var wg sync.WaitGroup
	for i, p := range procs {
		wg.Go(func() { idle[i] = idleCores(ctx, o.IdleWindow, func() float64 { return procCPU(p) }) })
	}
	wg.Wait()
	calls0 := make([]childproc.Syscalls, len(procs))
	for i, p := range procs {
		markWindow(labels[i], p, true)
		cpu0[i], calls0[i] = procCPU(p), procSyscalls(p)
	}
	of := func(i int) int { return i / 2 % len(names) }
	keys, err := d.createPods(ctx, ns, func(i int) string { return names[of(i)] }, n)
	if err != nil {
		return nil, err
	}
	err = kubetest.WaitFor(ctx, 15*time.Minute, func() (bool, string, error) {
		b := d.countBound(keys)
		return b == n, fmt.Sprintf("%d of %d bound", b, n), nil
	})
	out := make([]*Result, len(procs))
	for i, p := range procs {
		var own []string
		for k := range keys {
			if of(k) == i {
				own = append(own, keys[k])
			}
		}
		out[i] = d.result(labels[i]+" (together)", own, procCPU(p)-cpu0[i])
		out[i].perPodSyscalls(calls0[i], procSyscalls(p))
		markWindow(labels[i], p, false)
		out[i].IdleCores = idle[i]
		if m, err := childproc.ReadMemory(p.Process.Pid); err == nil {
			out[i].PeakRSSMiB = float64(m.Peak) / (1 << 20)
		}
	}
	if err != nil {
		return out, err
	}
	return out, d.removePods(ctx, ns, logf)
}

// isProcess reports whether a run's scheduler is a process of its own
// (startScheduler starts it).
func isProcess(base string) bool {
	switch base {
	case Hetsched, Baseline, BindFloor, KubeScheduler, KubeSchedulerDef:
		return true
	}
	return false
}

// startScheduler starts the process of a run's scheduler (label: its
// name and flags) placing the pods of schedulerName name.
func startScheduler(ctx context.Context, c *kubetest.Cluster, o Options, label, name string, logf func(string, ...any)) (*exec.Cmd, error) {
	sched, extra := splitRun(label)
	env, flags := splitEnv(extra)
	switch sched {
	case Hetsched:
		return startProcEnv(ctx, c, logf, env, o.Bin, append(hetschedArgs(c, o, name, ""), flags...)...)
	case Baseline:
		return startProc(ctx, c, logf, o.BaselineBin, hetschedArgs(c, o, name, "")...)
	case BindFloor:
		return startProcEnv(ctx, c, logf, env, o.Bin, append(hetschedArgs(c, o, name, ""), append([]string{"--watch-only", "--bind-floor"}, flags...)...)...)
	case KubeScheduler, KubeSchedulerDef:
		qps, burst := o.QPS, o.Burst
		if sched == KubeSchedulerDef {
			qps, burst = 50, 100
		}
		cfg, err := c.KubeSchedulerConfig(name, name, qps, burst)
		if err != nil {
			return nil, err
		}
		return startProcEnv(ctx, c, logf, env, filepath.Join(kubetest.ToolsDir(), "kube-scheduler"), "--config", cfg, "--secure-port", "0", "-v", "0")
	}
	return nil, fmt.Errorf("%q is not a scheduler process (hetsched, hetsched-baseline, bind-floor, kube-scheduler, kube-scheduler-default)", label)
}

// stopProc stops a scheduler's process: SIGTERM first, so that one that
// stops by itself flushes what it writes (logs, profiles); killed after
// 10 s. A nil or unstarted process is left alone.
func stopProc(proc *exec.Cmd) {
	if proc == nil || proc.Process == nil {
		return
	}
	proc.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { proc.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		proc.Process.Kill()
		<-done
	}
}

// removePods deletes a run's pods so the next run finds the same empty
// fleet, and waits until they are gone.
func (d *driver) removePods(ctx context.Context, ns string, logf func(string, ...any)) error {
	zero := int64(0)
	// Deleting 10,000 pods at once may outlast the API server's request
	// timeout (a stream error): tried again, up to three times.
	for attempt := 1; ; attempt++ {
		err := d.cs.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err == nil {
			break
		}
		if attempt == 3 || ctx.Err() != nil {
			return err
		}
		logf("deleting the run's pods: %v; trying again", err)
	}
	return kubetest.WaitFor(ctx, 5*time.Minute, func() (bool, string, error) {
		l, err := d.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return false, "", err
		}
		return len(l.Items) == 0, "pods left", nil
	})
}
