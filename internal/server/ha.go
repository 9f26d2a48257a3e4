package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/etcdmember"
	"github.com/hetsched/hetsched/internal/store/etcdstore"
)

// A replicated control plane (--store etcd, or --ha with an embedded etcd
// member): every server campaigns in one etcd election; the leader reads
// the store and runs the engine, the others are standbys that keep a warm
// copy of the store (etcdstore's tail) and pass clients on to the leader
// (proxy.go). A term is one leadership: it ends when the leadership grant
// is lost (etcd did not hear from this server within ElectionTTL), when a
// commit fails (the fence refused it: another server leads; or etcd did
// not answer: its outcome is unknown), or at shutdown; the server then
// steps down, reads the store again and campaigns again.
//
//	open the store (standby: tail) ──► campaign ──won──► Lead (catch up, fence)
//	        ▲                                               │
//	        │                                        start the engine, serve
//	        └──── step down: stop the engine ◄── grant lost │ commit failed │ shutdown

// Store backends (--store).
const (
	StorePebble = "pebble"
	StoreEtcd   = "etcd"
)

// DefaultElectionTTL is the leadership grant's TTL: a leader that etcd does
// not hear from for this long loses its leadership (etcd's minimum with
// its default timing is 2 s).
const DefaultElectionTTL = 2 * time.Second

// replicated reports whether the options ask for an etcd store.
func (opt Options) replicated() bool { return opt.Store == StoreEtcd || opt.HA }

// memberConfig is the embedded etcd member's configuration (--ha).
func (opt Options) memberConfig() etcdmember.Config {
	return etcdmember.Config{Name: opt.Name, Dir: opt.DataDir, Peers: opt.Peers, ClientURLs: opt.EtcdListenClient,
		PeerCert: opt.PeerCert, PeerKey: opt.PeerKey, PeerCA: opt.PeerCA, InsecurePlaintext: opt.InsecurePlaintext,
		StartTimeout: opt.EtcdStartTimeout}
}

// checkReplication checks the replication flags.
func (opt Options) checkReplication() error {
	switch opt.Store {
	case "", StorePebble, StoreEtcd:
	default:
		return errs.Invalid("store", "want pebble (the default) or etcd, got %q", opt.Store)
	}
	if opt.Store == StorePebble && opt.HA {
		return errs.Invalid("store", "--ha runs an embedded etcd member: it needs the etcd store, not pebble")
	}
	if !opt.replicated() {
		for field, set := range map[string]bool{"etcd-endpoints": len(opt.EtcdEndpoints) > 0, "peers": opt.Peers != "",
			"etcd-ca": opt.EtcdCA != "", "etcd-cert": opt.EtcdCert != "", "advertise": opt.Advertise != "",
			"peer-cert": opt.PeerCert != "", "peer-key": opt.PeerKey != ""} {
			if set {
				return errs.Invalid(field, "only with --store etcd or --ha")
			}
		}
		return nil
	}
	if opt.HA {
		if len(opt.EtcdEndpoints) > 0 {
			return errs.Invalid("etcd-endpoints", "--ha runs its own etcd member; --etcd-endpoints names an external etcd cluster (use one or the other)")
		}
		if opt.DataDir == "" {
			return errs.Invalid("data-dir", "--ha keeps its etcd member's data there: a directory is required")
		}
		if opt.Peers != "" && opt.Name == "" {
			return errs.Invalid("name", "--peers needs --name: which of the peers this server is")
		}
		if err := opt.memberConfig().Check(); err != nil {
			return err
		}
	} else if opt.PeerCert != "" || opt.PeerKey != "" {
		return errs.Invalid("peer-cert", "the member certificate is for --ha's embedded etcd member")
	} else if len(opt.EtcdEndpoints) == 0 {
		return errs.Invalid("etcd-endpoints", "--store etcd needs the etcd cluster's client URLs (--etcd-endpoints http://h1:2379,...), or --ha to run a member here")
	}
	if opt.ElectionTTL < 0 || (opt.ElectionTTL > 0 && opt.ElectionTTL < 2*time.Second) || opt.ElectionTTL%time.Second != 0 {
		return errs.Invalid("election-ttl", "whole seconds, at least 2s (etcd's minimum TTL), got %s", opt.ElectionTTL)
	}
	if opt.Advertise != "" {
		u, err := url.Parse(opt.Advertise)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return errs.Invalid("advertise", "want this server's base URL as the others reach it (http://host:port), got %q", opt.Advertise)
		}
	} else if host, _, err := net.SplitHostPort(opt.Listen); err == nil && (host == "" || net.ParseIP(host).IsUnspecified()) {
		return errs.Invalid("advertise", "--listen %s names no address the other servers can reach: give --advertise http://HOST:PORT", opt.Listen)
	}
	return nil
}

// serverEntry is a campaigner's election value: who it is.
type serverEntry struct {
	Name string `json:"name"`
	URL  string `json:"url"`
}

// replica is this server's part in a replicated control plane.
type replica struct {
	p      *prepared
	cli    *clientv3.Client
	self   serverEntry
	value  string // self, as the election value
	addr   string // the listen address
	prefix string
	ttl    int
	lg     *slog.Logger

	cur    atomic.Pointer[Server]          // the API while this server leads
	leader atomic.Pointer[serverEntry]     // the leader as last observed
	seen   atomic.Pointer[observed]        // the observed leader and its leadership grant, together
	copy   atomic.Pointer[etcdstore.Store] // the term's store: a standby's warm copy
	proxy  *leaderProxy
	local  *Server // the standby's own routes: guard, metrics
	// member is the embedded etcd member (--ha; nil on an external
	// etcd): while this server leads, it sheds etcd's raft leadership
	// (shedRaft).
	member *etcdmember.Member
	// renewed is when etcd last renewed this leader's leadership grant
	// (unix ns; holdLeadership): past freshFor the leader answers nothing.
	renewed atomic.Int64
}

// freshFor is how long after its grant's last renewal a leader still
// answers: the TTL, past which etcd may have expired the grant and
// another server lead (a leader paused past it answered heartbeats it no
// longer owned when it resumed). Three quarters of it refused agents'
// registrations while an etcd election delayed the renewals of a grant
// that held.
func (r *replica) freshFor() time.Duration { return time.Duration(r.ttl) * time.Second }

// holdLeadership keeps the leader's term alive (the etcd grant its
// election key is bound to) until ctx ends, and records each renewal
// (renewed). The term must end when the returned
// channel yields why: etcd says the grant is gone, or it could not be
// confirmed for leadershipGiveUp TTLs.
//
// clientv3 gives a keep-alive up once no answer came within the TTL, and
// an etcd election (its raft leader paused or lost) takes about that
// long while every grant lives on (a new raft leader extends them all):
// ending the term then made leaders change several times in a row after
// one was frozen, each new one knowing no agent. So a keep-alive given up
// is followed by single renewals until one answers (the grant held: the
// term goes on) or etcd says the grant is gone. Meanwhile, the leader
// answers nothing past freshFor.
//
// A term holds its grant this way from the start of its campaign (a
// standby's campaign ended too when etcd's raft leadership moved).
func (r *replica) holdLeadership(ctx context.Context, grant clientv3.LeaseID) *leadershipHold {
	r.renewed.Store(time.Now().UnixNano())
	h := &leadershipHold{done: make(chan struct{})}
	go func() {
		for ctx.Err() == nil {
			if ch, err := r.cli.KeepAlive(ctx, grant); err == nil {
				for range ch {
					r.renewed.Store(time.Now().UnixNano())
				}
			}
			if err := r.renewOnce(ctx, grant); err != nil {
				h.err = err
				close(h.done)
				return
			}
		}
	}()
	return h
}

// leadershipHold is a term's leadership as holdLeadership keeps it: done
// is closed when it ended, err then says why.
type leadershipHold struct {
	done chan struct{}
	err  error
}

// shedRaft keeps etcd's raft leadership off this server's member while it
// leads (etcdmember.ShedRaftLeadership), looking every shedEvery, until
// ctx ends: a leader paused or cut off then holds only its own election
// grant, which etcd expires (or a standby revokes) without an etcd
// election first, and no other grant's renewals stall.
func (r *replica) shedRaft(ctx context.Context) {
	t := time.NewTicker(shedEvery)
	defer t.Stop()
	for {
		tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		to, err := r.member.ShedRaftLeadership(tctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			r.lg.Warn("could not move etcd's raft leadership off this leader's member", "err", err)
		case to != "":
			r.lg.Info("moved etcd's raft leadership off this leader's member", "to", to)
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
	}
}

// shedEvery is how often a leader looks whether its member leads etcd's
// raft.
const shedEvery = time.Second

// leadershipGiveUp is how many TTLs without a renewal end a term whose grant
// etcd could not be asked about (no quorum).
const leadershipGiveUp = 3

// renewOnce renews grant once, retrying, after its keep-alive was given
// up; it fails when etcd says the grant is gone or after leadershipGiveUp TTLs
// without a renewal, and ends quietly with ctx.
func (r *replica) renewOnce(ctx context.Context, grant clientv3.LeaseID) error {
	for ctx.Err() == nil {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := r.cli.KeepAliveOnce(tctx, grant)
		cancel()
		switch {
		case err == nil:
			r.renewed.Store(time.Now().UnixNano())
			r.lg.Info("the leadership grant held through a pause of etcd's keep-alives (an etcd election?): leading on")
			return nil
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound):
			return errors.New("the leadership grant ended (etcd did not hear from this server within its TTL)")
		case ctx.Err() != nil:
			return nil
		}
		if since := time.Since(time.Unix(0, r.renewed.Load())); since > leadershipGiveUp*r.freshFor() {
			return fmt.Errorf("the leadership grant could not be renewed for %s (etcd unreachable, or no quorum): %w", since.Round(time.Millisecond), err)
		}
		sleepCtx(ctx, 100*time.Millisecond)
	}
	return nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// runReplicated serves as one server of a replicated control plane.
func runReplicated(ctx context.Context, out io.Writer, p *prepared) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opt := p.opt
	endpoints := opt.EtcdEndpoints
	what := "store etcd " + strings.Join(endpoints, ",")
	var member *etcdmember.Member
	if opt.HA {
		m, err := etcdmember.Start(ctx, opt.memberConfig())
		if err != nil {
			return err
		}
		defer m.Close()
		member = m
		endpoints = []string{m.Endpoint()}
		what = "store etcd (embedded member " + opt.Name + ")"
	}
	cli, err := newEtcdClient(endpoints, opt)
	if err != nil {
		return err
	}
	defer cli.Close() // before the member stops
	ln, side, err := p.listen(ctx)
	if err != nil {
		return err
	}
	r, err := newReplica(p, cli, ln)
	if err != nil {
		ln.Close()
		return err
	}
	r.member = member
	srv, ln, err := p.httpServer(r, ln)
	if err != nil {
		return err
	}
	srv.RegisterOnShutdown(func() {
		if s := r.cur.Load(); s != nil {
			s.Close()
		}
	})
	p.banner(out, ln, fmt.Sprintf("%s, server %s, standby until elected", what, r.self.Name), side)
	return p.serveUntil(ctx, srv, ln, r.run)
}

// newEtcdClient connects to endpoints (TLS by --etcd-ca/--etcd-cert/--etcd-key).
func newEtcdClient(endpoints []string, opt Options) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second,
		DialKeepAliveTime: 2 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		Logger: zap.NewNop()}
	if opt.EtcdCA != "" || opt.EtcdCert != "" || opt.EtcdKey != "" {
		tc, err := certs.ClientTLSConfig(opt.EtcdCA, opt.EtcdCert, opt.EtcdKey)
		if err != nil {
			return nil, errs.Prefix("etcd", err)
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, errs.New(errs.Unavailable, "etcd-endpoints", "connect to etcd %s: %v", strings.Join(endpoints, ","), err)
	}
	return cli, nil
}

func newReplica(p *prepared, cli *clientv3.Client, ln net.Listener) (*replica, error) {
	opt := p.opt
	self := serverEntry{Name: opt.Name, URL: strings.TrimSuffix(opt.Advertise, "/")}
	if self.URL == "" {
		self.URL = p.url(ln)
	}
	if self.Name == "" {
		self.Name = strings.TrimPrefix(strings.TrimPrefix(self.URL, "http://"), "https://")
	}
	v, _ := json.Marshal(self)
	ttl := opt.ElectionTTL
	if ttl == 0 {
		ttl = DefaultElectionTTL
	}
	prefix := opt.EtcdPrefix
	if prefix == "" {
		prefix = etcdstore.DefaultPrefix
	}
	r := &replica{p: p, cli: cli, self: self, value: string(v), addr: ln.Addr().String(), prefix: prefix,
		ttl: int(ttl / time.Second), lg: p.lg.With("server", self.Name)}
	proxy, err := newLeaderProxy(p, r.leaderEntry, r.quorum)
	if err != nil {
		return nil, err
	}
	r.proxy = proxy
	r.local = &Server{auth: p.auth, log: p.lg, metrics: p.m, browser: newBrowserGuard(p.auth == nil, r.addr, p.origins)}
	return r, nil
}

func (r *replica) leaderEntry() *serverEntry { return r.leader.Load() }

// quorum asks etcd for a linearizable read (which needs a raft leader, so
// a majority of members): "" when it answers within a second, else why
// not.
func (r *replica) quorum(ctx context.Context) string {
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := r.cli.Get(clientv3.WithRequireLeader(tctx), r.prefix+"election/", clientv3.WithCountOnly()); err != nil {
		return fmt.Sprintf("this server's etcd has no quorum (a majority of the etcd members is down or cut off: %v)", err)
	}
	return ""
}

// run is the terms, one after another, until ctx ends.
func (r *replica) run(ctx context.Context) error {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := r.term(ctx)
		if ctx.Err() != nil {
			return nil
		}
		r.lg.Warn("leadership term ended; campaigning again", "err", err)
		if time.Since(start) > time.Minute {
			backoff = 200 * time.Millisecond
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
	return nil
}

// term is one round: open the store as a standby, campaign, and when
// elected lead until the grant or the engine ends.
func (r *replica) term(ctx context.Context) error {
	st, err := etcdstore.Open(ctx, r.cli, etcdstore.Options{Prefix: r.prefix + "store/", Logger: r.lg})
	if err != nil {
		return fmt.Errorf("open the store: %w", err)
	}
	defer st.Close()
	r.copy.Store(st)
	defer r.copy.Store(nil)
	// The grant is made under ctx (without a quorum that waits, and
	// shutdown must end the wait), but the session is not tied to ctx:
	// closing it at shutdown revokes the grant (resigning at once), which
	// a cancelled context would prevent.
	gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	grant, err := r.cli.Grant(gctx, int64(r.ttl))
	cancel()
	if err != nil {
		return fmt.Errorf("ask etcd for a leadership grant: %w", err)
	}
	sess, err := concurrency.NewSession(r.cli, concurrency.WithTTL(r.ttl), concurrency.WithLease(grant.ID))
	if err != nil {
		return fmt.Errorf("open an election session: %w", err)
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, r.prefix+"election/")
	r.resignEarlier(ctx, sess.Lease())
	octx, stopObserve := context.WithCancel(ctx)
	defer stopObserve()
	go r.observe(octx, el)
	go r.watchLeader(octx)
	kctx, stopHolding := context.WithCancel(ctx)
	defer stopHolding()
	hold := r.holdLeadership(kctx, sess.Lease())
	cctx, stopCampaign := context.WithCancel(ctx)
	go func() {
		select {
		case <-hold.done:
			stopCampaign()
		case <-cctx.Done():
		}
	}()
	// Campaign cleans up a cancelled campaign with the client's own
	// context, which without a quorum waits until the client closes:
	// once cctx ends, the term does not wait for it.
	won := make(chan error, 1)
	go func() { won <- el.Campaign(cctx, r.value) }()
	select {
	case err = <-won:
	case <-cctx.Done():
		err = ctx.Err()
		if err == nil { // the grant ended
			err = fmt.Errorf("while campaigning: %w", hold.err)
		}
	}
	stopCampaign()
	if err != nil {
		return fmt.Errorf("campaign: %w", err)
	}
	return r.lead(ctx, st, el, hold)
}

// lead runs the engine on st while this server holds the election.
func (r *replica) lead(ctx context.Context, st *etcdstore.Store, el *concurrency.Election, hold *leadershipHold) error {
	t0 := time.Now()
	if err := st.Lead(ctx, &etcdstore.Fence{Key: el.Key(), Rev: el.Rev()}); err != nil {
		return fmt.Errorf("take over the store: %w", err)
	}
	caught := time.Now()
	eng, err := r.p.startEngine(ctx, st)
	if err != nil {
		return fmt.Errorf("start the engine: %w", err)
	}
	h := r.p.newHandler(eng, r.addr)
	h.servers = r.listServers
	kctx, stopShedding := context.WithCancel(ctx)
	defer stopShedding()
	if r.member != nil {
		go r.shedRaft(kctx)
	}
	r.leader.Store(&r.self)
	r.proxy.leaderChanged() // what it passed on as a standby is answered "retry": it leads now
	r.cur.Store(h)
	r.p.m.Leader.Set(1)
	r.p.m.LeaderChanges.Inc()
	r.lg.Info("leading", "took", time.Since(t0).Round(time.Millisecond), "store_catch_up", caught.Sub(t0).Round(time.Millisecond), "tasks", eng.NumTasks())
	var why error
	select {
	case <-hold.done:
		why = hold.err
	case <-eng.Done():
		why = fmt.Errorf("the engine stopped: %w", eng.Err())
	case <-ctx.Done():
	}
	r.cur.Store(nil)
	r.p.eng.CompareAndSwap(eng, nil) // a standby exports no per-node series
	if e := r.leader.Load(); e != nil && *e == r.self {
		r.leader.Store(nil)
	}
	r.p.m.Leader.Set(0)
	r.p.m.LeaderChanges.Inc()
	h.Close()
	eng.Close()
	return why
}

// resignEarlier revokes the leadership grants of this server's earlier
// incarnations (a process killed, then restarted with the same name and
// URL): their keys would otherwise hold the election, or a place in it,
// until their TTL. Another server never has this server's name and URL.
func (r *replica) resignEarlier(ctx context.Context, mine clientv3.LeaseID) {
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := r.cli.Get(tctx, r.prefix+"election/", clientv3.WithPrefix(), clientv3.WithLimit(1000))
	if err != nil {
		return
	}
	for _, kv := range resp.Kvs {
		var e serverEntry
		if json.Unmarshal(kv.Value, &e) != nil || e != r.self || kv.Lease == int64(mine) || kv.Lease == 0 {
			continue
		}
		_, err := r.cli.Revoke(tctx, clientv3.LeaseID(kv.Lease))
		r.lg.Info("revoked the leadership grant of this server's earlier run", "grant", kv.Lease, "err", err)
	}
}

// observe keeps r.leader the election's current leader.
func (r *replica) observe(ctx context.Context, el *concurrency.Election) {
	for resp := range el.Observe(ctx) {
		if len(resp.Kvs) == 0 {
			continue
		}
		var e serverEntry
		if err := json.Unmarshal(resp.Kvs[0].Value, &e); err != nil || e.URL == "" {
			r.lg.Warn("the election's leader value is not a server", "value", errs.Clip(string(resp.Kvs[0].Value)))
			continue
		}
		r.seen.Store(&observed{leader: e, grant: resp.Kvs[0].Lease})
		if prev := r.leader.Swap(&e); prev == nil || *prev != e {
			r.proxy.leaderChanged()
		}
	}
}

// Watching a leader that is gone: a standby asks the leader's /healthz
// every probeEvery. When its address refuses connections refusedProbes
// times in a row (nothing listens there: the process died), or it does
// not answer within probeTimeout silentProbes times in a row (paused,
// frozen, cut off from this standby), the standby revokes the leader's
// leadership grant instead of waiting for it to expire, so that a new
// leader is elected in about a second (plus etcd's own election when the
// process held etcd's raft leader too). A frozen leader kept its grant
// until etcd expired it, which took 3–8 s and more, past the agents'
// fence deadline: every running task was killed. This never risks two
// leaders: a leader whose grant is gone cannot commit (the store's
// fence), answers nothing once its grant is not renewed (freshFor), and
// steps down when its session ends.
const (
	probeEvery    = 200 * time.Millisecond
	probeTimeout  = 500 * time.Millisecond
	refusedProbes = 3
	silentProbes  = 3
)

// watchLeader probes the observed leader until ctx ends.
func (r *replica) watchLeader(ctx context.Context) {
	refused, silent := 0, 0
	var counting *observed // whose probes the counts are
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		o := r.seen.Load()
		if o != counting {
			// Another leader, or another term of it: its own count.
			counting, refused, silent = o, 0, 0
		}
		if o == nil || o.leader == r.self || o.grant == 0 {
			continue
		}
		e := &o.leader
		why := ""
		switch err := r.probeLeader(ctx, e.URL); {
		case err == nil || ctx.Err() != nil:
			refused, silent = 0, 0
		case errors.Is(err, syscall.ECONNREFUSED):
			if refused, silent = refused+1, 0; refused >= refusedProbes {
				why = "the leader's address refuses connections"
			}
		case isTimeout(err):
			if silent, refused = silent+1, 0; silent >= silentProbes {
				why = fmt.Sprintf("the leader did not answer /healthz within %s %d times in a row (paused, or cut off)", probeTimeout, silentProbes)
			}
		default: // it answered something (a TLS alert, a reset): alive
			refused, silent = 0, 0
		}
		if why == "" {
			continue
		}
		refused, silent = 0, 0
		if r.seen.Load() != o {
			continue // a new leader meanwhile: it is not the one probed
		}
		err := r.revoke(ctx, o)
		r.lg.Warn(why+": revoked its leadership grant", "leader", e.Name, "url", e.URL, "err", err)
		r.seen.CompareAndSwap(o, nil)
		r.proxy.leaderChanged() // requests held by the silent leader are answered "retry"
	}
}

// observed is a leader as the election's observation gave it, with its
// leadership grant: read together, so that a probe of one leader never
// revokes another's grant (the two were read apart, and a new leader's
// grant was revoked for the silence of the frozen one before it).
type observed struct {
	leader serverEntry
	grant  int64
}

// probeLeader asks base's /healthz; any HTTP answer is life.
func (r *replica) probeLeader(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+"/healthz", nil)
	if err != nil {
		return nil // not a URL: nothing to judge
	}
	resp, err := r.proxy.probe.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// isTimeout reports whether err is a request that got no answer in time.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// revoke revokes o's grant, trying again for up to 10 s while o is the
// observed leader: while etcd elects a new raft leader (the dead process
// held it too) a request is dropped, and an attempt gets no answer.
func (r *replica) revoke(ctx context.Context, o *observed) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := r.cli.Revoke(tctx, clientv3.LeaseID(o.grant))
		cancel()
		if err == nil || errors.Is(err, rpctypes.ErrLeaseNotFound) || errors.Is(err, rpctypes.ErrGRPCLeaseNotFound) {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) || r.seen.Load() != o {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// listServers reads every campaigning server from the election, oldest
// (the leader) first.
func (r *replica) listServers(ctx context.Context) (api.ServerList, error) {
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := r.cli.Get(tctx, r.prefix+"election/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1000))
	if err != nil {
		return api.ServerList{}, errs.New(errs.Unavailable, "", "read the servers from etcd: %v", err)
	}
	out := api.ServerList{Store: StoreEtcd, Servers: []api.ServerInfo{}}
	for i, kv := range resp.Kvs {
		var e serverEntry
		if json.Unmarshal(kv.Value, &e) != nil {
			continue
		}
		role := api.RoleStandby
		if i == 0 {
			role = api.RoleLeader
			out.Leader = e.Name
		}
		out.Servers = append(out.Servers, api.ServerInfo{Name: e.Name, URL: e.URL, Role: role, Self: e == r.self})
	}
	return out, nil
}
