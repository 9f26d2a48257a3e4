package benchkube

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// A small bench kube runs every run to the end: every pod bound, with
// rates, latencies and (for the scheduler processes) CPU measured; a fleet
// too small for the pods is refused before anything starts.
func TestSmallBenchRunsEveryScheduler(t *testing.T) {
	kubetest.Require(t)
	if _, err := os.Stat(filepath.Join(kubetest.ToolsDir(), "kube-scheduler")); err != nil {
		t.Fatalf("kube-scheduler missing beside the other tools: %v", err)
	}
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	prof := filepath.Join(t.TempDir(), "window.prof") // hetsched's, over its measured window
	o := Options{Bin: bin, Nodes: 20, GPUsPerNode: 8, Pods: 200, DefaultPods: 40, QPS: 2000, Burst: 4000, LeaseDuration: 2 * time.Second, IdleWindow: 300 * time.Millisecond,
		// Restart's and Takeover's pods stay bound: they come last.
		Runs: []string{Bare, WatchFloor, BindFloor, Hetsched + ":--cpu-profile=" + prof + "+" + profileWindowFlag, KubeScheduler, KubeSchedulerDef,
			Hetsched + Together + BindFloor, Restart, Takeover}}
	if _, err := Run(context.Background(), Options{Nodes: 1, GPUsPerNode: 1, Pods: 10}); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("a fleet too small: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != len(o.Runs)+1 { // one run is two schedulers'
		t.Fatalf("%d results for %d runs", len(rs), len(o.Runs))
	}
	together := 0
	for _, r := range rs {
		want := o.Pods
		if r.Scheduler == KubeSchedulerDef {
			want = o.DefaultPods
		}
		if strings.HasSuffix(r.Scheduler, " (together)") {
			want = o.Pods / 2 // every other pod
			together++
		}
		if r.Scheduler == Takeover {
			if r.Bound != want || r.LeadSeconds <= 0 || r.AdoptSeconds < r.LeadSeconds || r.FirstBindSeconds < r.LeadSeconds || r.CPUSeconds <= 0 {
				t.Errorf("takeover: %+v", r)
			}
			continue
		}
		if r.Bound != want || r.PodsPerSec <= 0 || r.Scheduler != Restart && r.P50 <= 0 {
			t.Errorf("%s: %+v", r.Scheduler, r)
		}
		if r.Scheduler != Bare && r.CPUSeconds <= 0 {
			t.Errorf("%s: no CPU measured", r.Scheduler)
		}
		if r.IdleCores < 0 || r.IdleCores > 0.5 {
			t.Errorf("%s: %.2f cores idle, between going quiet and the pods", r.Scheduler, r.IdleCores)
		}
		if r.Scheduler != Bare && r.Scheduler != Restart && r.PeakRSSMiB <= 0 {
			t.Errorf("%s: no peak memory measured", r.Scheduler)
		}
		if r.Scheduler != Bare && r.Scheduler != Restart && r.Scheduler != Takeover && (r.ReadsPerPod <= 0 || r.WritesPerPod <= 0) {
			t.Errorf("%s: system calls per pod not measured: %.1f reads, %.1f writes", r.Scheduler, r.ReadsPerPod, r.WritesPerPod)
		}
		if r.Scheduler == Restart && r.AdoptSeconds <= 0 {
			t.Errorf("restart: adopted after %v s, first bind after %v s", r.AdoptSeconds, r.FirstBindSeconds)
		}
	}
	if together != 2 {
		t.Errorf("%d results of the run together, want 2", together)
	}
	if b, err := os.ReadFile(prof); err != nil || !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
		t.Errorf("the windowed profile: %d bytes, %v; want a gzipped profile", len(b), err)
	}
	var b strings.Builder
	Table(&b, rs)
	if !strings.Contains(b.String(), "kube-scheduler-default") || !strings.Contains(b.String(), "held by a new hetsched kube") || !strings.Contains(b.String(), "after the leader's SIGKILL") {
		t.Errorf("table:\n%s", b.String())
	}
}

// A run may give hetsched flags of its own (A/B runs in one bench); the
// other schedulers take none.
func TestRunNamesWithFlags(t *testing.T) {
	for r, want := range map[string][]string{
		"hetsched":                  nil,
		"hetsched:":                 nil,
		"hetsched:--gc-percent=100": {"--gc-percent=100"},
		"hetsched:--gc-percent=100+--bind-workers=8": {"--gc-percent=100", "--bind-workers=8"},
	} {
		base, extra := splitRun(r)
		if base != Hetsched || !slices.Equal(extra, want) {
			t.Errorf("splitRun(%q) = %q %q, want hetsched %q", r, base, extra, want)
		}
	}
	if _, err := Run(context.Background(), Options{Nodes: 10, GPUsPerNode: 8, Pods: 10, Runs: []string{"kube-scheduler:--v=4"}}); err == nil || !strings.Contains(err.Error(), "only hetsched") {
		t.Errorf("flags for kube-scheduler: %v", err)
	}
	// Only scheduler processes run together (the bare binder is the
	// driver's own).
	if _, err := Run(context.Background(), Options{Nodes: 10, GPUsPerNode: 8, Pods: 10, Runs: []string{Bare + Together + Hetsched}}); err == nil || !strings.Contains(err.Error(), "run together") {
		t.Errorf("the bare binder together with hetsched: %v", err)
	}
	if _, err := Run(context.Background(), Options{Nodes: 10, GPUsPerNode: 8, Pods: 10, Runs: []string{"bare:GOGC=400"}}); err == nil || !strings.Contains(err.Error(), "only scheduler processes") {
		t.Errorf("the Go environment of the bare binder: %v", err)
	}
	if env, flags := splitEnv([]string{"GOMAXPROCS=1", "--gc-percent=100", "GOGC=400"}); !slices.Equal(env, []string{"GOMAXPROCS=1", "GOGC=400"}) || !slices.Equal(flags, []string{"--gc-percent=100"}) {
		t.Errorf("splitEnv: %q %q", env, flags)
	}
	// The floor takes flags too (a profile of it, beside hetsched's), and
	// kube-scheduler its Go environment (together with hetsched too).
	t.Setenv("HETSCHED_K8S_TOOLS", t.TempDir())
	for _, runs := range [][]string{{"bind-floor:--cpu-profile=/dev/null"}, {"kube-scheduler:GOMAXPROCS=1"}, {"kube-scheduler:GOMAXPROCS=1" + Together + "hetsched:GOGC=200"}} {
		if _, err := Run(context.Background(), Options{Nodes: 10, GPUsPerNode: 8, Pods: 10, Runs: runs}); err == nil || !strings.Contains(err.Error(), "bench kube needs") {
			t.Errorf("%q: %v, want only the missing tools", runs, err)
		}
	}
	if _, err := Run(context.Background(), Options{Nodes: 10, GPUsPerNode: 8, Pods: 10, Runs: []string{"kube-scheduler:--v=4" + Together + "hetsched"}}); err == nil || !strings.Contains(err.Error(), "only hetsched") {
		t.Errorf("flags for kube-scheduler, together: %v", err)
	}
}

// A scheduler counts as ready once its CPU has gone quiet for a window:
// busy while it lists, it is waited on; one that never goes quiet is
// given up on after QuietMax.
func TestQuietAfterWaitsOutTheLists(t *testing.T) {
	var clock time.Duration
	now := func() time.Time { return time.Unix(0, 0).Add(clock) }
	sleep := func(d time.Duration) { clock += d }
	busyFor := 3 * time.Second
	cpu := func() float64 { return min(clock, busyFor).Seconds() * 0.9 } // 0.9 of a core, then nothing
	waited, quiet := quietAfter(context.Background(), cpu, now, sleep)
	if !quiet || waited < busyFor+QuietWindow || waited > busyFor+QuietWindow+2*QuietPoll {
		t.Errorf("busy for %v: quiet %v after %v, want quiet a window later", busyFor, quiet, waited)
	}
	clock = 0
	always := func() float64 { return clock.Seconds() * 0.2 }
	if waited, quiet := quietAfter(context.Background(), always, now, sleep); quiet || waited < QuietMax {
		t.Errorf("never quiet: quiet %v after %v, want given up after %v", quiet, waited, QuietMax)
	}
}

// With Fresh every run gets a control plane of its own, and each still
// binds every pod.
func TestFreshRunsEachOnItsOwnPlane(t *testing.T) {
	kubetest.Require(t)
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	o := Options{Bin: bin, Nodes: 10, GPUsPerNode: 8, Pods: 50, QPS: 2000, Burst: 4000, Fresh: true, Runs: []string{Bare, Hetsched}, Log: &log, IdleWindow: 300 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[0].Bound != o.Pods || rs[1].Bound != o.Pods {
		t.Fatalf("results %+v %+v", rs[0], rs[1])
	}
	if n := strings.Count(log.String(), "starting etcd, kube-apiserver and KWOK"); n != 2 {
		t.Errorf("%d control planes started for two fresh runs:\n%s", n, log.String())
	}
	if !strings.Contains(log.String(), "hetsched: quiet true") || !strings.Contains(log.String(), "millicores idle") {
		t.Errorf("no quiet scheduler's idle CPU in the log:\n%s", log.String())
	}
}

// TestRealisticMixBindsEveryPod: the realistic mix (anti-affinity by
// hostname and zone, spread over zones, GPU node affinity, host ports)
// can be placed whole on its fleet, by hetsched and by kube-scheduler.
func TestRealisticMixBindsEveryPod(t *testing.T) {
	kubetest.Require(t)
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Bin: bin, Mix: MixRealistic, Nodes: 24, GPUsPerNode: 8, Pods: 240, QPS: 2000, Burst: 4000, IdleWindow: 300 * time.Millisecond,
		Runs: []string{Hetsched, KubeScheduler}}
	if _, err := Run(context.Background(), Options{Mix: "odd", Nodes: 1, GPUsPerNode: 1, Pods: 1}); err == nil || !strings.Contains(err.Error(), "mix") {
		t.Errorf("an unknown mix: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rs, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Bound != o.Pods {
			t.Errorf("%s bound %d of %d realistic pods", r.Scheduler, r.Bound, o.Pods)
		}
	}
}
