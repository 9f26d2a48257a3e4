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
	"time"

	"golang.org/x/net/http2"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/metrics"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
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
	Policy     string
	// MaxInFlight is how many task submissions may be in flight (being
	// admitted, or waiting in POST /schedule) before the server sheds them,
	// low tier first (admission.go). 0 means DefaultMaxInFlight; negative,
	// unlimited.
	MaxInFlight int
	// PreemptMinRuntime protects a task from preemption and reclaim until
	// it has run this long (core.Config.PreemptMinRuntime; default 0).
	PreemptMinRuntime time.Duration
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
	// DefaultLease is the lease of a task without a command that names
	// none (0: DefaultLeaseDuration; negative: such leases never expire).
	DefaultLease time.Duration
	// DiskReserve is the store's free-space reserve (a size like "2Gi";
	// "" is the default, min(1 GiB, 5 % of the filesystem)): below it new
	// work is refused with 507 while everything else goes on.
	DiskReserve string
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
	Logger            *slog.Logger
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

// NodesFile is the --nodes file format.
type NodesFile struct {
	Nodes []api.Node `json:"nodes"`
}

// LoadNodesFile reads and validates a --nodes file (YAML or JSON; unknown
// fields are errors).
func LoadNodesFile(path string) ([]api.Node, error) {
	var f NodesFile
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

// isLoopback reports whether addr's host is a loopback address.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Run serves until ctx ends, then shuts down cleanly.
func Run(ctx context.Context, out io.Writer, opt Options) error {
	lg := opt.Logger
	if lg == nil {
		lg = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if opt.DataDir == "" {
		return errs.Invalid("data-dir", "a directory for the store is required")
	}
	if opt.PprofListen != "" && !isLoopback(opt.PprofListen) {
		return errs.Invalid("pprof", "the profiling listener is served on loopback only; got %q", opt.PprofListen)
	}
	memLimit, memFrom, err := applyMemoryLimit(opt.MemoryLimit)
	if err != nil {
		return err
	}
	origins, err := ParseAllowedOrigins(opt.AllowOrigins)
	if err != nil {
		return err
	}
	warn, err := checkTransport(opt)
	if err != nil {
		return err
	}
	var auth *Auth
	if opt.TokensFile != "" {
		var err error
		if auth, err = LoadTokens(opt.TokensFile); err != nil {
			return err
		}
	} else if opt.ClientCA != "" {
		auth = certOnlyAuth()
	}
	if auth != nil {
		auth.certs = opt.ClientCA != ""
		if err := auth.SetDefaultLimit(opt.TenantRate, opt.TenantBurst); err != nil {
			return err
		}
	}
	var tlsConfig *tls.Config
	if opt.TLSCert != "" {
		if tlsConfig, err = certs.ServerTLSConfig(opt.TLSCert, opt.TLSKey, opt.ClientCA); err != nil {
			return err
		}
	}
	cfg := core.DefaultConfig()
	if opt.Policy != "" {
		cfg.Policy = opt.Policy
	}
	if opt.PreemptMinRuntime < 0 {
		return errs.Invalid("preempt-min-runtime", "must not be negative, got %s", opt.PreemptMinRuntime)
	}
	cfg.PreemptMinRuntime = opt.PreemptMinRuntime
	if opt.NoAging {
		for i := range cfg.Tiers {
			cfg.Tiers[i].AgingAfter = 0
		}
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	var nodes []api.Node
	if opt.NodesFile != "" {
		var err error
		if nodes, err = LoadNodesFile(opt.NodesFile); err != nil {
			return err
		}
	}
	var queues []api.Queue
	if opt.QueuesFile != "" {
		var err error
		if queues, err = LoadQueuesFile(opt.QueuesFile); err != nil {
			return err
		}
	}
	reserve, err := parseDiskReserve(opt.DiskReserve)
	if err != nil {
		return err
	}
	st, err := store.OpenDisk(opt.DataDir, store.DiskOptions{Logger: lg, Reserve: reserve})
	if err != nil {
		return err
	}
	defer st.Close()
	start := time.Now()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	if rec := st.Recovery(); rec.TornTail {
		m.StoreTornBytes.Set(float64(rec.BytesDropped))
		m.StoreTornRecords.Set(float64(rec.RecordsDropped))
	}
	eng, err := engine.New(engine.Config{Core: cfg, Logger: lg, Metrics: m,
		HeartbeatInterval: opt.HeartbeatInterval, MissedHeartbeats: opt.MissedHeartbeats,
		DefaultLease: defaultLeaseOf(opt.DefaultLease)}, st)
	if err != nil {
		return err
	}
	defer eng.Close()
	if i, err := eng.UpsertNodes(ctx, nodes); err != nil {
		return errs.Prefix("nodes."+nodes[i].Name, err)
	}
	// Parents before children, whatever the file's order.
	for pending := queues; len(pending) > 0; {
		var next []api.Queue
		var lastErr error
		for _, q := range pending {
			if err := eng.ConfigureQueue(ctx, q, ""); err != nil {
				lastErr = errs.Prefix("queues."+q.Name, err)
				next = append(next, q)
			}
		}
		if len(next) == len(pending) {
			return lastErr
		}
		pending = next
	}
	ln, err := net.Listen("tcp", opt.Listen)
	if err != nil {
		return errs.Wrap(errs.Unavailable, "listen", err)
	}
	var pprofAddr net.Addr
	if opt.PprofListen != "" {
		pctx, stopPprof := context.WithCancel(ctx)
		defer stopPprof()
		if pprofAddr, err = servePprof(pctx, opt.PprofListen); err != nil {
			ln.Close()
			return err
		}
	}
	var metricsAddr net.Addr
	if opt.MetricsListen != "" {
		mctx, stopMetrics := context.WithCancel(ctx)
		defer stopMetrics()
		if metricsAddr, err = serveSide(mctx, "metrics-listen", opt.MetricsListen, metricsOnly(reg, lg)); err != nil {
			ln.Close()
			return err
		}
	}
	handler := New(eng, cfg.Policy, lg, reg, m, auth)
	handler.browser = newBrowserGuard(auth == nil, ln.Addr().String(), origins)
	handler.streams = newStreamSlots(limitOf(opt.MaxEventStreams, DefaultMaxEventStreams), limitOf(opt.MaxEventStreamsPerTenant, DefaultMaxEventStreamsPerTenant), m)
	if opt.EventWriteTimeout > 0 {
		handler.streamWrite = opt.EventWriteTimeout
	}
	ln = newPerIPListener(ln, limitOf(opt.MaxConnsPerIP, DefaultMaxConnsPerIP), m, tlsConfig == nil)
	switch {
	case opt.MaxInFlight == 0:
		handler.adm.max = DefaultMaxInFlight
	case opt.MaxInFlight > 0:
		handler.adm.max = int64(opt.MaxInFlight)
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		TLSConfig:         tlsConfig,
		// TLS handshake failures (a refused client certificate) are logged.
		ErrorLog: slog.NewLogLogger(lg.Handler(), slog.LevelWarn),
	}
	// HTTP/1.1, and HTTP/2: by ALPN over TLS, or without TLS (h2c, prior
	// knowledge). One connection multiplexes many waiting schedule
	// requests, which a process's file limit would not allow as
	// connections.
	var protos http.Protocols
	protos.SetHTTP1(true)
	if tlsConfig != nil {
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
	err = http2.ConfigureServer(srv, &http2.Server{NewWriteScheduler: http2.NewRandomWriteScheduler})
	if err != nil {
		ln.Close()
		return err
	}
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	fmt.Fprintf(out, "hetsched server: %s://%s (policy %s, data %s, %d tasks restored in %s)\n",
		scheme, ln.Addr(), cfg.Policy, opt.DataDir, eng.NumTasks(), time.Since(start).Round(time.Millisecond))
	if memLimit > 0 {
		lg.Info("go runtime soft memory limit", "bytes", memLimit, "from", memFrom)
	}
	if pprofAddr != nil {
		// After the first line: tools read the server's address from it.
		fmt.Fprintf(out, "profiling: http://%s/debug/pprof/\n", pprofAddr)
	}
	if metricsAddr != nil {
		fmt.Fprintf(out, "metrics: http://%s/metrics (no token needed there)\n", metricsAddr)
	}
	fmt.Fprintln(out, describeAuth(opt, auth))
	if warn != "" {
		fmt.Fprintln(out, warn)
		lg.Warn(warn)
	}
	if opt.Ready != nil {
		opt.Ready(ln.Addr().String())
	}
	srv.RegisterOnShutdown(handler.Close)
	errc := make(chan error, 1)
	go func() {
		if tlsConfig != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
		return nil
	case err := <-errc:
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
