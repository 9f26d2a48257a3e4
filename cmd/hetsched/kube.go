package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/kube"
	"github.com/hetsched/hetsched/internal/kube/kubewire"
	"github.com/hetsched/hetsched/internal/procs"
	"github.com/hetsched/hetsched/internal/server"
	"github.com/hetsched/hetsched/internal/telemetry"
)

func newKube() *cobra.Command {
	var opt kube.Options
	var queues, cpuProfile, allocProfile string
	var gcPercent, maxProcs int
	var cpuProfileWindow, defaultSpread bool
	var bindVia string
	var logs logFlags
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "Schedule a Kubernetes cluster's pods (schedulerName: hetsched) with hetsched's engine",
		Long: `Schedule a Kubernetes cluster's pods with hetsched's engine: the cluster is the
source of truth and the executor. Nodes (allocatable, extended resources such as
nvidia.com/gpu and google.com/tpu, GPU feature discovery labels, taints, cordons)
and pods (requests, nodeSelector, required node affinity, tolerations, priority,
the hetsched.io/queue label, gangs) are mirrored into the engine; its decisions
go back as Bindings with the device ids in the hetsched.io/devices annotation,
FailedScheduling events with the reason, and evictions for preemption.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opt.NoDefaultSpread = !defaultSpread
			via, err := kubewire.ParseBindVia(bindVia)
			if err != nil {
				return err
			}
			opt.Wire.BindVia = via
			if queues != "" {
				qs, err := server.LoadQueuesFile(queues)
				if err != nil {
					return err
				}
				opt.Queues = qs
			}
			lg, err := telemetry.NewLogger(cmd.ErrOrStderr(), logs.format, logs.level)
			if err != nil {
				return err
			}
			opt.Logger = lg
			opt.Ready = func(url string) {
				fmt.Fprintf(cmd.OutOrStdout(), "hetsched kube: metrics and health on %s\n", url)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			switch {
			case maxProcs < 0:
				return fmt.Errorf("--gomaxprocs: %d: want 0 (adaptive) or more", maxProcs)
			case maxProcs > 0:
				runtime.GOMAXPROCS(maxProcs)
			case os.Getenv("GOMAXPROCS") != "":
				// The environment's, as Go set it.
			default:
				stopGovernor := governProcs(ctx)
				defer stopGovernor()
			}
			if gcPercent != 0 {
				debug.SetGCPercent(gcPercent)
			}
			switch {
			case cpuProfileWindow && cpuProfile == "":
				return fmt.Errorf("--cpu-profile-window: needs --cpu-profile, the file to write")
			case cpuProfileWindow:
				stopProfile := windowedCPUProfile(ctx, cpuProfile, cmd.ErrOrStderr(), nil)
				defer func() {
					if err := stopProfile(); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), "hetsched kube:", err)
					}
				}()
			case cpuProfile != "":
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if allocProfile != "" {
				f, err := os.Create(allocProfile)
				if err != nil {
					return err
				}
				defer func() {
					// What was allocated over the whole run, sampled (Go's
					// MemProfileRate).
					if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
						fmt.Fprintln(cmd.ErrOrStderr(), "hetsched kube: --alloc-profile:", err)
					}
					f.Close()
				}()
			}
			return kube.Run(ctx, cmd.OutOrStdout(), opt)
		},
	}
	logs.flags(cmd)
	f := cmd.Flags()
	f.StringVar(&opt.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, else the in-cluster configuration, else ~/.kube/config)")
	f.Float32Var(&opt.QPS, "kube-api-qps", 500, "requests/s to the API server (client-go's token bucket; kube-scheduler's default is 50)")
	f.IntVar(&opt.Burst, "kube-api-burst", 1000, "burst of --kube-api-qps")
	f.StringVar(&opt.SchedulerName, "scheduler-name", kube.DefaultSchedulerName, "place the pods whose spec.schedulerName is this")
	f.StringVar(&opt.PriorityTiers, "priority-tiers", "1000000000,1000000,0", "pod priorities that start tiers 0 (urgent), 1 (high) and 2 (medium); lower is tier 3 (the annotation hetsched.io/priority wins)")
	f.StringSliceVar(&opt.DeviceResources, "device-resources", kube.DefaultDeviceResources, "extended resources whose units are devices (a placement names which); others are pooled counts")
	f.StringVar(&opt.Policy, "policy", "", "scheduling policy (see hetsched policies; default the server's)")
	f.StringVar(&queues, "queues", "", "queue tree (YAML or JSON, API.md format): pods name theirs with the label hetsched.io/queue")
	fast := kubewire.Fast()
	f.StringVar(&bindVia, "bind-via", string(fast.BindVia), "how Bindings are posted: client-go (its Bind: the stock path) or poster (encoded and posted without client-go's request builder, over client-go's transport and rate limiter)")
	f.BoolVar(&opt.Wire.LeanWatch, "lean-watch", fast.LeanWatch, "list and watch Pods through a REST client of their own that decodes protobuf in place and skips managedFields (false: client-go's informer)")
	f.BoolVar(&opt.Wire.GatherWrites, "gather-writes", fast.GatherWrites, "gather the API server connection's writes into one system call while one is under way (false: client-go's dialer)")
	f.IntVar(&opt.BindWorkers, "bind-workers", 128, "Bindings in flight at once (each waits on the API server; see BENCHMARKS.md)")
	f.BoolVar(&defaultSpread, "default-spread", true, "give a pod without topologySpreadConstraints the cluster's default ones, as kube-scheduler does (ScheduleAnyway by hostname, maxSkew 3, and by zone, maxSkew 5, over the pods its Services and controller select); false: none, as kube-scheduler's defaultingType List without defaultConstraints")
	f.StringVar(&opt.Listen, "listen", "127.0.0.1:7075", "serve /metrics and /healthz here (empty: off)")
	f.StringVar(&opt.MetricsAuth, "metrics-auth", kube.MetricsAuthAuto, "who may read /metrics: kubernetes (a bearer token the API server authenticates and authorizes for GET /metrics, over TLS), none, or auto (kubernetes unless --listen is a loopback address)")
	f.StringVar(&opt.TLSCert, "tls-cert", "", "the metrics port's TLS certificate with --metrics-auth kubernetes (default: a self-signed one made at start)")
	f.StringVar(&opt.TLSKey, "tls-key", "", "the key of --tls-cert")
	f.BoolVar(&opt.LeaderElect, "leader-elect", true, "run active/standby through a coordination.k8s.io Lease (--lease-namespace, --lease-name)")
	f.StringVar(&opt.LeaseNamespace, "lease-namespace", "kube-system", "namespace of the leader Lease")
	f.StringVar(&opt.LeaseName, "lease-name", "hetsched", "name of the leader Lease")
	f.StringVar(&opt.Identity, "identity", "", "this replica's name in the Lease (default: host name and pid)")
	f.DurationVar(&opt.LeaseDuration, "lease-duration", 0, "how long standbys wait after the last renewal before taking the lease (default 15s; --renew-deadline defaults to two thirds of it, --retry-period to a fifth of that: 10s and 2s, as kube-scheduler)")
	f.DurationVar(&opt.RenewDeadline, "renew-deadline", 0, "how long the leader tries to renew before it gives up leading")
	f.DurationVar(&opt.RetryPeriod, "retry-period", 0, "how often replicas try to take or renew the lease")
	f.IntVar(&gcPercent, "gc-percent", 0, "the Go collector's GOGC for this process (0: $GOGC, else Go's 100); BENCHMARKS.md has an A/B of 100 and 400")
	f.IntVar(&maxProcs, "gomaxprocs", 0, "the Go scheduler's GOMAXPROCS for this process (0: $GOMAXPROCS when set, else adaptive: one while the load fits in one core, more as soon as it does not, up to Go's default, the CPUs it may use)")
	f.BoolVar(&opt.WatchOnly, "watch-only", false, "run only the informers and schedule nothing (hetsched-bench kube's floor of a scheduler's CPU)")
	f.BoolVar(&opt.BindFloor, "bind-floor", false, "with --watch-only, bind the pods of --scheduler-name to the nodes in turn, deciding nothing")
	f.StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile (go tool pprof) of the whole run to this file, written when it stops")
	f.BoolVar(&cpuProfileWindow, "cpu-profile-window", false, "with --cpu-profile, profile only from a SIGUSR1 to the next SIGUSR2 (hetsched-bench kube sends them around its measured window: pods created to all bound)")
	f.StringVar(&allocProfile, "alloc-profile", "", "write an allocation profile (go tool pprof -sample_index=alloc_space) of the whole run to this file, written when it stops")
	return cmd
}

// governProcs runs a procs.Governor over this process until ctx ends or
// the returned stop is called (it returns once the Governor stopped):
// GOMAXPROCS from one up to Go's default as the load needs. Where the
// system does not report the process's CPU, GOMAXPROCS stays Go's.
func governProcs(ctx context.Context) (stop func()) {
	if _, ok := procs.ProcessCPU(); !ok {
		return func() {}
	}
	g := &procs.Governor{Ceiling: runtime.GOMAXPROCS(0), Set: func(n int) { runtime.GOMAXPROCS(n) },
		CPU: func() time.Duration { cpu, _ := procs.ProcessCPU(); return cpu }}
	ctx, cancel := context.WithCancel(ctx)
	t := time.NewTicker(procs.DefaultInterval)
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx, t.C) }()
	return func() { cancel(); <-done; t.Stop() }
}
