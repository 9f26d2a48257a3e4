package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"go.opentelemetry.io/otel/trace"
	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/metrics"
	"github.com/hetsched/hetsched/internal/netaddr"
	"github.com/hetsched/hetsched/internal/nodepool"
	"github.com/hetsched/hetsched/internal/poolctl"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/servicectl"
	"github.com/hetsched/hetsched/internal/store"
	"github.com/hetsched/hetsched/internal/telemetry"
)

// Options are the `hetsched server` flags.
type Options struct {
	Listen    string
	DataDir   string
	NodesFile string
	// TokensFile turns authentication on (admin, tenant and agent tokens).
	TokensFile string
	// TLSCert and TLSKey serve HTTPS (HTTP/2 by ALPN, and HTTP/1.1)
	// instead of plaintext HTTP and h2c; the pair is reloaded when its
	// files change. ClientCA lets clients authenticate by a certificate it
	// signed (role, tenant and nodes from the certificate: certs.Identity),
	// with or without TokensFile. InsecurePlaintext allows tokens off
	// loopback without TLS (warned about at start); see checkTransport.
	TLSCert, TLSKey, ClientCA string
	InsecurePlaintext         bool
	// QueuesFile declares queues (API.md --queues).
	QueuesFile string
	// NodePoolsFile declares node pools (pools.go); PoolProviders, by
	// pool name, replace their providers (hetsched up's in-process
	// agents); PoolPeriod is how often they are planned (default 5s).
	NodePoolsFile string
	// NodePools are pools given in code, besides the file's.
	NodePools     []api.NodePool
	PoolProviders map[string]poolctl.Provider
	PoolPeriod    time.Duration
	Policy        string
	// MaxInFlight is how many task submissions may be in flight (being
	// admitted, or waiting in POST /schedule) before the server sheds them,
	// low tier first (admission.go). 0 means DefaultMaxInFlight; negative,
	// unlimited.
	MaxInFlight int
	// PreemptMinRuntime protects a task from preemption and reclaim until
	// it has run this long (core.Config.PreemptMinRuntime; default 0).
	PreemptMinRuntime time.Duration
	// ShareRound, ShareMinRun and LASThresholds tune the time-sharing
	// policies (srtf, las): core.Config.TimeShareRound, TimeShareMinRun
	// and LASThresholds; zero or nil: the defaults (1m, 1m, [1h]).
	ShareRound, ShareMinRun time.Duration
	LASThresholds           []time.Duration
	// LASPromote is las's starvation knob (core.Config.LASPromote); nil:
	// the default.
	LASPromote *int
	// StarveFactor and StarveLimit bound the waits under sjf and srtf
	// (core.Config.StarveFactor, StarveLimit); nil: the defaults.
	StarveFactor *int
	StarveLimit  *time.Duration
	// GangReserveAfter is core.Config.GangReserveAfter; nil: the default.
	GangReserveAfter *time.Duration
	// GavelRound and GavelObjective tune gavel-rounds (zero, "": the
	// defaults, 6m and fairness).
	GavelRound     time.Duration
	GavelObjective string
	// NoAging turns aging off: waiting tasks keep their tier for ever, so
	// placements follow tier order strictly and low work may starve
	// (core.TierConfig.AgingAfter 0 for every tier).
	NoAging bool
	// TenantRate and TenantBurst limit each tenant's API calls when its
	// tokens set no rate (0: unlimited; needs --tokens).
	TenantRate  float64
	TenantBurst int
	// HeartbeatInterval and MissedHeartbeats set the agents' liveness
	// rule (defaults 2s and 3).
	HeartbeatInterval time.Duration
	MissedHeartbeats  int
	// PprofListen, when set, serves net/http/pprof on its own loopback
	// listener (pprof.go) and turns on mutex and block profiling; "" (the
	// default) serves no profiles.
	PprofListen string
	// MemoryLimit is the Go runtime's soft memory limit: "off", a share of
	// the machine's memory ("90%", the default when empty) or a size
	// ("20Gi"). GOMEMLIMIT, when set, wins (memlimit.go).
	MemoryLimit string
	// AllowOrigins are the browser origins (scheme://host[:port]) whose
	// cross-origin requests are served, with CORS headers (browser.go);
	// none by default.
	AllowOrigins []string
	// MetricsListen, when set, serves /metrics without a token on its own
	// listener (for a scraper on a network the operator trusts); the API's
	// /metrics needs an admin or metrics token when tokens are on.
	MetricsListen string
	// NodeMetricsLimit bounds the per-node and per-device series: a fleet
	// of more nodes exports none (0: DefaultNodeMetricsLimit; negative:
	// never exported).
	NodeMetricsLimit int
	// DefaultLease is the lease of a task without a command that names
	// none (0: DefaultLeaseDuration; negative: such leases never expire).
	DefaultLease time.Duration
	// DiskReserve is the store's free-space reserve (a size like "2Gi";
	// "" is the default, min(1 GiB, 5 % of the filesystem)): below it new
	// work is refused with 507 while everything else goes on.
	DiskReserve string
	// RestartOnSpace: once the store stopped on a full disk and space is
	// back, Run returns a RestartError (restart.go) for the command to
	// start the server again in a fresh process; off, the server stays
	// stopped until restarted.
	RestartOnSpace bool
	// MaxEventStreams and MaxEventStreamsPerTenant cap the open GET
	// /events streams (0: DefaultMaxEventStreams and
	// DefaultMaxEventStreamsPerTenant; negative: no cap); past them 503.
	MaxEventStreams          int
	MaxEventStreamsPerTenant int
	// MaxConnsPerIP caps the connections from one address (0:
	// DefaultMaxConnsPerIP; negative: no cap).
	MaxConnsPerIP int
	// EventWriteTimeout bounds one write to an event stream before its
	// subscriber is dropped as not reading (0: StreamWriteTimeout).
	EventWriteTimeout time.Duration
	// RetainFinished is how long finished tasks and jobs are kept after
	// they finished (0: DefaultRetainFinished; negative: for ever), and
	// RetainFinishedMax how many at most (0: no limit).
	RetainFinished    time.Duration
	RetainFinishedMax int
	// RetainAccounting is how long finished tasks' accounting records
	// are kept (0: engine.DefaultRetainAccounting; negative: for ever).
	RetainAccounting time.Duration
	// SeriesEvery is how often the server samples the cluster for its
	// recent history (GET /api/v1/series; 0: DefaultSeriesEvery).
	SeriesEvery time.Duration
	// Replication (ha.go). Store is "pebble" (the default: an embedded
	// store in DataDir) or "etcd" (EtcdEndpoints, with TLS by EtcdCA,
	// EtcdCert and EtcdKey); HA runs an embedded etcd member named Name
	// of the cluster Peers ("s1=http://h1:2380,...") in DataDir and uses
	// the etcd store on it. Advertise is this server's URL as the others
	// reach it (default: from the listener), PeerCA the CA of the other
	// servers' certificates (for passing requests on over TLS, and, with
	// HA on https:// peers, of the members' certificates), PeerCert and
	// PeerKey this member's certificate (certs.KindMember) and key,
	// ElectionTTL the leadership grant's TTL, EtcdPrefix the keys' prefix.
	Store                     string
	EtcdEndpoints             []string
	EtcdCA, EtcdCert, EtcdKey string
	HA                        bool
	Name, Peers               string
	EtcdListenClient          []string
	Advertise, PeerCA         string
	PeerCert, PeerKey         string
	// EtcdStartTimeout bounds the embedded member's wait for a quorum
	// of its peers at start (0: two minutes).
	EtcdStartTimeout time.Duration
	ElectionTTL      time.Duration
	EtcdPrefix       string
	Logger           *slog.Logger
	// Tracing, when enabled, traces requests and the tasks submitted in
	// sampled ones (telemetry.Setup); nil: off.
	Tracing *telemetry.Tracing
	// Ready, when set, receives the bound address once serving.
	Ready func(addr string)
}

// MaxStreams is how many concurrent HTTP/2 streams one h2c connection may
// carry.
const MaxStreams = 100_000

// DefaultMaxInFlight is the submissions in flight past which low-tier work
// is shed at half of it (see admission).
const DefaultMaxInFlight = 50_000

// readConfigFile decodes the YAML or JSON file of flag --field into v;
// unknown fields are errors, and errors name the flag.
func readConfigFile(field, path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return errs.Invalid(field, "%v", err)
	}
	if err := yaml.UnmarshalStrict(b, v); err != nil {
		return errs.Invalid(field, "%s: %v", path, err)
	}
	return nil
}

// LoadNodesFile reads and validates a --nodes file (YAML or JSON; unknown
// fields are errors).
func LoadNodesFile(path string) ([]api.Node, error) {
	var f api.NodesFile
	if err := readConfigFile("nodes", path, &f); err != nil {
		return nil, err
	}
	if err := api.ValidateNodes(f.Nodes); err != nil {
		return nil, err
	}
	return f.Nodes, nil
}

// QueuesFile is the --queues file format.
type QueuesFile struct {
	Queues []api.Queue `json:"queues"`
}

// LoadQueuesFile reads a --queues file (YAML or JSON; unknown fields are
// errors). The tree is checked when the queues are put.
func LoadQueuesFile(path string) ([]api.Queue, error) {
	var f QueuesFile
	if err := readConfigFile("queues", path, &f); err != nil {
		return nil, err
	}
	for i := range f.Queues {
		if f.Queues[i].Parent == api.RootQueue {
			f.Queues[i].Parent = ""
		}
		if err := f.Queues[i].Validate(); err != nil {
			return nil, errs.Prefix(fmt.Sprintf("queues[%d]", i), err)
		}
	}
	return f.Queues, nil
}

// Run serves until ctx ends, then shuts down cleanly. With --store etcd
// (or --ha) it is one member of a replicated control plane (ha.go);
// otherwise it owns an embedded Pebble store in DataDir.
func Run(ctx context.Context, out io.Writer, opt Options) error {
	ctx, cancel := context.WithCancel(ctx) // the side listeners end with Run
	defer cancel()
	p, err := prepare(opt)
	if err != nil {
		return err
	}
	if opt.replicated() {
		return runReplicated(ctx, out, p)
	}
	if opt.DataDir == "" {
		return errs.Invalid("data-dir", "a directory for the store is required")
	}
	st, err := store.OpenDisk(opt.DataDir, store.DiskOptions{Logger: p.lg, Reserve: p.reserve})
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	if rec := st.Recovery(); rec.TornTail {
		p.m.StoreTornBytes.Set(float64(rec.BytesDropped))
		p.m.StoreTornRecords.Set(float64(rec.RecordsDropped))
	}
	eng, err := p.startEngine(ctx, st)
	if err != nil {
		return err
	}
	defer eng.Close()
	p.m.Leader.Set(1)
	ln, side, err := p.listen(ctx)
	if err != nil {
		return err
	}
	handler := p.newHandler(eng, ln.Addr().String())
	srv, ln, err := p.httpServer(handler, ln)
	if err != nil {
		return err
	}
	srv.RegisterOnShutdown(handler.Close)
	p.banner(out, ln, fmt.Sprintf("data %s, %d tasks restored in %s", opt.DataDir, eng.NumTasks(), time.Since(start).Round(time.Millisecond)), side)
	addr := ln.Addr().String()
	return p.serveUntil(ctx, srv, ln, func(ctx context.Context) error { return p.awaitSpace(ctx, eng, addr) })
}

// prepared is what Run checks and builds before it opens a store: the
// options' values, the scheduler's configuration, the metrics.
type prepared struct {
	opt       Options
	lg        *slog.Logger
	memLimit  int64
	memFrom   string
	origins   []string
	warn      string
	auth      *Auth
	tlsConfig *tls.Config
	cfg       core.Config
	nodes     []api.Node
	queues    []api.Queue
	reserve   int64
	reg       *prometheus.Registry
	svcGauges *servicectl.Gauges
	pools     []api.NodePool
	poolGauge *poolctl.Gauges
	m         *metrics.Metrics
	// eng is the running engine (nil on a standby): the per-node
	// collector's.
	eng atomic.Pointer[engine.Engine]
}

// DefaultNodeMetricsLimit is Options.NodeMetricsLimit's default: 1,000
// nodes of eight devices are 30,000 per-node and per-device series, whose
// copy holds the engine loop for up to about a millisecond per scrape
// (BENCHMARKS.md, BenchmarkNodeCollector).
const DefaultNodeMetricsLimit = 1000

// prepare checks the options and reads their files.
func prepare(opt Options) (*prepared, error) {
	p := &prepared{opt: opt, lg: opt.Logger}
	if p.lg == nil {
		p.lg = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if opt.PprofListen != "" && !netaddr.Loopback(opt.PprofListen) {
		return nil, errs.Invalid("pprof", "the profiling listener is served on loopback only; got %q", opt.PprofListen)
	}
	if err := opt.checkReplication(); err != nil {
		return nil, err
	}
	var err error
	if p.memLimit, p.memFrom, err = applyMemoryLimit(opt.MemoryLimit); err != nil {
		return nil, err
	}
	if p.origins, err = ParseAllowedOrigins(opt.AllowOrigins); err != nil {
		return nil, err
	}
	if p.warn, err = checkTransport(opt); err != nil {
		return nil, err
	}
	if opt.HA {
		if w := opt.memberConfig().PlaintextWarning(); w != "" {
			p.warn = strings.TrimPrefix(p.warn+"\n"+w, "\n")
		}
	}
	if err := p.prepareAuth(); err != nil {
		return nil, err
	}
	if opt.TLSCert != "" {
		if p.tlsConfig, err = certs.ServerTLSConfig(opt.TLSCert, opt.TLSKey, opt.ClientCA); err != nil {
			return nil, err
		}
	}
	if p.cfg, err = schedulerConfig(opt); err != nil {
		return nil, err
	}
	if opt.NodesFile != "" {
		if p.nodes, err = LoadNodesFile(opt.NodesFile); err != nil {
			return nil, err
		}
	}
	if opt.NodePoolsFile != "" {
		if p.pools, err = LoadNodePoolsFile(opt.NodePoolsFile); err != nil {
			return nil, err
		}
	}
	p.pools = append(p.pools, opt.NodePools...)
	if err := api.ValidatePools(p.pools); err != nil {
		return nil, errs.Prefix("node-pools", err)
	}
	if opt.QueuesFile != "" {
		if p.queues, err = LoadQueuesFile(opt.QueuesFile); err != nil {
			return nil, err
		}
	}
	if p.reserve, err = parseDiskReserve(opt.DiskReserve); err != nil {
		return nil, err
	}
	if opt.RetainFinishedMax < 0 {
		return nil, errs.Invalid("retain-finished-max", "must be 0 (no limit) or more, got %d", opt.RetainFinishedMax)
	}
	p.reg = prometheus.NewRegistry()
	p.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p.m = metrics.New(p.reg)
	p.svcGauges = servicectl.NewGauges(p.reg)
	p.poolGauge = poolctl.NewGauges(p.reg)
	if limit := opt.NodeMetricsLimit; limit >= 0 {
		if limit == 0 {
			limit = DefaultNodeMetricsLimit
		}
		p.reg.MustRegister(engine.NodeCollector(p.eng.Load, limit, 5*time.Second))
	}
	p.reg.MustRegister(engine.EstimateCollector(p.eng.Load, engine.EstimateBudget, 5*time.Second))
	return p, nil
}

// prepareAuth reads the tokens (or turns certificate-only auth on).
func (p *prepared) prepareAuth() error {
	opt := p.opt
	if opt.TokensFile != "" {
		var err error
		if p.auth, err = LoadTokens(opt.TokensFile); err != nil {
			return err
		}
	} else if opt.ClientCA != "" {
		p.auth = certOnlyAuth()
	}
	if p.auth != nil {
		p.auth.certs = opt.ClientCA != ""
		if err := p.auth.SetDefaultLimit(opt.TenantRate, opt.TenantBurst); err != nil {
			return err
		}
	}
	return nil
}

// schedulerConfig is the core's configuration from the options.
func schedulerConfig(opt Options) (core.Config, error) {
	cfg := core.DefaultConfig()
	if opt.Policy != "" {
		cfg.Policy = opt.Policy
	}
	if opt.PreemptMinRuntime < 0 {
		return cfg, errs.Invalid("preempt-min-runtime", "must not be negative, got %s", opt.PreemptMinRuntime)
	}
	cfg.PreemptMinRuntime = opt.PreemptMinRuntime
	switch {
	case opt.ShareRound < 0:
		return cfg, errs.Invalid("share-round", "must not be negative, got %s", opt.ShareRound)
	case opt.ShareMinRun < 0:
		return cfg, errs.Invalid("share-min-run", "must not be negative, got %s", opt.ShareMinRun)
	}
	if opt.ShareRound > 0 {
		cfg.TimeShareRound = opt.ShareRound
	}
	if opt.ShareMinRun > 0 {
		cfg.TimeShareMinRun = opt.ShareMinRun
	}
	if opt.LASThresholds != nil {
		cfg.LASThresholds = opt.LASThresholds
	}
	if opt.LASPromote != nil {
		cfg.LASPromote = *opt.LASPromote
	}
	if opt.StarveFactor != nil {
		cfg.StarveFactor = *opt.StarveFactor
	}
	if opt.StarveLimit != nil {
		cfg.StarveLimit = *opt.StarveLimit
	}
	if opt.GangReserveAfter != nil {
		cfg.GangReserveAfter = *opt.GangReserveAfter
	}
	if opt.GavelRound < 0 {
		return cfg, errs.Invalid("gavel-round", "must not be negative, got %s", opt.GavelRound)
	}
	if opt.GavelRound > 0 {
		cfg.GavelRound = opt.GavelRound
	}
	if opt.GavelObjective != "" {
		cfg.GavelObjective = opt.GavelObjective
	}
	if opt.NoAging {
		for i := range cfg.Tiers {
			cfg.Tiers[i].AgingAfter = 0
		}
	}
	return cfg, cfg.Validate()
}

// startEngine rebuilds the engine from st and puts the --nodes and
// --queues files' objects.
// agentBeats is the heartbeat interval and the missed heartbeats agents
// are told. A replicated control plane halves --heartbeat-interval and
// doubles --missed-heartbeats (the deadline stays their product): an
// agent's last acknowledged heartbeat before a leader froze is then at
// most half an interval old, and the failover (1.3–4.3 s measured with
// the defaults) has the rest of the deadline. Heartbeats take their own
// lane into the engine (engine/live.go), not the loop's queue.
func (opt Options) agentBeats() (time.Duration, int) {
	interval, missed := opt.HeartbeatInterval, opt.MissedHeartbeats
	if interval <= 0 {
		interval = 2 * time.Second
	}
	if missed <= 0 {
		missed = 3
	}
	if opt.replicated() {
		return interval / 2, 2 * missed
	}
	return interval, missed
}

func (p *prepared) startEngine(ctx context.Context, st store.Store) (*engine.Engine, error) {
	var tracer trace.Tracer
	if t := p.opt.Tracing; t != nil && t.Enabled {
		tracer = t.Tracer("engine")
	}
	interval, missed := p.opt.agentBeats()
	eng, err := engine.New(engine.Config{Core: p.cfg, Logger: p.lg, Metrics: p.m, Tracer: tracer,
		HeartbeatInterval: interval, MissedHeartbeats: missed, PauseCredit: true,
		DefaultLease: defaultLeaseOf(p.opt.DefaultLease), RetainFinished: retainOf(p.opt.RetainFinished),
		RetainFinishedMax: p.opt.RetainFinishedMax, RetainAccounting: p.opt.RetainAccounting}, st)
	if err != nil {
		return nil, err
	}
	p.eng.Store(eng)
	if i, err := eng.UpsertNodes(ctx, p.nodes); err != nil {
		eng.Close()
		return nil, errs.Prefix("nodes."+p.nodes[i].Name, err)
	}
	for _, pool := range p.pools {
		if _, err := eng.PutNodePool(ctx, pool); err != nil {
			eng.Close()
			return nil, errs.Prefix("node-pools."+pool.Name, err)
		}
	}
	// Parents before children, whatever the file's order.
	for pending := p.queues; len(pending) > 0; {
		var next []api.Queue
		var lastErr error
		for _, q := range pending {
			if err := eng.ConfigureQueue(ctx, q, ""); err != nil {
				lastErr = errs.Prefix("queues."+q.Name, err)
				next = append(next, q)
			}
		}
		if len(next) == len(pending) {
			eng.Close()
			return nil, lastErr
		}
		pending = next
	}
	return eng, nil
}

// newHandler is the API on eng, for a listener on addr.
func (p *prepared) newHandler(eng *engine.Engine, addr string) *Server {
	opt := p.opt
	handler := New(eng, p.cfg.Policy, p.lg, p.reg, p.m, p.auth)
	handler.SetTracing(opt.Tracing)
	handler.StartServices(p.svcGauges)
	handler.StartSeries(opt.SeriesEvery)
	handler.StartPools(poolctl.Config{Planner: nodepool.New(p.cfg), Providers: opt.PoolProviders,
		Logger: p.lg, Period: opt.PoolPeriod, Gauges: p.poolGauge})
	handler.browser = newBrowserGuard(p.auth == nil, addr, p.origins)
	handler.streams = newStreamSlots(limitOf(opt.MaxEventStreams, DefaultMaxEventStreams), limitOf(opt.MaxEventStreamsPerTenant, DefaultMaxEventStreamsPerTenant), p.m)
	if opt.EventWriteTimeout > 0 {
		handler.streamWrite = opt.EventWriteTimeout
	}
	switch {
	case opt.MaxInFlight == 0:
		handler.adm.max = DefaultMaxInFlight
	case opt.MaxInFlight > 0:
		handler.adm.max = int64(opt.MaxInFlight)
	}
	return handler
}

// sideAddrs are the side listeners' addresses (nil when not served).
type sideAddrs struct{ pprof, metrics net.Addr }

// listen opens the API's listener and serves the side listeners until
// ctx ends.
func (p *prepared) listen(ctx context.Context) (net.Listener, sideAddrs, error) {
	ln, err := net.Listen("tcp", p.opt.Listen)
	if err != nil {
		return nil, sideAddrs{}, errs.Wrap(errs.Unavailable, "listen", err)
	}
	side, err := p.serveSideListeners(ctx)
	if err != nil {
		ln.Close()
		return nil, sideAddrs{}, err
	}
	return ln, side, nil
}

// serveSideListeners serves --pprof and --metrics-listen until ctx ends.
func (p *prepared) serveSideListeners(ctx context.Context) (sideAddrs, error) {
	var side sideAddrs
	var err error
	if p.opt.PprofListen != "" {
		if side.pprof, err = servePprof(ctx, p.opt.PprofListen); err != nil {
			return side, err
		}
	}
	if p.opt.MetricsListen != "" {
		if side.metrics, err = serveSide(ctx, "metrics-listen", p.opt.MetricsListen, metricsOnly(p.reg, p.lg)); err != nil {
			return side, err
		}
	}
	return side, nil
}

// httpServer is the HTTP server of handler on ln (which it wraps in the
// per-address connection cap).
func (p *prepared) httpServer(handler http.Handler, ln net.Listener) (*http.Server, net.Listener, error) {
	ln = newPerIPListener(ln, limitOf(p.opt.MaxConnsPerIP, DefaultMaxConnsPerIP), p.m, p.tlsConfig == nil)
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         p.tlsConfig,
		// TLS handshake failures (a refused client certificate) are logged.
		ErrorLog: slog.NewLogLogger(p.lg.Handler(), slog.LevelWarn),
	}
	// HTTP/1.1, and HTTP/2: by ALPN over TLS, or without TLS (h2c, prior
	// knowledge). One connection multiplexes many waiting schedule
	// requests, which a process's file limit would not allow as
	// connections.
	var protos http.Protocols
	protos.SetHTTP1(true)
	if p.tlsConfig != nil {
		protos.SetHTTP2(true)
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	srv.Protocols = &protos
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: MaxStreams}
	// Go's default HTTP/2 write scheduler (round robin) walks the ring of
	// every open stream of a connection to find one with something to
	// write, for each frame: with tens of thousands of schedule requests
	// waiting on one connection, answering them became quadratic (61 % of
	// the CPU while a full cluster drained 100,000 waiting requests). The
	// random scheduler holds only the streams that have frames queued.
	// net/http has no setting for the write scheduler, so x/net/http2's
	// server serves HTTP/2 here (it takes MaxConcurrentStreams and the
	// rest from srv.HTTP2). From Go 1.27, x/net/http2 wraps net/http and
	// ignores user write schedulers: the drain must be measured again then.
	//lint:ignore SA1019 no API that is not deprecated chooses the HTTP/2 write scheduler (see above)
	if err := http2.ConfigureServer(srv, &http2.Server{NewWriteScheduler: http2.NewRandomWriteScheduler}); err != nil {
		ln.Close()
		return nil, nil, err
	}
	return srv, ln, nil
}

// banner prints the server's first lines (tools read its address from
// the first).
func (p *prepared) banner(out io.Writer, ln net.Listener, what string, side sideAddrs) {
	fmt.Fprintf(out, "hetsched server: %s (policy %s, %s)\n", p.url(ln), p.cfg.Policy, what)
	if p.memLimit > 0 {
		p.lg.Info("go runtime soft memory limit", "bytes", p.memLimit, "from", p.memFrom)
	}
	if side.pprof != nil {
		fmt.Fprintf(out, "profiling: http://%s/debug/pprof/\n", side.pprof)
	}
	if side.metrics != nil {
		fmt.Fprintf(out, "metrics: http://%s/metrics (no token needed there)\n", side.metrics)
	}
	fmt.Fprintln(out, describeAuth(p.opt, p.auth))
	if p.warn != "" {
		fmt.Fprintln(out, p.warn)
		p.lg.Warn(p.warn)
	}
	if p.opt.Ready != nil {
		p.opt.Ready(ln.Addr().String())
	}
}

// url is the server's base URL on ln.
func (p *prepared) url(ln net.Listener) string {
	if p.tlsConfig != nil {
		return "https://" + ln.Addr().String()
	}
	return "http://" + ln.Addr().String()
}

// serveUntil serves srv on ln until ctx ends (then shuts it down within
// 10 s) or serving fails; work, when not nil, runs beside it and its end
// (an error, or nil) ends serving too.
func (p *prepared) serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, work func(context.Context) error) error {
	errc := make(chan error, 2)
	go func() {
		if p.tlsConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	wctx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	workDone := make(chan error, 1)
	if work != nil {
		go func() { workDone <- work(wctx) }()
	}
	shutdown := func() {
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}
	select {
	case <-ctx.Done():
		shutdown()
		if work != nil {
			stopWork()
			<-workDone
		}
		return nil
	case err := <-workDone:
		shutdown()
		return err
	case err := <-errc:
		if work != nil {
			stopWork()
			<-workDone
		}
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// parseDiskReserve reads --disk-reserve: "" (the store's default) or a
// size in bytes with an optional suffix (Ki, Mi, Gi, K, M, G, …).
func parseDiskReserve(spec string) (int64, error) {
	if spec == "" {
		return 0, nil
	}
	b, err := resource.ParseQuantity(spec, resource.Units)
	if err != nil || b <= 0 {
		return 0, errs.Invalid("disk-reserve", "must be a size such as 2Gi or 500M, got %q", spec)
	}
	return b, nil
}

// DefaultRetainFinished is --retain-finished's default.
const DefaultRetainFinished = 24 * time.Hour

// retainOf resolves Options.RetainFinished for the engine (0 there: for
// ever).
func retainOf(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultRetainFinished
	case d < 0:
		return 0
	}
	return d
}

// DefaultLeaseDuration is --default-lease's default.
const DefaultLeaseDuration = 10 * time.Minute

// defaultLeaseOf resolves Options.DefaultLease for the engine (0 there:
// leases without one never expire).
func defaultLeaseOf(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return DefaultLeaseDuration
	case d < 0:
		return 0
	}
	return d
}
