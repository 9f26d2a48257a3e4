package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/benchhttp"
	"github.com/hetsched/hetsched/internal/benchkube"
	"github.com/hetsched/hetsched/internal/loadgen"
)

func newBenchAPI() *cobra.Command {
	var o loadgen.Options
	var mix, output string
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Drive single-task POST /api/v1/schedule load at a server (closed loop, or open loop with --rate; HTTP/1.1 or h2c)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Mix, err = loadgen.ParseMix(mix); err != nil {
				return err
			}
			if o.Target == "" {
				return fmt.Errorf("--target: required (for example http://127.0.0.1:7070)")
			}
			o.Token = os.Getenv("HETSCHED_TOKEN")
			if output == "text" {
				o.Progress = cmd.ErrOrStderr()
			}
			if o.SourceAddrs = max(1, o.Connections/2000); o.SourceAddrs > 250 {
				o.SourceAddrs = 250
			}
			r, err := loadgen.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			label := "hetsched"
			if o.Echo {
				label = "echo"
			}
			loadgen.Table(cmd.OutOrStdout(), []*loadgen.Result{r}, []string{label})
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Target, "target", "", "base URL of the server")
	cmd.Flags().IntVar(&o.Connections, "connections", 64, "keep-alive connections, one request in flight each")
	cmd.Flags().DurationVar(&o.Duration, "duration", 10*time.Second, "how long to drive load")
	cmd.Flags().StringVar(&mix, "mix", "urgent=1,high=4,medium=30,low=65", "tier weights")
	cmd.Flags().BoolVar(&o.Complete, "complete", true, "complete each placed lease at once (a second request)")
	cmd.Flags().BoolVar(&o.Echo, "echo", false, "the target is the echo floor (POST / with the same bodies)")
	cmd.Flags().DurationVar(&o.Wait, "wait", 2*time.Second, "the schedule request's ?wait=")
	cmd.Flags().DurationVar(&o.Lease, "lease", 5*time.Minute, "each task's lease (with --complete=false, placed tasks hold resources until it runs out)")
	cmd.Flags().Float64Var(&o.Rate, "rate", 0, "open loop: requests/s in all, latency from each request's scheduled send time (0: closed loop)")
	cmd.Flags().BoolVar(&o.H2C, "h2c", false, "HTTP/2 without TLS (prior knowledge)")
	cmd.Flags().IntVar(&o.Streams, "streams", 0, "with --h2c: concurrent streams per connection (senders = connections × streams)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newBenchEcho() *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "echo",
		Short: "Serve the HTTP floor: a minimal Go net/http JSON echo server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "hetsched echo: http://%s\n", ln.Addr())
			srv := loadgen.EchoServer(loadgen.EchoHandler())
			stop := make(chan os.Signal, 1)
			signal.Notify(stop, os.Interrupt)
			go func() { <-stop; srv.Close() }()
			if err := srv.Serve(ln); err != http.ErrServerClosed {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on")
	return cmd
}

func newBenchHTTP() *cobra.Command {
	var o benchhttp.CompareOptions
	var conns, h2c, mix, output string
	cmd := &cobra.Command{
		Use:   "http",
		Short: "Schedule requests against a server with static nodes and the echo floor, side by side",
		Long: `Starts "hetsched server" with --nodes static fleet nodes and "hetsched-bench
echo" as child processes, then for each connection count drives closed-loop
single-task schedule requests (leases completed at once) at the server and
the same bodies at the echo server, and prints both with their ratio.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Mix, err = loadgen.ParseMix(mix); err != nil {
				return err
			}
			for _, f := range strings.Split(conns, ",") {
				if f = strings.TrimSpace(f); f == "" {
					continue
				}
				n, err := strconv.Atoi(f)
				if err != nil || n <= 0 || n > 19000 {
					return fmt.Errorf("--connections: %q is not a count from 1 to 19000", f)
				}
				o.Connections = append(o.Connections, n)
			}
			for _, f := range strings.Split(h2c, ",") {
				if f = strings.TrimSpace(f); f == "" {
					continue
				}
				c, st, ok := strings.Cut(f, "x")
				nc, err1 := strconv.Atoi(c)
				ns, err2 := strconv.Atoi(st)
				if !ok || err1 != nil || err2 != nil || nc <= 0 || nc > 1000 || ns <= 0 || ns > 100_000 {
					return fmt.Errorf("--h2c: %q is not CONNSxSTREAMS (1-1000 connections, 1-100000 streams each)", f)
				}
				o.H2C = append(o.H2C, [2]int{nc, ns})
			}
			if o.Bin, err = hetschedBin(); err != nil {
				return err
			}
			if o.BenchBin, err = os.Executable(); err != nil {
				return err
			}
			o.Log = cmd.ErrOrStderr()
			rs, err := benchhttp.Compare(cmd.Context(), o)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rs)
			}
			for _, r := range rs {
				loadgen.Table(cmd.OutOrStdout(), []*loadgen.Result{r.Hetsched, r.Echo}, []string{"hetsched", "echo"})
				fmt.Fprintf(cmd.OutOrStdout(), "ratio %.2f (HTTP requests/s, schedule + complete, over the echo floor's)\n\n", r.Ratio)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Nodes, "nodes", 10000, "static nodes loaded into the server")
	cmd.Flags().StringVar(&conns, "connections", "64,1000,10000", "HTTP/1.1 connection counts, comma-separated")
	cmd.Flags().StringVar(&h2c, "h2c", "", "h2c loads after those, comma-separated CONNSxSTREAMS (e.g. 4x250,16x625)")
	cmd.Flags().DurationVar(&o.Duration, "duration", 10*time.Second, "load time per target and count")
	cmd.Flags().StringVar(&mix, "mix", "urgent=1,high=4,medium=30,low=65", "tier weights")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newBenchPending() *cobra.Command {
	var o benchhttp.PendingOptions
	var output string
	cmd := &cobra.Command{
		Use:   "pending",
		Short: "Hold --tasks pending in one server: its memory, then its restart time from the store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bin, err = hetschedBin(); err != nil {
				return err
			}
			o.Log = cmd.ErrOrStderr()
			r, err := benchhttp.Pending(cmd.Context(), o)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tasks %d  submit %.1fs (%.0f tasks/s)  RSS %d MiB (peak %d MiB)  restart %.1fs  RSS after restart %d MiB\n",
				r.Tasks, r.SubmitSeconds, r.SubmitRate, r.Memory.RSS>>20, r.Memory.Peak>>20, r.RestartSeconds, r.MemoryAfter.RSS>>20)
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Tasks, "tasks", 1_000_000, "tasks to submit")
	cmd.Flags().IntVar(&o.Batch, "batch", 1000, "tasks per request")
	cmd.Flags().IntVar(&o.Clients, "clients", 16, "concurrent requests")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newBenchFleet() *cobra.Command {
	var o benchhttp.FleetOptions
	var output string
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Hold a fake fleet of --nodes nodes (one agent process) and measure the server's idle CPU",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bin, err = hetschedBin(); err != nil {
				return err
			}
			if o.Nodes <= 0 {
				return fmt.Errorf("--nodes: must be positive")
			}
			o.Log = cmd.ErrOrStderr()
			r, err := benchhttp.Fleet(cmd.Context(), o)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "nodes %d  ready after %.1fs  idle CPU: server %.3f cores, agent %.3f cores  RSS: server %d MiB, agent %d MiB\n",
				r.Nodes, r.ReadySeconds, r.ServerCores, r.AgentCores, r.ServerRSS.RSS>>20, r.AgentRSS.RSS>>20)
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Nodes, "nodes", 10000, "fake nodes")
	cmd.Flags().DurationVar(&o.Settle, "settle", 10*time.Second, "wait after every node is ready")
	cmd.Flags().DurationVar(&o.Duration, "duration", 30*time.Second, "measurement time")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newBenchJob() *cobra.Command {
	var o benchhttp.JobOptions
	var output string
	cmd := &cobra.Command{
		Use:   "job",
		Short: "Run one layered DAG job (--layers × --width tasks) through a server and a fake fleet",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bin, err = hetschedBin(); err != nil {
				return err
			}
			if o.Layers <= 0 || o.Width <= 1 || o.Nodes <= 0 {
				return fmt.Errorf("--layers, --nodes: positive; --width: at least 2")
			}
			o.Log = cmd.ErrOrStderr()
			r, err := benchhttp.Job(cmd.Context(), o)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tasks %d  submit %.1fs  run %.1fs (%.0f tasks/s)  server RSS %d MiB\n",
				r.Tasks, r.SubmitSeconds, r.RunSeconds, r.TasksPerSecond, r.ServerMemory.RSS>>20)
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Layers, "layers", 1000, "layers of the DAG")
	cmd.Flags().IntVar(&o.Width, "width", 100, "tasks per layer")
	cmd.Flags().IntVar(&o.Nodes, "nodes", 100, "fake nodes")
	cmd.Flags().DurationVar(&o.TaskDuration, "task-duration", time.Millisecond, "how long each task runs on the fake fleet")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up after")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newBenchInflight() *cobra.Command {
	var o benchhttp.InflightOptions
	var mix, output string
	cmd := &cobra.Command{
		Use:   "inflight",
		Short: "Hold --requests waiting POST /schedule requests (h2c) on a full cluster of --nodes, release it, and check every answer",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Mix, err = loadgen.ParseMix(mix); err != nil {
				return err
			}
			if o.Bin, err = hetschedBin(); err != nil {
				return err
			}
			o.Log = cmd.ErrOrStderr()
			r, err := benchhttp.Inflight(cmd.Context(), o)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			benchhttp.InflightTable(cmd.OutOrStdout(), r)
			if r.Lost > 0 || r.Duplicates > 0 || r.Placed != int64(r.Requests) {
				return fmt.Errorf("%d of %d placed, %d lost, %d answered twice", r.Placed, r.Requests, r.Lost, r.Duplicates)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Requests, "requests", 1_000_000, "schedule requests to hold in flight")
	cmd.Flags().IntVar(&o.Nodes, "nodes", 10_000, "64-CPU fake nodes (each fits 640 of the 100m tasks once released)")
	cmd.Flags().IntVar(&o.Conns, "connections", 16, "h2c connections (each carries up to 100,000 streams)")
	cmd.Flags().StringVar(&mix, "mix", "urgent=1,high=4,medium=30,low=65", "tier weights")
	cmd.Flags().StringSliceVar(&o.ServerArgs, "server-arg", nil, "extra flag for the server (repeatable), e.g. --server-arg=--no-aging")
	cmd.Flags().DurationVar(&o.Hold, "hold", 0, "hold the requests this long before reading memory and releasing")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 30*time.Minute, "bound on the whole run")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newBenchBatch() *cobra.Command {
	var o benchhttp.BatchOptions
	var mix, output string
	cmd := &cobra.Command{
		Use:   "batch",
		Short: "Hold --tasks lease tasks in flight (leased and pending) through the batch API on --nodes, then drain them by lease expiry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bin, err = hetschedBin(); err != nil {
				return err
			}
			if o.Mix, err = loadgen.ParseMix(mix); err != nil {
				return err
			}
			o.Log = cmd.ErrOrStderr()
			r, err := benchhttp.Batch(cmd.Context(), o)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tasks %d on %d nodes  submit %.1fs (%.0f tasks/s)  in flight: %d leased + %d pending  RSS %d MiB (peak %d MiB)  drained by expiry in %.1fs (%d expired)\n",
				r.Tasks, r.Nodes, r.SubmitSeconds, r.SubmitRate, r.Leased, r.Pending, r.Memory.RSS>>20, r.Memory.Peak>>20, r.DrainSeconds, r.Expired)
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Tasks, "tasks", 1_000_000, "one-CPU lease tasks to submit")
	cmd.Flags().IntVar(&o.Nodes, "nodes", 10_000, "64-CPU fake nodes (64 leases each)")
	cmd.Flags().IntVar(&o.Batch, "batch", 1000, "tasks per request")
	cmd.Flags().IntVar(&o.Clients, "clients", 16, "concurrent requests")
	cmd.Flags().StringVar(&mix, "mix", "urgent=1,high=4,medium=30,low=65", "tier weights")
	cmd.Flags().DurationVar(&o.Lease, "lease", time.Minute, "each task's lease")
	cmd.Flags().StringSliceVar(&o.ServerArgs, "server-arg", nil, "extra flag for the server (repeatable)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 30*time.Minute, "bound on the whole run")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newBenchHA() *cobra.Command {
	var o benchhttp.HAOptions
	var conns, output string
	cmd := &cobra.Command{
		Use:   "ha",
		Short: "Pebble, a one-member embedded etcd and three --ha servers side by side: batch submission, single-task schedule latency, takeover after kill -9 with every task stored",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bin, err = hetschedBin(); err != nil {
				return err
			}
			for _, c := range strings.Split(conns, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(c))
				if err != nil || n <= 0 {
					return fmt.Errorf("--connections: want positive counts, got %q", conns)
				}
				o.Connections = append(o.Connections, n)
			}
			for _, s := range o.Setups {
				if s != benchhttp.SetupPebble && s != benchhttp.SetupEtcd1 && s != benchhttp.SetupHA3 {
					return fmt.Errorf("--setups: want pebble, etcd1 or ha3, got %q", s)
				}
			}
			o.Log = cmd.ErrOrStderr()
			rs, err := benchhttp.HA(cmd.Context(), o)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(rs)
			}
			benchhttp.HATable(cmd.OutOrStdout(), rs)
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&o.Setups, "setups", []string{benchhttp.SetupPebble, benchhttp.SetupEtcd1, benchhttp.SetupHA3}, "setups to run, in order (the first is the ratios' base)")
	cmd.Flags().IntVar(&o.Tasks, "tasks", 200_000, "pending tasks to submit (and hold through the takeover)")
	cmd.Flags().IntVar(&o.Batch, "batch", 1000, "tasks per request")
	cmd.Flags().IntVar(&o.Clients, "clients", 16, "concurrent batch requests")
	cmd.Flags().IntVar(&o.Nodes, "nodes", 1000, "static nodes for the schedule load")
	cmd.Flags().StringVar(&conns, "connections", "1,64", "connection counts of the single-task schedule load")
	cmd.Flags().DurationVar(&o.Duration, "duration", 10*time.Second, "each schedule load's length")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newBenchKube() *cobra.Command {
	var o benchkube.Options
	var output string
	cmd := &cobra.Command{
		Use:   "kube",
		Short: "hetsched kube and the real kube-scheduler side by side on one API server and one KWOK fleet, with the bare binding limit (needs tools/build-k8s)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bin, err = hetschedBin(); err != nil {
				return err
			}
			o.Log = cmd.ErrOrStderr()
			rs, err := benchkube.Run(cmd.Context(), o)
			if output == "json" {
				if jerr := json.NewEncoder(cmd.OutOrStdout()).Encode(rs); jerr != nil {
					return jerr
				}
			} else {
				benchkube.Table(cmd.OutOrStdout(), rs)
			}
			return err
		},
	}
	cmd.Flags().IntVar(&o.Nodes, "nodes", 1000, "KWOK nodes")
	cmd.Flags().IntVar(&o.GPUsPerNode, "gpus-per-node", 8, "nvidia.com/gpu per node")
	cmd.Flags().IntVar(&o.Pods, "pods", 10_000, "pods per run, created at once (--mix says what they ask for)")
	cmd.Flags().StringVar(&o.Mix, "mix", benchkube.MixPlain, "the pods: plain (500m, 1Gi, every other one a GPU) or realistic (a third with required anti-affinity by hostname or zone, a third spread over zones, GPU pods with node affinity to a model, host ports; nodes in four zones with two GPU models)")
	cmd.Flags().IntVar(&o.DefaultPods, "default-pods", 2000, "pods of the kube-scheduler-default run (50 requests/s)")
	cmd.Flags().Float32Var(&o.QPS, "qps", 5000, "client requests/s of the schedulers, the driver and the bare binder")
	cmd.Flags().IntVar(&o.Burst, "burst", 10000, "client burst")
	cmd.Flags().StringArrayVar(&o.HetschedArgs, "hetsched-arg", nil, "another flag for hetsched kube (repeatable), e.g. --hetsched-arg=--bind-workers=64")
	cmd.Flags().BoolVar(&o.Fresh, "fresh", false, "give every run a control plane and fleet of its own (a long bench's API server grows and slows later runs)")
	cmd.Flags().StringVar(&o.BaselineBin, "baseline-bin", "", "a hetsched binary (another build, say the previous commit's) for the hetsched-baseline run, side by side with this one")
	cmd.Flags().StringSliceVar(&o.Runs, "runs", []string{benchkube.Bare, benchkube.WatchFloor, benchkube.BindFloor, benchkube.Hetsched, benchkube.KubeScheduler, benchkube.KubeSchedulerDef}, "runs, in order (hetsched:--flag=v+--other=w: hetsched with flags of its own; NAME:GOMAXPROCS=1+GOGC=400: a scheduler process's Go environment, kube-scheduler's too; hetsched-baseline: --baseline-bin's; watch-floor: the bare binder while `hetsched kube --watch-only` watches, whose CPU is what seeing the cluster costs a client-go scheduler; bind-floor: hetsched kube --watch-only --bind-floor binding the pods to the nodes in turn, what seeing the cluster and posting Bindings costs; A&B: two scheduler processes at once on one API server, half the pods each, for an A/B under the same load); also hetsched-restart: a new hetsched kube's rebuild over --pods bound pods (the time until its engine holds them and until it binds a new pod); hetsched-takeover: two replicas with leader election over --pods bound pods, the leader killed, the time until the standby leads, holds them and binds a new pod")
	cmd.Flags().DurationVar(&o.LeaseDuration, "lease-duration", 0, "hetsched-takeover: the replicas' --lease-duration (default hetsched kube's, 15s)")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}

func newBenchBulk() *cobra.Command {
	var o benchhttp.BulkOptions
	var output string
	cmd := &cobra.Command{
		Use:   "bulk",
		Short: "Submit --tasks in --batch-task requests from one client while a fake fleet of --nodes heartbeats and a probe heartbeats, reads /cluster and submits urgent tasks: what one tenant's bulk submission does to everyone else",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if o.Bin, err = hetschedBin(); err != nil {
				return err
			}
			o.Log = cmd.ErrOrStderr()
			r, err := benchhttp.Bulk(cmd.Context(), o)
			if err != nil {
				return err
			}
			if output == "json" {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(r)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "tasks %d in batches of %d, %d fleet nodes: submitted in %.1fs\n", r.Tasks, r.Batch, r.Nodes, r.SubmitSeconds)
			for _, l := range []struct {
				name string
				l    benchhttp.Latencies
			}{{"heartbeat", r.Heartbeat}, {"GET /cluster", r.Cluster}, {"urgent submit", r.Urgent}} {
				fmt.Fprintf(cmd.OutOrStdout(), "  %-14s n=%d failed=%d  p50 %.1f ms  p99 %.1f ms  max %.1f ms\n", l.name, l.l.N, l.l.Failures, l.l.P50, l.l.P99, l.l.Max)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "  stale /cluster answers %d; fleet nodes notready at most %d; urgent scheduling attempts %d, p99 ≤ %.3f ms (the core's decision ≤ %.3f ms)\n", r.StaleReads, r.NotReady, r.UrgentAttempts, r.UrgentAttemptP99, r.UrgentDecisionP99)
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Tasks, "tasks", 1_000_000, "one-CPU lease tasks to submit")
	cmd.Flags().IntVar(&o.Batch, "batch", 100_000, "tasks per request (one request at a time)")
	cmd.Flags().IntVar(&o.Nodes, "nodes", 1000, "fake fleet nodes (heartbeats every 2 s)")
	cmd.Flags().DurationVar(&o.Probe, "probe", 100*time.Millisecond, "how often the probe heartbeats, reads and submits")
	cmd.Flags().StringVar(&o.ServerBin, "server-bin", "", "hetsched binary for the server and the fleet (a baseline build; default: this one)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 30*time.Minute, "bound on the whole run")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	return cmd
}
