package benchkube

// The restart and takeover runs: a new hetsched kube rebuilding from a
// cluster of bound pods, and a standby taking over from a killed leader.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// restart binds n pods with the bare binder, then starts `hetsched kube`
// and measures how long its engine takes to hold them all (its
// hetsched_tasks gauge, updated each second) and to bind a new pod.
func (d *driver) restart(ctx context.Context, c *kubetest.Cluster, o Options, _, ns string, n int, logf func(string, ...any)) (*Result, error) {
	if err := d.bindBare(ctx, o, ns, n); err != nil {
		return nil, err
	}
	ports, err := childproc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(ports[0])
	name := "bench-restart"
	t0 := time.Now()
	proc, err := startProc(ctx, c, logf, o.Bin, hetschedArgs(c, o, name, addr)...)
	if err != nil {
		return nil, err
	}
	defer stopProc(proc)
	res := &Result{Scheduler: Restart, Pods: n}
	hc := &http.Client{Timeout: 2 * time.Second}
	err = kubetest.WaitFor(ctx, 10*time.Minute, func() (bool, string, error) {
		held := gauge(hc, "http://"+addr+"/metrics", "hetsched_tasks")
		return held >= float64(n), fmt.Sprintf("%v of %d held", held, n), nil
	})
	if err != nil {
		return res, err
	}
	res.AdoptSeconds = time.Since(t0).Seconds()
	err = d.probe(ctx, ns, name)
	res.FirstBindSeconds = time.Since(t0).Seconds()
	res.Bound, res.Seconds = n, res.AdoptSeconds
	res.PodsPerSec = float64(n) / res.AdoptSeconds
	res.CPUSeconds = procCPU(proc)
	res.CPUPerPod = res.CPUSeconds * 1000 / float64(n)
	return res, err
}

// probe creates a small pod for scheduler name and waits (a minute at
// most) for its Binding.
func (d *driver) probe(ctx context.Context, ns, name string) error {
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: corev1.PodSpec{SchedulerName: name, Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("100m")}}}}},
	}
	if _, err := d.cs.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		return err
	}
	return kubetest.WaitFor(ctx, time.Minute, func() (bool, string, error) {
		return d.countBound([]string{ns + "/probe"}) == 1, "not bound", nil
	})
}

// takeover binds n pods with the bare binder, starts two `hetsched kube`
// replicas sharing a Lease in ns, waits for one to lead and hold the pods,
// kills it (SIGKILL) and measures how long the other takes to lead (the
// Lease's acquireTime, which the new leader writes before it schedules
// anything, once its hetsched_leader gauge says so), to hold every pod
// (hetsched_tasks; polled every 50 ms, the gauge updated each second) and
// to bind a pod created at the kill.
func (d *driver) takeover(ctx context.Context, c *kubetest.Cluster, o Options, _, ns string, n int, logf func(string, ...any)) (*Result, error) {
	if err := d.bindBare(ctx, o, ns, n); err != nil {
		return nil, err
	}
	ports, err := childproc.FreePorts(2)
	if err != nil {
		return nil, err
	}
	name := "bench-takeover"
	var addrs [2]string
	var procs [2]*exec.Cmd
	for i := range procs {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(ports[i])
		args := append(hetschedArgs(c, o, name, addrs[i]), "--leader-elect=true", "--lease-namespace", ns, "--identity", "r"+strconv.Itoa(i))
		if o.LeaseDuration > 0 {
			args = append(args, "--lease-duration", o.LeaseDuration.String())
		}
		if procs[i], err = startProc(ctx, c, logf, o.Bin, args...); err != nil {
			return nil, err
		}
		defer stopProc(procs[i])
		if i == 0 {
			// The first leads before the second starts.
			if err := waitGauge(ctx, addrs[0], "hetsched_tasks", float64(n)); err != nil {
				return nil, fmt.Errorf("the first replica never held the %d pods: %w", n, err)
			}
		}
	}
	// The standby serves its metrics (hetsched_leader 0) before the kill.
	if err := waitGauge(ctx, addrs[1], "hetsched_leader", 0); err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	if g := gauge(hc, "http://"+addrs[1]+"/metrics", "hetsched_leader"); g != 0 {
		return nil, fmt.Errorf("the standby reports hetsched_leader %v before the kill, want 0", g)
	}
	t0 := time.Now()
	procs[0].Process.Kill()
	res := &Result{Scheduler: Takeover, Pods: n}
	type bind struct {
		at  time.Duration
		err error
	}
	bound := make(chan bind, 1)
	go func() { err := d.probe(ctx, ns, name); bound <- bind{time.Since(t0), err} }()
	if err := waitGauge(ctx, addrs[1], "hetsched_leader", 1); err != nil {
		return res, err
	}
	// The gauge is polled: read when it led from the Lease itself, so that
	// the first bind can never seem to come before the lead.
	lease, err := d.cs.CoordinationV1().Leases(ns).Get(ctx, "hetsched", metav1.GetOptions{})
	if err != nil {
		return res, err
	}
	if id := lease.Spec.HolderIdentity; id == nil || *id != "r1" || lease.Spec.AcquireTime == nil {
		return res, fmt.Errorf("after the kill, the lease %s/hetsched is held by %v since %v, want r1", ns, id, lease.Spec.AcquireTime)
	}
	res.LeadSeconds = lease.Spec.AcquireTime.Sub(t0).Seconds()
	if err := waitGauge(ctx, addrs[1], "hetsched_tasks", float64(n)); err != nil {
		return res, err
	}
	res.AdoptSeconds = time.Since(t0).Seconds()
	b := <-bound
	if b.err != nil {
		return res, b.err
	}
	res.FirstBindSeconds = b.at.Seconds()
	res.Bound, res.Seconds = n, res.FirstBindSeconds
	res.CPUSeconds = procCPU(procs[1])
	return res, nil
}

// waitGauge polls the metrics at addr (kubetest.WaitFor: every 50 ms,
// ten minutes at most) until the gauge name is at least want.
func waitGauge(ctx context.Context, addr, name string, want float64) error {
	hc := &http.Client{Timeout: 2 * time.Second}
	return kubetest.WaitFor(ctx, 10*time.Minute, func() (bool, string, error) {
		g := gauge(hc, "http://"+addr+"/metrics", name)
		return g >= want, fmt.Sprintf("%s at %s is %v, want %v", name, addr, g, want), nil
	})
}

// gauge reads one unlabelled metric from a Prometheus text page (-1 when
// it cannot).
func gauge(hc *http.Client, url, name string) float64 {
	resp, err := hc.Get(url)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
