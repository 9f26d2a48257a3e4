package kube

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/hetsched/hetsched/internal/kube/kubewire"
	"io"
	"k8s.io/client-go/informers/internalinterfaces"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/metrics"
)

// Options are `hetsched kube`'s flags.
type Options struct {
	// Kubeconfig is the kubeconfig file ("": $KUBECONFIG, else the
	// in-cluster configuration, else ~/.kube/config).
	Kubeconfig    string
	QPS           float32
	Burst         int
	SchedulerName string
	// PriorityTiers is "URGENT,HIGH,MEDIUM" ("": DefaultPriorityTiers).
	PriorityTiers   string
	DeviceResources []string
	Policy          string
	// Queues is the hetsched queue tree.
	Queues      []api.Queue
	BindWorkers int
	// NoDefaultSpread: Config.NoDefaultSpread.
	NoDefaultSpread bool
	// Wire chooses the Kubernetes client's pieces (--bind-via,
	// --lean-watch, --gather-writes); the zero value is client-go's stock
	// paths, `hetsched kube`'s default kubewire.Fast.
	Wire kubewire.Options
	// Listen serves /metrics and /healthz ("": off).
	Listen string
	// MetricsAuth says who may read /metrics (metricsauth.go): "auto"
	// (the default: "kubernetes" unless Listen is a loopback address),
	// "kubernetes" (a bearer token the API server authenticates and
	// authorizes for GET on the path; the port then speaks TLS) or "none".
	// TLSCert and TLSKey are the port's certificate with "kubernetes"
	// ("": one made in memory).
	MetricsAuth     string
	TLSCert, TLSKey string
	// WatchOnly runs only the informers, and with BindFloor binds the
	// pods of SchedulerName to the nodes in turn (WatchOnly): the
	// benchmark's floor of a scheduler's CPU.
	WatchOnly, BindFloor bool
	// LeaderElect runs active/standby through a coordination.k8s.io Lease
	// LeaseNamespace/LeaseName held by Identity (default: host name and
	// pid).
	LeaderElect    bool
	LeaseNamespace string
	LeaseName      string
	Identity       string
	LeaseDuration  time.Duration
	RenewDeadline  time.Duration
	RetryPeriod    time.Duration
	Logger         *slog.Logger
	// Ready, when set, is called with the metrics port's URL
	// (http://ADDR, or https://ADDR when it speaks TLS) once it serves.
	Ready func(addr string)
}

// ErrLostLeadership ends Run when another replica took the lease: the
// process exits and its restart rebuilds from the cluster, as
// kube-scheduler does.
var ErrLostLeadership = errors.New("kube: lost leadership: another replica holds the Lease")

// RESTConfig loads the client configuration: the kubeconfig file named,
// else $KUBECONFIG, else in-cluster, else ~/.kube/config.
func RESTConfig(kubeconfig string, qps float32, burst int) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	switch {
	case kubeconfig != "" || os.Getenv("KUBECONFIG") != "":
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = kubeconfig
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	default:
		if cfg, err = rest.InClusterConfig(); errors.Is(err, rest.ErrNotInCluster) {
			cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	// No client-wide Timeout: it would cut the informers' watches. Every
	// call the Scheduler makes has its own deadline (RequestTimeout).
	cfg.QPS, cfg.Burst = qps, burst
	// Protobuf, as kube-scheduler speaks: decoding pods is most of a
	// front end's CPU, and JSON costs several times more (the CRDs'
	// clients keep JSON).
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "hetsched-kube"
	return cfg, nil
}

// clientConfig is RESTConfig for opt, its connections' writes gathered
// where opt.Wire asks.
func clientConfig(opt Options) (*rest.Config, error) {
	rc, err := RESTConfig(opt.Kubeconfig, opt.QPS, opt.Burst)
	if err != nil {
		return nil, err
	}
	if opt.Wire.GatherWrites && rc.Dial == nil {
		// client-go's own dialer's settings, the writes gathered.
		rc.Dial = kubewire.GatheringDial(&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second})
	}
	return rc, nil
}

// CoreConfig is the core's configuration under hetsched kube: the
// defaults, with NoExecute taints' evictions left to Kubernetes' taint
// manager (engine.CoreConfig.KeepOnNoExecute), as kube-scheduler leaves them,
// and every pod allowed to evict pods of a smaller priority, whatever its
// tier (engine.CoreConfig.PreemptAllTiers), as kube-scheduler allows it.
func CoreConfig() engine.CoreConfig {
	c := engine.DefaultCoreConfig()
	c.KeepOnNoExecute = true
	c.PreemptAllTiers = true
	return c
}

// Run is `hetsched kube`: it serves metrics, takes leadership through its Lease (when
// asked), and schedules until ctx ends or the lease is lost.
func Run(ctx context.Context, out io.Writer, opt Options) error {
	lg := opt.Logger
	if lg == nil {
		lg = slog.New(slog.NewTextHandler(out, nil))
	}
	tiers := DefaultPriorityTiers
	if opt.PriorityTiers != "" {
		var err error
		if tiers, err = ParsePriorityTiers(opt.PriorityTiers); err != nil {
			return err
		}
	}
	ccfg := CoreConfig()
	if opt.Policy != "" {
		ccfg.Policy = opt.Policy
	}
	if err := ccfg.Validate(); err != nil {
		return err
	}
	authMode, err := metricsAuthMode(opt.MetricsAuth, opt.Listen)
	if err != nil {
		return err
	}
	if authMode != MetricsAuthKubernetes && (opt.TLSCert != "" || opt.TLSKey != "") {
		return errs.Invalid("tls-cert", "serves the metrics port with --metrics-auth kubernetes only (it is %s for --listen %s)", authMode, opt.Listen)
	}
	rc, err := clientConfig(opt)
	if err != nil {
		return err
	}
	// One HTTP client for every API client (its transport, its
	// connection): with a Dial of its own, client-go would not share a
	// transport between configurations.
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfigAndClient(rc, hc)
	if err != nil {
		return err
	}
	// Custom resources have no protobuf encoding.
	jc := rest.CopyConfig(rc)
	jc.ContentType, jc.AcceptContentTypes = "", ""
	dyn, err := dynamic.NewForConfigAndClient(jc, hc)
	if err != nil {
		return err
	}
	if opt.WatchOnly {
		bindFor := ""
		if opt.BindFloor {
			bindFor = opt.SchedulerName
		}
		return WatchOnly(ctx, cs, bindFor, 10*time.Second)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(reg)
	if opt.Listen != "" {
		ma := metricsAccess{}
		if authMode == MetricsAuthKubernetes {
			if ma.tls, err = metricsTLS(opt.TLSCert, opt.TLSKey); err != nil {
				return err
			}
			ma.reviewer = newMetricsReviewer(cs)
		}
		stop, err := serveMetrics(opt.Listen, reg, ma, opt.Ready)
		if err != nil {
			return err
		}
		defer stop()
	}
	lead := func(ctx context.Context) error {
		m.Leader.Set(1)
		m.LeaderChanges.Inc()
		defer func() { m.Leader.Set(0); m.LeaderChanges.Inc() }()
		return schedule(ctx, lg, cs, dyn, rc, ccfg, m, reg, tiers, opt)
	}
	if !opt.LeaderElect {
		return lead(ctx)
	}
	return elect(ctx, lg, cs, opt, lead)
}

// schedule runs an engine and a Scheduler over it until ctx ends; a
// Scheduler that asks for a rebuild (ErrRebuild: a Queue deleted, the
// ResourceSchedule's policy) is followed by a new engine and Scheduler,
// rebuilt from the cluster.
func schedule(ctx context.Context, lg *slog.Logger, cs kubernetes.Interface, dyn dynamic.Interface, watch *rest.Config, ccfg engine.CoreConfig, m *metrics.Metrics, reg prometheus.Registerer, tiers PriorityTiers, opt Options) error {
	base := ccfg.Policy
	pause := time.Second
	for {
		c := ccfg
		if p := SchedulePolicy(ctx, dyn); p != "" {
			c.Policy = p
			if err := c.Validate(); err != nil {
				lg.Warn("the ResourceSchedule's policy is refused; keeping the default", "policy", p, "err", err)
				c.Policy = base
			}
		}
		began := time.Now()
		err := scheduleOnce(ctx, lg, cs, dyn, watch, c, base, m, reg, tiers, opt)
		if !errors.Is(err, ErrRebuild) || ctx.Err() != nil {
			return err
		}
		// Rebuilds relist the cluster: one that follows another at once
		// waits, twice as long each time (up to 30 s).
		if time.Since(began) > time.Minute {
			pause = time.Second
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 30*time.Second)
	}
}

// scheduleOnce runs one engine and its Scheduler.
func scheduleOnce(ctx context.Context, lg *slog.Logger, cs kubernetes.Interface, dyn dynamic.Interface, watch *rest.Config, ccfg engine.CoreConfig, base string, m *metrics.Metrics, reg prometheus.Registerer, tiers PriorityTiers, opt Options) error {
	st, err := OpenMemStore(lg)
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := engine.New(engine.Config{Core: ccfg, Logger: lg, Metrics: m,
		// Pods are the record: finished tasks go soon.
		RetainFinished: 5 * time.Minute, RetainFinishedMax: 100_000}, st)
	if err != nil {
		return err
	}
	defer eng.Close()
	for pending := opt.Queues; len(pending) > 0; {
		var next []api.Queue
		var lastErr error
		for _, q := range pending {
			if err := eng.PutQueue(ctx, "", q); err != nil {
				next, lastErr = append(next, q), err
			}
		}
		if len(next) == len(pending) {
			return fmt.Errorf("queues: %w", lastErr)
		}
		pending = next
	}
	binder, err := kubewire.NewBinder(opt.Wire.BindVia, cs)
	if err != nil {
		return err
	}
	var podInformer internalinterfaces.NewInformerFunc
	if opt.Wire.LeanWatch {
		if podInformer, err = kubewire.PodInformer(watch, cs); err != nil {
			return err
		}
	}
	lg.Info("kubernetes client", "bindVia", cmp.Or(opt.Wire.BindVia, kubewire.BindClientGo), "leanWatch", opt.Wire.LeanWatch, "gatherWrites", opt.Wire.GatherWrites)
	s, err := New(Config{Client: cs, Dynamic: dyn, Binder: binder, PodInformer: podInformer, Engine: eng, SchedulerName: opt.SchedulerName, Tiers: &tiers,
		DeviceResources: opt.DeviceResources, BindWorkers: opt.BindWorkers, Logger: lg, Registerer: reg,
		Policy: ccfg.Policy, BasePolicy: base, NoDefaultSpread: opt.NoDefaultSpread})
	if err != nil {
		return err
	}
	lg.Info("scheduling pods", "schedulerName", s.cfg.SchedulerName, "policy", ccfg.Policy)
	return s.Run(ctx)
}

// elect runs lead while this replica holds the lease.
func elect(ctx context.Context, lg *slog.Logger, cs kubernetes.Interface, opt Options, lead func(context.Context) error) error {
	id := opt.Identity
	if id == "" {
		host, _ := os.Hostname()
		id = host + "_" + strconv.Itoa(os.Getpid())
	}
	ns, name := opt.LeaseNamespace, opt.LeaseName
	if ns == "" {
		ns = "kube-system"
	}
	if name == "" {
		name = "hetsched"
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: ns, Name: name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: id},
	}
	ld, rd, rp, err := leadershipTimings(opt.LeaseDuration, opt.RenewDeadline, opt.RetryPeriod)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	// When lead returns by itself (its engine stopped, an informer did not
	// sync), the lease must go too: a leader that schedules nothing would
	// keep the standbys out.
	ectx, stopElect := context.WithCancel(ctx)
	defer stopElect()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: ld, RenewDeadline: rd, RetryPeriod: rp, ReleaseOnCancel: true, Name: name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				lg.Info("leading", "lease", ns+"/"+name, "identity", id)
				errc <- lead(ctx)
				stopElect()
			},
			OnStoppedLeading: func() { lg.Info("stopped leading", "lease", ns+"/"+name, "identity", id) },
			OnNewLeader: func(who string) {
				if who != id {
					lg.Info("standby", "leader", who)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	le.Run(ectx)
	select {
	case err := <-errc:
		if err != nil || ctx.Err() != nil {
			return err
		}
		return errors.New("kube: the scheduler stopped by itself")
	default:
	}
	if ctx.Err() != nil {
		return nil
	}
	return ErrLostLeadership
}

// metricsAccess is who may read the metrics port: anyone (the zero
// value), or a reviewed bearer token over TLS.
type metricsAccess struct {
	reviewer *metricsReviewer
	tls      *tls.Config
}

// serveMetrics serves /metrics (through ma's reviewer, when set) and
// /healthz (to anyone) on addr.
func serveMetrics(addr string, reg *prometheus.Registry, ma metricsAccess, ready func(string)) (func(), error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if ma.tls != nil {
		l = tls.NewListener(l, ma.tls)
	}
	var h http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if ma.reviewer != nil {
		h = ma.reviewer.wrap(h)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	go srv.Serve(l)
	if ready != nil {
		scheme := "http://"
		if ma.tls != nil {
			scheme = "https://"
		}
		ready(scheme + l.Addr().String())
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}, nil
}

// leadershipTimings fills in kube-scheduler's timings (15 s, 10 s, 2 s) where
// none is given, scaled to a given lease duration, and checks that they
// nest: retry < renew deadline < lease duration.
func leadershipTimings(ld, rd, rp time.Duration) (time.Duration, time.Duration, time.Duration, error) {
	if ld == 0 {
		ld = 15 * time.Second
	}
	if rd == 0 {
		rd = ld * 2 / 3
	}
	if rp == 0 {
		rp = max(rd/5, 100*time.Millisecond)
	}
	switch {
	case ld < 0 || rd < 0 || rp < 0:
		return 0, 0, 0, fmt.Errorf("lease-duration, renew-deadline and retry-period must not be negative")
	case rd >= ld:
		return 0, 0, 0, fmt.Errorf("renew-deadline (%v) must be shorter than lease-duration (%v)", rd, ld)
	case rp >= rd:
		return 0, 0, 0, fmt.Errorf("retry-period (%v) must be shorter than renew-deadline (%v)", rp, rd)
	}
	return ld, rd, rp, nil
}
