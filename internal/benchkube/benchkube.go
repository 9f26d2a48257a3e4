// Package benchkube is `hetsched-bench kube`: hetsched's Kubernetes front
// end and the real kube-scheduler side by side on one API server and one
// KWOK fleet, and the bare binding limit of that API server.
//
// Glossary:
//
//	run        one scheduler (or the bare binder) placing Pods pods created
//	           at once in a namespace of its own
//	creation   the moment the driver made the Create call for a pod
//	bound      the moment the driver's informer saw the pod's nodeName set
//	bare       a client that binds each pod as soon as it sees it to a node
//	           decided in advance (round robin): no decision, only the API
//	           server's cost of a Binding
//	CPU        user+system seconds of the scheduler's process during the run
//	           (from /proc; the bare binder runs in the driver: none)
//	together   a run of two scheduler processes at once ("A&B",
//	           together.go), half the pods each: an A/B under one load
package benchkube

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/kube/kubetest"
	"github.com/hetsched/hetsched/internal/kube/kubewire"
)

// Schedulers a run can use.
const (
	Hetsched         = "hetsched"
	KubeScheduler    = "kube-scheduler"         // client limits raised to QPS/Burst
	KubeSchedulerDef = "kube-scheduler-default" // its defaults: 50 requests/s, burst 100
	Bare             = "bare"
	// WatchFloor is the bare binder with `hetsched kube --watch-only`
	// watching: that process's CPU is what seeing the cluster costs any
	// client-go scheduler.
	WatchFloor = "watch-floor"
	// BindFloor is `hetsched kube --watch-only --bind-floor` binding the
	// pods to the nodes in turn: its CPU is what seeing the cluster and
	// posting the Bindings costs any client-go scheduler, deciding nothing.
	BindFloor = "bind-floor"
	// Baseline is hetsched kube from Options.BaselineBin (another build,
	// say the previous commit's), side by side with this one.
	Baseline = "hetsched-baseline"
	// Restart measures a new hetsched kube's rebuild from a cluster whose
	// Pods pods are already bound (by the bare binder).
	Restart = "hetsched-restart"
	// Takeover measures a standby's takeover: two hetsched kube replicas
	// with leader election over Pods bound pods; the leader is killed
	// (SIGKILL) and the standby leads, holds every pod and binds a new one.
	Takeover = "hetsched-takeover"
)

// Options configure the benchmark.
type Options struct {
	Bin         string // the hetsched binary (for `hetsched kube`)
	BaselineBin string // the hetsched binary of the hetsched-baseline run
	Nodes       int    // KWOK nodes, each with GPUsPerNode nvidia.com/gpu
	GPUsPerNode int
	Pods        int // pods per run (Mix says what they ask for)
	// Mix is MixPlain (default) or MixRealistic (mix.go).
	Mix string
	// DefaultPods is the pod count of the kube-scheduler-default run
	// (at 50 requests/s a full run would take minutes).
	DefaultPods int
	QPS         float32
	Burst       int
	Runs        []string
	// Fresh gives every run a control plane and fleet of its own.
	Fresh bool
	// HetschedArgs are more flags for `hetsched kube`.
	HetschedArgs []string
	// LeaseDuration is the takeover run's --lease-duration (0: hetsched
	// kube's default, 15 s).
	LeaseDuration time.Duration
	// IdleWindow is how long a quiet scheduler's CPU is measured before
	// the pods (Result.IdleCores; 0: DefaultIdleWindow).
	IdleWindow time.Duration
	Log        io.Writer
}

// Result is one run's figures.
type Result struct {
	Scheduler  string  `json:"scheduler"`
	Pods       int     `json:"pods"`
	Bound      int     `json:"bound"`
	Seconds    float64 `json:"seconds"` // first creation to last bound
	PodsPerSec float64 `json:"pods_per_s"`
	P50        float64 `json:"p50_s"` // creation to bound
	P99        float64 `json:"p99_s"`
	CPUSeconds float64 `json:"cpu_s"`
	CPUPerPod  float64 `json:"cpu_ms_per_pod"`
	// IdleCores is the scheduler process's CPU, in cores, over the
	// Options.IdleWindow between its going quiet and the first pod: what it
	// spends on a fleet with nothing to schedule (heartbeats' node
	// updates, its timers), part of CPUSeconds for as long as a run lasts.
	IdleCores float64 `json:"idle_cores"`
	// PeakRSSMiB is the scheduler process's peak resident memory (VmHWM)
	// at the end of its run.
	PeakRSSMiB float64 `json:"peak_rss_mib,omitempty"`
	// ReadsPerPod and WritesPerPod are the scheduler process's read and
	// write system calls over the run (childproc.ReadSyscalls: the API
	// server's connection is most of them) per pod bound.
	ReadsPerPod  float64 `json:"reads_per_pod,omitempty"`
	WritesPerPod float64 `json:"writes_per_pod,omitempty"`
	// CreateSeconds is how long creating the pods took.
	CreateSeconds float64 `json:"create_s"`
	// For Restart: from the process's start until its engine held every
	// bound pod (AdoptSeconds), and until a pod created then was bound
	// (FirstBindSeconds).
	AdoptSeconds     float64 `json:"adopt_s,omitempty"`
	FirstBindSeconds float64 `json:"first_bind_s,omitempty"`
	// For Takeover: from the leader's kill until the standby reported
	// leading (LeadSeconds), until its engine held every bound pod
	// (AdoptSeconds), and until a pod created at the kill was bound
	// (FirstBindSeconds).
	LeadSeconds float64 `json:"lead_s,omitempty"`
}

// Run starts a control plane, the fleet, and each run in order.
func Run(ctx context.Context, o Options) ([]*Result, error) {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, format+"\n", args...)
		}
	}
	most := o.Pods
	if slices.Contains(o.Runs, KubeSchedulerDef) {
		most = max(most, o.DefaultPods)
	}
	switch o.Mix {
	case "":
		o.Mix = MixPlain
	case MixPlain, MixRealistic:
	default:
		return nil, fmt.Errorf("mix: %q is not %s or %s", o.Mix, MixPlain, MixRealistic)
	}
	if g := gpuPods(o.Mix, most); g > gpuNodes(o.Mix, o.Nodes)*o.GPUsPerNode {
		return nil, fmt.Errorf("%d pods ask for %d GPUs, more than %d nodes of %d hold: every run would leave pods waiting", most, g, gpuNodes(o.Mix, o.Nodes), o.GPUsPerNode)
	}
	for _, r := range o.Runs {
		if parts := strings.Split(r, Together); len(parts) > 1 {
			for _, part := range parts {
				base, extra := splitRun(part)
				if !isProcess(base) {
					return nil, fmt.Errorf("runs: %q: only scheduler processes run together (hetsched, hetsched-baseline, bind-floor, kube-scheduler, kube-scheduler-default), not %q", r, part)
				}
				if base == Baseline && o.BaselineBin == "" {
					return nil, fmt.Errorf("runs: %s needs the baseline's binary (--baseline-bin)", r)
				}
				if err := checkExtra(part, base, extra); err != nil {
					return nil, err
				}
			}
			continue
		}
		base, extra := splitRun(r)
		switch base {
		case Hetsched, KubeScheduler, KubeSchedulerDef, Bare, WatchFloor, BindFloor, Restart, Takeover:
		case Baseline:
			if o.BaselineBin == "" {
				return nil, fmt.Errorf("runs: %s needs the baseline's binary (--baseline-bin)", r)
			}
		default:
			return nil, fmt.Errorf("runs: want bare, watch-floor, hetsched, hetsched-baseline, kube-scheduler, kube-scheduler-default, bind-floor, hetsched-restart or hetsched-takeover, got %q", r)
		}
		if err := checkExtra(r, base, extra); err != nil {
			return nil, err
		}
	}
	tools := kubetest.ToolsDir()
	for _, b := range []string{"kube-apiserver", "kube-scheduler", "etcd", "kwok"} {
		if _, err := os.Stat(filepath.Join(tools, b)); err != nil {
			return nil, fmt.Errorf("bench kube needs %s in %s: build it with %s", b, tools, kubetest.BuildCommand)
		}
	}
	p, err := startPlane(ctx, o, logf)
	if err != nil {
		return nil, err
	}
	failed := false
	defer func() { p.close(failed, logf) }()
	var out []*Result
	for i, r := range o.Runs {
		if o.Fresh && i > 0 {
			// Each run on a control plane of its own: a long bench's API
			// server grows and slows, and later runs pay for it.
			p.close(false, logf)
			next, err := startPlane(ctx, o, logf)
			if err != nil {
				return out, err
			}
			p = next
		}
		n := o.Pods
		if r == KubeSchedulerDef {
			n = o.DefaultPods
		}
		if strings.Contains(r, Together) {
			res, err := p.d.together(ctx, p.c, o, r, fmt.Sprintf("run%d-together", i), n, logf)
			out = append(out, res...)
			if err != nil {
				failed = true
				return out, fmt.Errorf("%s: %w", r, err)
			}
			for _, x := range res {
				logBound(logf, x)
			}
			continue
		}
		run := p.d.run
		switch r {
		case Restart:
			run = p.d.restart
		case Takeover:
			run = p.d.takeover
		}
		base, _ := splitRun(r)
		res, err := run(ctx, p.c, o, r, fmt.Sprintf("run%d-%s", i, base), n, logf)
		if err != nil {
			failed = true
			return out, fmt.Errorf("%s: %w", r, err)
		}
		out = append(out, res)
		switch r {
		case Restart:
			logf("%s: %d bound pods held %.2fs after the start, a new pod bound %.2fs after it, CPU %.1fs",
				r, res.Bound, res.AdoptSeconds, res.FirstBindSeconds, res.CPUSeconds)
			continue
		case Takeover:
			logf("%s: after the leader's kill, the standby led at %.2fs, held %d bound pods at %.2fs, bound a new pod at %.2fs",
				r, res.LeadSeconds, res.Bound, res.AdoptSeconds, res.FirstBindSeconds)
			continue
		}
		logBound(logf, res)
	}
	return out, nil
}

// logBound logs a run's figures.
func logBound(logf func(string, ...any), r *Result) {
	logf("%s: %d pods bound in %.2fs: %.0f pods/s, p50 %.3fs p99 %.3fs, CPU %.1fs (%.2f ms/pod)",
		r.Scheduler, r.Bound, r.Seconds, r.PodsPerSec, r.P50, r.P99, r.CPUSeconds, r.CPUPerPod)
}

// plane is a running control plane with its fleet and the driver's watch.
type plane struct {
	c      *kubetest.Cluster
	d      *driver
	stop   chan struct{}
	closed bool
}

// startPlane starts etcd, kube-apiserver and KWOK, the fleet, and the
// driver's watch.
func startPlane(ctx context.Context, o Options, logf func(string, ...any)) (*plane, error) {
	logf("starting etcd, kube-apiserver and KWOK")
	c, err := kubetest.StartMain(kubetest.Options{})
	if err != nil {
		return nil, err
	}
	p := &plane{c: c, stop: make(chan struct{})}
	cs, err := kubernetes.NewForConfig(c.RESTConfig(o.QPS, o.Burst))
	if err != nil {
		p.close(true, logf)
		return nil, err
	}
	t0 := time.Now()
	if err := fleet(ctx, cs, o.Nodes, o.GPUsPerNode, o.Mix); err != nil {
		p.close(true, logf)
		return nil, err
	}
	logf("%d nodes Ready in %.1fs", o.Nodes, time.Since(t0).Seconds())
	p.d = newDriver(cs, o.Mix)
	if err := p.d.start(p.stop); err != nil {
		p.close(true, logf)
		return nil, err
	}
	return p, nil
}

// close stops the plane once, keeping its logs when something failed.
func (p *plane) close(failed bool, logf func(string, ...any)) {
	if p.closed {
		return
	}
	p.closed = true
	close(p.stop)
	p.c.Stop()
	if failed {
		logf("logs kept in %s", p.c.Dir)
		return
	}
	os.RemoveAll(p.c.Dir)
}

// nodeName is the fleet's i-th node.
func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// fleet creates n KWOK nodes with gpus GPUs each and waits until all are
// Ready.
func fleet(ctx context.Context, cs kubernetes.Interface, n, gpus int, mix string) error {
	rl := corev1.ResourceList{
		corev1.ResourceCPU: k8sresource.MustParse("64"), corev1.ResourceMemory: k8sresource.MustParse("512Gi"),
		corev1.ResourcePods: k8sresource.MustParse("110"), "nvidia.com/gpu": *k8sresource.NewQuantity(int64(gpus), k8sresource.DecimalSI),
	}
	err := each(32, n, func(i int) error {
		name := nodeName(i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: nodeLabels(mix, i)},
			Status: corev1.NodeStatus{Capacity: rl, Allocatable: rl},
		}
		_, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return err
	}
	return kubetest.WaitNodesReady(ctx, cs, "bench=kube", n, 5*time.Minute)
}

// driver creates pods and sees them bound.
type driver struct {
	cs      kubernetes.Interface
	mix     string // the pods' mix (mix.go)
	mu      sync.Mutex
	created map[string]time.Time // namespace/name -> creation
	bound   map[string]time.Time
	// bare, when set, binds every unbound pod of its namespace it sees.
	bare atomic.Pointer[bareBinder]
}

func newDriver(cs kubernetes.Interface, mix string) *driver {
	return &driver{cs: cs, mix: mix, created: map[string]time.Time{}, bound: map[string]time.Time{}}
}

func (d *driver) start(stop chan struct{}) error {
	f := informers.NewSharedInformerFactory(d.cs, 0)
	inf := f.Core().V1().Pods().Informer()
	seen := func(o any) {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return
		}
		key := p.Namespace + "/" + p.Name
		if p.Spec.NodeName != "" {
			d.mu.Lock()
			if _, done := d.bound[key]; !done {
				d.bound[key] = time.Now()
			}
			d.mu.Unlock()
			return
		}
		if b := d.bare.Load(); b != nil && p.Namespace == b.ns {
			b.queue <- p
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		return err
	}
	f.Start(stop)
	for _, ok := range f.WaitForCacheSync(stop) {
		if !ok {
			return fmt.Errorf("the driver's informer did not sync")
		}
	}
	return nil
}

// run measures one scheduler on n new pods in namespace ns.
func (d *driver) run(ctx context.Context, c *kubetest.Cluster, o Options, sched, ns string, n int, logf func(string, ...any)) (*Result, error) {
	if _, err := d.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	label := sched
	sched, _ = splitRun(sched)
	name := "bench-" + strings.ReplaceAll(sched, "-", "") + "-" + strings.TrimPrefix(ns, "run")
	var proc *exec.Cmd
	var err error
	switch {
	case isProcess(sched):
		proc, err = startScheduler(ctx, c, o, label, name, logf)
	case sched == Bare || sched == WatchFloor:
		if sched == WatchFloor {
			args := append(hetschedArgs(c, o, name, ""), "--watch-only")
			if proc, err = startProc(ctx, c, logf, o.Bin, args...); err != nil {
				return nil, err
			}
		}
		b := newBareBinder(d.cs, ns, n, o.Nodes)
		d.bare.Store(b)
		defer d.bare.Store(nil)
		bctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go b.run(bctx, 256)
	default:
		return nil, fmt.Errorf("unknown scheduler %q", sched)
	}
	if err != nil {
		return nil, err
	}
	idle := 0.0
	if proc != nil {
		defer stopProc(proc)
		// Its informers' lists are done before the pods come: not part of
		// the measure.
		waited, quiet := quietAfter(ctx, func() float64 { return procCPU(proc) }, time.Now, time.Sleep)
		idle = idleCores(ctx, o.IdleWindow, func() float64 { return procCPU(proc) })
		logf("%s: quiet %v after %v (measured either way), then %.1f millicores idle", label, quiet, waited.Round(time.Millisecond), idle*1000)
	}
	markWindow(label, proc, true)
	cpu0, calls0 := procCPU(proc), procSyscalls(proc)
	t0 := time.Now()
	keys, err := d.createPods(ctx, ns, func(int) string { return name }, n)
	if err != nil {
		return nil, err
	}
	created := time.Since(t0)
	err = kubetest.WaitFor(ctx, 15*time.Minute, func() (bool, string, error) {
		b := d.countBound(keys)
		return b == n, fmt.Sprintf("%d of %d bound", b, n), nil
	})
	cpu, calls := procCPU(proc)-cpu0, procSyscalls(proc)
	markWindow(label, proc, false)
	res := d.result(label, keys, cpu)
	res.perPodSyscalls(calls0, calls)
	res.IdleCores = idle
	if proc != nil && proc.Process != nil {
		if m, err := childproc.ReadMemory(proc.Process.Pid); err == nil {
			res.PeakRSSMiB = float64(m.Peak) / (1 << 20)
		}
	}
	res.CreateSeconds = created.Seconds()
	if err != nil {
		return res, err
	}
	return res, d.removePods(ctx, ns, logf)
}

// bindBare creates namespace ns and n pods in it, bound by the bare
// binder: other schedulers' pods to hetsched.
func (d *driver) bindBare(ctx context.Context, o Options, ns string, n int) error {
	if _, err := d.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	b := newBareBinder(d.cs, ns, n, o.Nodes)
	d.bare.Store(b)
	bctx, stopBare := context.WithCancel(ctx)
	go b.run(bctx, 256)
	keys, err := d.createPods(ctx, ns, func(int) string { return "bench-bare" }, n)
	if err == nil {
		err = kubetest.WaitFor(ctx, 15*time.Minute, func() (bool, string, error) {
			got := d.countBound(keys)
			return got == n, fmt.Sprintf("%d of %d bound", got, n), nil
		})
	}
	stopBare()
	d.bare.Store(nil)
	return err
}

// createPods creates n pods at once (64 clients), every other one asking
// for a GPU, pod i for the scheduler named schedOf(i).
func (d *driver) createPods(ctx context.Context, ns string, schedOf func(i int) string, n int) ([]string, error) {
	keys := make([]string, n)
	err := each(64, n, func(i int) error {
		req := corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("500m"), corev1.ResourceMemory: k8sresource.MustParse("1Gi")}
		lim := corev1.ResourceList{}
		if gpuPod(d.mix, i) {
			req["nvidia.com/gpu"] = k8sresource.MustParse("1")
			lim["nvidia.com/gpu"] = k8sresource.MustParse("1")
		}
		name, sched := fmt.Sprintf("p-%06d", i), schedOf(i)
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: corev1.PodSpec{SchedulerName: sched, Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: req, Limits: lim}}}},
		}
		shapePod(d.mix, i, p)
		if sched == "bench-bare" {
			p.Spec.SchedulerName = "none" // no scheduler's: the bare binder binds it
		}
		key := ns + "/" + name
		d.mu.Lock()
		d.created[key] = time.Now()
		d.mu.Unlock()
		if _, err := d.cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
		keys[i] = key
		return nil
	})
	return keys, err
}

// each runs fn(0..n-1) on workers goroutines and returns the first error
// (the workers stop taking items once one failed).
func each(workers, n int, fn func(i int) error) error {
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n && failed.Load() == nil; i = int(next.Add(1)) - 1 {
				if err := fn(i); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := failed.Load(); p != nil {
		return *p
	}
	return nil
}

func (d *driver) countBound(keys []string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, k := range keys {
		if _, ok := d.bound[k]; ok {
			n++
		}
	}
	return n
}

// result computes a run's figures.
func (d *driver) result(sched string, keys []string, cpu float64) *Result {
	d.mu.Lock()
	defer d.mu.Unlock()
	var first, last time.Time
	var lat []float64
	for _, k := range keys {
		c := d.created[k]
		if first.IsZero() || c.Before(first) {
			first = c
		}
		b, ok := d.bound[k]
		if !ok {
			continue
		}
		if b.After(last) {
			last = b
		}
		lat = append(lat, b.Sub(c).Seconds())
	}
	sort.Float64s(lat)
	r := &Result{Scheduler: sched, Pods: len(keys), Bound: len(lat), CPUSeconds: cpu}
	if len(lat) > 0 {
		r.Seconds = last.Sub(first).Seconds()
		r.PodsPerSec = float64(len(lat)) / r.Seconds
		r.P50 = lat[len(lat)/2]
		r.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
		r.CPUPerPod = cpu * 1000 / float64(len(lat))
	}
	return r
}

// perPodSyscalls sets the system calls per pod bound from the counts at
// the run's start and end (nothing where they are unknown).
func (r *Result) perPodSyscalls(start, end childproc.Syscalls) {
	if r.Bound == 0 || end.Reads == 0 && end.Writes == 0 {
		return
	}
	r.ReadsPerPod = float64(end.Reads-start.Reads) / float64(r.Bound)
	r.WritesPerPod = float64(end.Writes-start.Writes) / float64(r.Bound)
}

// bareBinder binds the pods of its namespace to the nodes in turn, as the
// driver's watch sees them (kubewire.TurnBinder: no decision).
type bareBinder struct {
	kubewire.TurnBinder
	ns    string
	queue chan *corev1.Pod
}

func newBareBinder(cs kubernetes.Interface, ns string, n, nodes int) *bareBinder {
	b := &bareBinder{TurnBinder: kubewire.TurnBinder{Client: cs, Timeout: 10 * time.Second}, ns: ns, queue: make(chan *corev1.Pod, n+1024)}
	for i := range nodes {
		b.Nodes = append(b.Nodes, nodeName(i))
	}
	return b
}

func (b *bareBinder) run(ctx context.Context, workers int) { b.Run(ctx, b.queue, workers) }

// Table writes results side by side with ratios to the first run.
func Table(w io.Writer, rs []*Result) {
	fmt.Fprintf(w, "%-24s %7s %9s %9s %8s %8s %8s %10s %9s %9s %9s\n", "scheduler", "pods", "seconds", "pods/s", "p50 s", "p99 s", "CPU s", "CPU ms/pod", "idle mcpu", "peak MiB", "rd/wr/pod")
	for _, r := range rs {
		if r.Scheduler == Restart || r.Scheduler == Takeover {
			continue
		}
		fmt.Fprintf(w, "%-24s %7d %9.2f %9.0f %8.3f %8.3f %8.1f %10.3f %9.1f %9.0f %4.1f/%4.1f\n", r.Scheduler, r.Bound, r.Seconds, r.PodsPerSec, r.P50, r.P99, r.CPUSeconds, r.CPUPerPod, r.IdleCores*1000, r.PeakRSSMiB, r.ReadsPerPod, r.WritesPerPod)
	}
	for _, r := range rs {
		switch r.Scheduler {
		case Restart:
			fmt.Fprintf(w, "%s: %d bound pods held by a new hetsched kube %.2f s after its start (its gauge is updated each second), a new pod bound %.2f s after it; CPU %.1f s\n",
				r.Scheduler, r.Bound, r.AdoptSeconds, r.FirstBindSeconds, r.CPUSeconds)
		case Takeover:
			fmt.Fprintf(w, "%s: after the leader's SIGKILL, the standby led at %.2f s, held the %d bound pods at %.2f s (its gauge is updated each second), bound a pod created at the kill at %.2f s\n",
				r.Scheduler, r.LeadSeconds, r.Bound, r.AdoptSeconds, r.FirstBindSeconds)
		}
	}
}
