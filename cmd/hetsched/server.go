package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/server"
	"github.com/hetsched/hetsched/internal/telemetry"
)

func newServer() *cobra.Command {
	var opt server.Options
	var logs logFlags
	var lasPromote, starveFactor int
	var starveLimit, gangReserve time.Duration
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the control plane: the HTTP API on the scheduling core with an embedded store",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			lg, err := telemetry.NewLogger(cmd.ErrOrStderr(), logs.format, logs.level)
			if err != nil {
				return err
			}
			opt.Logger = lg
			opt.LASPromote = &lasPromote
			opt.StarveFactor, opt.StarveLimit = &starveFactor, &starveLimit
			opt.GangReserveAfter = &gangReserve
			tr, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "hetsched-server"})
			if err != nil {
				return err
			}
			opt.Tracing = tr
			err = server.Run(ctx, cmd.OutOrStdout(), opt)
			var again *server.RestartError
			if errors.As(err, &again) {
				shutdownTracing(tr, lg)
				return restartProcess(again)
			}
			shutdownTracing(tr, lg)
			return err
		},
	}
	logs.flags(cmd)
	cmd.Flags().StringVar(&opt.Listen, "listen", "127.0.0.1:7070", "address to serve on (loopback only without --tokens or --client-ca; off loopback tokens need TLS)")
	cmd.Flags().StringVar(&opt.DataDir, "data-dir", "", "directory of the durable store (required)")
	cmd.Flags().StringVar(&opt.NodesFile, "nodes", "", "static node inventory (YAML or JSON, API.md format)")
	cmd.Flags().StringVar(&opt.QueuesFile, "queues", "", "queue tree (YAML or JSON, API.md format)")
	cmd.Flags().StringVar(&opt.NodePoolsFile, "node-pools", "", "node pools that grow and shrink with demand (YAML or JSON: nodePools: [{name, template, min, max, provider: {exec|webhook}, scaleOutAfter, scaleInAfter, costPerHour}])")
	cmd.Flags().StringVar(&opt.TokensFile, "tokens", "", "bearer tokens (admin, tenant, agent); without it and --client-ca auth is off and only loopback is served")
	cmd.Flags().StringVar(&opt.TLSCert, "tls-cert", "", "serve HTTPS (HTTP/2 by ALPN, and HTTP/1.1) with this PEM certificate (chain), reloaded when it changes (hetsched certs server makes one)")
	cmd.Flags().StringVar(&opt.TLSKey, "tls-key", "", "the PEM private key of --tls-cert")
	cmd.Flags().StringVar(&opt.ClientCA, "client-ca", "", "accept client certificates signed by this CA (PEM) as identities: agents (their node names), admins, tenants; needs --tls-cert")
	cmd.Flags().BoolVar(&opt.InsecurePlaintext, "insecure-plaintext", false, "allow --tokens on a non-loopback --listen without TLS, and --ha's http:// --peers off loopback (tokens, tasks and raft cross the network in cleartext; warned at start)")
	cmd.Flags().StringVar(&opt.Policy, "policy", core.DefaultConfig().Policy, "scheduling policy (see hetsched policies)")
	cmd.Flags().IntVar(&opt.MaxInFlight, "max-inflight", 0, "task submissions in flight before the server sheds them with 429, low tier first (at half), then medium (80%), urgent and high only at the max; 0: 50000, -1: unlimited")
	cmd.Flags().StringVar(&opt.MemoryLimit, "memory-limit", server.DefaultMemoryLimit, "Go runtime soft memory limit: a share of the machine's (or cgroup's) memory, a size like 20Gi, or off; GOMEMLIMIT wins when set")
	cmd.Flags().DurationVar(&opt.ShareRound, "share-round", 0, "time-sharing policies (srtf, las): how often a task that may swap out a running one tries again (0: 1m)")
	cmd.Flags().DurationVar(&opt.ShareMinRun, "share-min-run", 0, "time-sharing policies: a task runs at least this long before a better-ranked one swaps it out (0: 1m)")
	cmd.Flags().DurationSliceVar(&opt.LASThresholds, "las-thresholds", nil, "las: the device-service thresholds (GPUs x time) between its queues, ascending; none given: one, 1h")
	cmd.Flags().Lookup("las-thresholds").DefValue = "" // "(default [])" would say nothing
	cmd.Flags().DurationVar(&opt.GavelRound, "gavel-round", 0, "gavel-rounds: the round length (0: 6m)")
	cmd.Flags().StringVar(&opt.GavelObjective, "gavel-objective", "", "gavel-rounds: fairness (the default: heterogeneity-aware max-min fairness), throughput or agnostic")
	cmd.Flags().IntVar(&starveFactor, "starve-factor", core.DefaultConfig().StarveFactor, "sjf, srtf: a task that waited this many times its expected runtime (or --starve-limit, the less) goes ahead of the others and, under srtf, runs to its end; 0: no such bound")
	cmd.Flags().DurationVar(&starveLimit, "starve-limit", core.DefaultConfig().StarveLimit, "sjf, srtf: the longest a task waits before it goes ahead of the others (with --starve-factor); 0: no fixed limit")
	cmd.Flags().DurationVar(&gangReserve, "gang-reserve-after", core.DefaultConfig().GangReserveAfter, "a gang that waited this long, unable to start, gets a reservation: the nodes it would start on are held while their tasks end, and only work that ends before it (by its timeout or declared duration) backfills there; 0: never")
	cmd.Flags().IntVar(&lasPromote, "las-promote", core.DefaultConfig().LASPromote, "las: promote a task that waited this many times its last run back to the first queue (Tiresias' STARVELIMIT); 0: never")
	cmd.Flags().BoolVar(&opt.NoAging, "no-aging", false, "never raise waiting tasks: strict tier order, and low work may starve")
	cmd.Flags().DurationVar(&opt.PreemptMinRuntime, "preempt-min-runtime", 0, "a task runs at least this long before preemption or reclaim may evict it")
	cmd.Flags().Float64Var(&opt.TenantRate, "tenant-rate", 0, "API requests/s per tenant (token bucket) unless its tokens set a rate; 0: unlimited")
	cmd.Flags().IntVar(&opt.TenantBurst, "tenant-burst", 0, "burst of --tenant-rate (default: the rate, at least 1)")
	cmd.Flags().DurationVar(&opt.HeartbeatInterval, "heartbeat-interval", 2*time.Second, "how often agents heartbeat")
	cmd.Flags().IntVar(&opt.MissedHeartbeats, "missed-heartbeats", 3, "heartbeats an agent node may miss before it is notready and its tasks are re-queued")
	cmd.Flags().StringSliceVar(&opt.AllowOrigins, "allow-origin", nil, "browser origins (scheme://host[:port], repeatable or comma-separated) whose cross-origin requests are served with CORS headers; none by default")
	cmd.Flags().StringVar(&opt.MetricsListen, "metrics-listen", "", "also serve /metrics without a token on this address (with --tokens the API's /metrics needs an admin or metrics token)")
	cmd.Flags().IntVar(&opt.MaxConnsPerIP, "max-conns-per-ip", 0, "connections one client address may hold open; past it a new one gets 503 and is closed (0: 4096, -1: no cap)")
	cmd.Flags().IntVar(&opt.MaxEventStreams, "max-event-streams", 0, "open GET /events streams in all (0: 1000, -1: no cap); past it 503")
	cmd.Flags().IntVar(&opt.MaxEventStreamsPerTenant, "max-event-streams-per-tenant", 0, "open GET /events streams per tenant (or role) (0: 100, -1: no cap); past it 503")
	cmd.Flags().BoolVar(&opt.RestartOnSpace, "restart-on-space", true, "once the store stopped on a full disk and space is back above --disk-reserve, start again in a fresh process (same PID, arguments and address), which serves only if the store holds every acknowledged commit; off: stay stopped until restarted")
	cmd.Flags().StringVar(&opt.DiskReserve, "disk-reserve", "", "free space the store's disk keeps: below it new tasks, jobs and queue changes get 507 (reads, cancels, completions and agents go on); a size like 2Gi, default min(1Gi, 5% of the filesystem)")
	cmd.Flags().DurationVar(&opt.DefaultLease, "default-lease", server.DefaultLeaseDuration, "lease of a task without a command that names none (its view shows it); a task asks for none with lease \"never\"; negative: such leases never expire")
	cmd.Flags().StringVar(&opt.PprofListen, "pprof", "", "serve net/http/pprof (with mutex and block profiles) on this loopback address, e.g. 127.0.0.1:6060; off by default")
	cmd.Flags().DurationVar(&opt.RetainFinished, "retain-finished", server.DefaultRetainFinished, "keep finished tasks and jobs (listed, readable, their history) this long after they finished, then delete them; negative: for ever")
	cmd.Flags().IntVar(&opt.NodeMetricsLimit, "node-metrics-limit", 0, "export per-node and per-device series (allocation, utilization, health) while the fleet has at most this many nodes (0: 1000, -1: never)")
	cmd.Flags().DurationVar(&opt.SeriesEvery, "series-every", server.DefaultSeriesEvery, "how often the server samples allocation, utilization and waiting tasks for its hour of in-memory history (the web UI's charts; GET /api/v1/series)")
	cmd.Flags().DurationVar(&opt.RetainAccounting, "retain-accounting", engine.DefaultRetainAccounting, "keep the accounting records of finished work (history, usage) this long after it finished; negative: for ever")
	cmd.Flags().IntVar(&opt.RetainFinishedMax, "retain-finished-max", 0, "keep at most this many finished tasks and jobs (a job with its tasks counts once), the newest; 0: no limit")
	cmd.Flags().StringVar(&opt.Store, "store", "", "store backend: pebble (the default: embedded, in --data-dir) or etcd (the default with --ha) (--etcd-endpoints; several servers then share it, one leads)")
	cmd.Flags().StringSliceVar(&opt.EtcdEndpoints, "etcd-endpoints", nil, "client URLs of an external etcd cluster (with --store etcd), e.g. http://10.0.0.1:2379,http://10.0.0.2:2379")
	cmd.Flags().StringVar(&opt.EtcdCA, "etcd-ca", "", "CA (PEM) of the etcd servers' certificates")
	cmd.Flags().StringVar(&opt.EtcdCert, "etcd-cert", "", "client certificate (PEM) presented to etcd")
	cmd.Flags().StringVar(&opt.EtcdKey, "etcd-key", "", "the private key of --etcd-cert")
	cmd.Flags().BoolVar(&opt.HA, "ha", false, "run an embedded etcd member in --data-dir beside the server (--name, --peers): three servers started so are a highly available control plane")
	cmd.Flags().StringVar(&opt.Name, "name", "", "this server's name (with --ha: its name in --peers)")
	cmd.Flags().StringVar(&opt.Peers, "peers", "", "with --ha: every member's name and etcd peer URL, the same on every server: s1=https://10.0.0.1:2380,s2=...,s3=... (https:// with --peer-cert, --peer-key and --peer-ca; http:// only on loopback, or with --insecure-plaintext) (empty: a one-member cluster)")
	cmd.Flags().StringSliceVar(&opt.EtcdListenClient, "etcd-listen-client", nil, "with --ha: also serve the embedded etcd member's client API here (for etcdctl), e.g. http://127.0.0.1:2379")
	cmd.Flags().StringVar(&opt.Advertise, "advertise", "", "this server's URL as the other servers reach it (default: http(s)://--listen)")
	cmd.Flags().StringVar(&opt.PeerCA, "peer-ca", "", "CA (PEM) of the other servers' certificates, for passing requests on to the leader over TLS (default: the system's roots), and with --ha on https:// --peers of the members' certificates")
	cmd.Flags().StringVar(&opt.PeerCert, "peer-cert", "", "with --ha on https:// --peers: this server's etcd member certificate (hetsched certs member --name NAME); the members accept only each other's")
	cmd.Flags().StringVar(&opt.PeerKey, "peer-key", "", "the private key of --peer-cert")
	cmd.Flags().DurationVar(&opt.EtcdStartTimeout, "etcd-start-timeout", 2*time.Minute, "with --ha: how long the embedded etcd member waits at start for a quorum of --peers (a member refused by the others, say for a certificate of another CA, fails after it)")
	cmd.Flags().DurationVar(&opt.ElectionTTL, "election-ttl", server.DefaultElectionTTL, "the leadership grant (an etcd lease): a leader etcd has not heard from for this long loses leadership (whole seconds, at least 2s)")
	cmd.Flags().StringVar(&opt.EtcdPrefix, "etcd-prefix", "/hetsched/", "prefix of this control plane's etcd keys (two control planes on one etcd need two)")
	return cmd
}

// restartProcess replaces this process with a fresh run of the same
// command (server.RestartError): the same binary, arguments and
// environment, serving the address this one served (a :0 port stays the
// one chosen). It returns only when exec fails.
func restartProcess(again *server.RestartError) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%v; and the binary to start again is unknown: %w", again, err)
	}
	args := append(os.Args[:len(os.Args):len(os.Args)], "--listen="+again.Listen)
	if err := syscall.Exec(exe, args, os.Environ()); err != nil {
		return fmt.Errorf("%v; and exec %s failed: %w", again, exe, err)
	}
	return nil
}
