package kube_test

import (
	"context"
	"fmt"
	"github.com/hetsched/hetsched/internal/kube/kubewire"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/kube"
	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// One control plane serves every test of the package (it takes seconds to
// start); tests keep apart by their own namespaces, node labels and
// scheduler names.
var (
	shared kubetest.Shared
	runs   atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// cluster returns the shared control plane, started on first use.
func cluster(t *testing.T) *kubetest.Cluster {
	t.Helper()
	return shared.Get(t)
}

// env is one test's corner of the cluster.
type env struct {
	t      *testing.T
	c      *kubetest.Cluster
	cs     kubernetes.Interface
	ctx    context.Context
	dyn    dynamic.Interface // for custom resources
	ns     string            // the test's namespace
	sched  string            // its scheduler name
	prefix string            // its node names' prefix
}

func newEnv(t *testing.T) *env {
	c := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	name := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	if len(name) > 36 {
		name = name[:36]
	}
	// Unique across -count runs against the one control plane.
	name = fmt.Sprintf("%s-%d", strings.TrimRight(name, "-"), runs.Add(1))
	dyn, err := dynamic.NewForConfig(c.JSONConfig(1000, 2000))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, c: c, cs: c.Client(t), dyn: dyn, ctx: ctx, ns: name, sched: "hs-" + name, prefix: name + "-"}
	if _, err := e.cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Nodes go (namespaces are never finalized without a
		// controller-manager, so the test's pods stay, on no node).
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		nodes, _ := e.cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "test=" + e.ns})
		for _, n := range nodes.Items {
			e.cs.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		}
		pods, _ := e.cs.CoreV1().Pods(e.ns).List(ctx, metav1.ListOptions{})
		zero := int64(0)
		for _, p := range pods.Items {
			e.cs.CoreV1().Pods(e.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	})
	return e
}

// running is a Scheduler running over its own engine.
type running struct {
	eng  *engine.Engine
	stop func()
}

// start runs a Scheduler (with a fresh in-memory engine) until stopped or
// the test ends.
func (e *env) start() *running { return e.startWith(nil) }

// startWith is start with the Scheduler's configuration changed by tune.
func (e *env) startWith(tune func(*kube.Config)) *running {
	e.t.Helper()
	lg := slog.New(slog.NewTextHandler(testWriter{e.t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	st, err := kube.OpenMemStore(lg)
	if err != nil {
		e.t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Core: kube.CoreConfig(), Logger: lg}, st)
	if err != nil {
		e.t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(e.c.RESTConfig(1000, 2000))
	if err != nil {
		e.t.Fatal(err)
	}
	// The Kubernetes client's pieces as hetsched kube runs them
	// (HETSCHED_KUBE_WIRE=stock: client-go's own paths).
	cfg := kube.Config{Client: cs, Dynamic: e.dyn, Engine: eng, SchedulerName: e.sched, Logger: lg}
	if wire := testWire(e.t); wire.LeanWatch {
		if cfg.PodInformer, err = kubewire.PodInformer(e.c.RESTConfig(1000, 2000), cs); err != nil {
			e.t.Fatal(err)
		}
	}
	if cfg.Binder, err = kubewire.NewBinder(testWire(e.t).BindVia, cs); err != nil {
		e.t.Fatal(err)
	}
	if tune != nil {
		tune(&cfg)
	}
	s, err := kube.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("scheduler: %v", err)
			}
			eng.Close()
			st.Close()
		})
	}
	e.t.Cleanup(stop)
	return &running{eng: eng, stop: stop}
}

// testWire is the Kubernetes client's pieces the tests run with:
// kubewire.Fast, or with HETSCHED_KUBE_WIRE=stock client-go's own paths
// (CI runs the package both ways).
func testWire(t *testing.T) kubewire.Options {
	switch v := os.Getenv("HETSCHED_KUBE_WIRE"); v {
	case "", "fast":
		return kubewire.Fast()
	case "stock":
		return kubewire.Stock()
	default:
		t.Fatalf("HETSCHED_KUBE_WIRE=%q: want fast or stock", v)
		return kubewire.Options{}
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// node creates a KWOK node of the test with allocatable alloc (cpu and
// memory added when absent) and labels.
func (e *env) node(name string, alloc map[string]string, labels map[string]string) {
	e.t.Helper()
	rl := corev1.ResourceList{
		corev1.ResourceCPU: k8sresource.MustParse("32"), corev1.ResourceMemory: k8sresource.MustParse("256Gi"),
		corev1.ResourcePods: k8sresource.MustParse("110"),
	}
	for k, v := range alloc {
		rl[corev1.ResourceName(k)] = k8sresource.MustParse(v)
	}
	l := map[string]string{"test": e.ns, "kubernetes.io/hostname": e.prefix + name}
	for k, v := range labels {
		l[k] = v
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: e.prefix + name, Labels: l, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Status:     corev1.NodeStatus{Capacity: rl, Allocatable: rl},
	}
	if _, err := e.cs.CoreV1().Nodes().Create(e.ctx, n, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	// KWOK makes it Ready.
	e.wait("node "+n.Name+" Ready", func() (bool, string) {
		got, err := e.cs.CoreV1().Nodes().Get(e.ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range got.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprint(got.Status.Conditions)
	})
}

// podSpec is a pod of the test's scheduler asking for requests, kept to
// the test's nodes.
func (e *env) podSpec(name string, requests map[string]string) *corev1.Pod {
	rl := corev1.ResourceList{}
	for k, v := range requests {
		rl[corev1.ResourceName(k)] = k8sresource.MustParse(v)
	}
	limits := corev1.ResourceList{}
	for k, v := range rl {
		if strings.Contains(string(k), "/") || strings.HasPrefix(string(k), corev1.ResourceHugePagesPrefix) {
			limits[k] = v // extended resources and huge pages need limits equal to requests
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Annotations: map[string]string{}, Labels: map[string]string{}},
		Spec: corev1.PodSpec{
			SchedulerName: e.sched,
			NodeSelector:  map[string]string{"test": e.ns},
			Containers:    []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: rl, Limits: limits}}},
		},
	}
}

func (e *env) create(p *corev1.Pod) *corev1.Pod {
	e.t.Helper()
	got, err := e.cs.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func (e *env) get(name string) *corev1.Pod {
	e.t.Helper()
	p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) wait(what string, cond func() (bool, string)) {
	e.t.Helper()
	err := kubetest.WaitFor(e.ctx, 60*time.Second, func() (bool, string, error) {
		ok, msg := cond()
		return ok, msg, nil
	})
	if err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// waitBound waits until the pod is bound and returns it.
func (e *env) waitBound(name string) *corev1.Pod {
	e.t.Helper()
	var p *corev1.Pod
	e.wait("pod "+name+" bound", func() (bool, string) {
		p = e.get(name)
		return p.Spec.NodeName != "", fmt.Sprintf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
	})
	return p
}

// waitReady waits until the pod is Ready (KWOK's doing, once bound).
func (e *env) waitReady(name string) {
	e.t.Helper()
	e.wait("pod "+name+" Ready", func() (bool, string) {
		p := e.get(name)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, fmt.Sprintf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
	})
}

// waitReason waits for the pod's PodScheduled=False condition to say
// want, and for a FailedScheduling event from hetsched on it; it returns
// the event's note. (Events of one pod and reason form a series that
// keeps its first note, as kube-scheduler's do: the condition has the
// latest reason.)
func (e *env) waitReason(name, want string) string {
	e.t.Helper()
	e.wait("PodScheduled=False on "+name+" saying "+want, func() (bool, string) {
		p := e.get(name)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable &&
				strings.HasPrefix(c.Message, "hetsched: ") && strings.Contains(c.Message, want) {
				return true, ""
			}
		}
		return false, fmt.Sprint(p.Status.Conditions)
	})
	return e.waitEvent(name, "FailedScheduling", "hetsched: ")
}

// waitEvent waits for an event of reason on the pod whose note holds
// note, and returns the note.
func (e *env) waitEvent(name, reason, note string) string {
	e.t.Helper()
	var got string
	e.wait("a "+reason+" event on "+name, func() (bool, string) {
		evs, err := e.cs.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + name})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, ev := range evs.Items {
			seen = append(seen, ev.Reason+": "+ev.Note)
			if ev.Reason == reason && strings.Contains(ev.Note, note) {
				got = ev.Note
				return true, ""
			}
		}
		return false, fmt.Sprint(seen)
	})
	return got
}

func (e *env) delete(name string) {
	e.t.Helper()
	zero := int64(0)
	if err := e.cs.CoreV1().Pods(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		e.t.Fatal(err)
	}
	e.wait("pod "+name+" gone", func() (bool, string) {
		_, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, name, metav1.GetOptions{})
		return err != nil, "still there"
	})
}

// dynamic is the admin client for custom resources.
func (e *env) dynamic() dynamic.Interface { return e.dyn }

// counter reads a counter of reg by one label's value (0 when absent).
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
