// Package etcdmember runs an etcd member inside the hetsched process
// (go.etcd.io/etcd/server/v3/embed), for `hetsched server --ha` and for
// tests: three servers started with --ha and the same --peers are a
// three-member etcd cluster and a three-server control plane, with no etcd
// to install or run (as k3s does).
//
// Glossary:
//   - member: one etcd server of the cluster, named by --name, with its
//     own data directory (its raft log and bbolt database).
//   - peer URL: where the other members reach this one (raft traffic).
//   - client URL: where etcd clients reach it; hetsched's own client uses
//     a unix socket in the data directory, so no port is needed for it.
//   - initial cluster: every member's name=peerURL, the same on every
//     member (--peers).
//   - peer TLS: with https:// peer URLs the members speak TLS to each
//     other and each one presents its member certificate (certs.KindMember)
//     and accepts, as a peer, only a certificate the CA signed whose Common
//     Name is a member's of --peers (etcd's --peer-client-cert-auth and
//     --peer-cert-allowed-cn). http:// peer URLs are cleartext and
//     unauthenticated: Start refuses them off loopback unless
//     Config.InsecurePlaintext; client URLs likewise, and an https:// one
//     is served with the same certificate and checks.
package etcdmember

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/netaddr"
)

// Config says which member to run.
type Config struct {
	// Name is this member's name in Peers.
	Name string
	// Dir is the member's data directory (created if missing).
	Dir string
	// Peers is every member's name and peer URL: "s1=http://h1:2380,...";
	// empty means a single member whose peer URL is a unix socket in Dir.
	Peers string
	// ClientURLs are extra client URLs to listen on (for external etcd
	// clients such as etcdctl); the unix socket ClientSocket is always
	// served.
	ClientURLs []string
	// QuotaBytes is the database's size limit (0: DefaultQuota).
	QuotaBytes int64
	// LogLevel is etcd's own log level on stderr ("" means "error").
	LogLevel string
	// StartTimeout bounds the wait for the member to join its cluster
	// (0: two minutes; a member waits for a quorum of its peers).
	StartTimeout time.Duration
	// PeerCert, PeerKey and PeerCA are this member's certificate and key
	// and the CA of every member's (required with https:// URLs, refused
	// with http:// ones).
	PeerCert, PeerKey, PeerCA string
	// InsecurePlaintext allows http:// peer and client URLs off loopback.
	InsecurePlaintext bool
}

// DefaultQuota is the etcd database's size limit for an embedded member:
// etcd's own default is 2 GiB, tight for a million tasks and their
// history before compaction.
const DefaultQuota = 8 << 30

// Member is a running embedded etcd member.
type Member struct {
	etcd   *embed.Etcd
	socket string
}

// ClientSocket is the unix socket a member in dir serves its clients on.
func ClientSocket(dir string) string { return filepath.Join(dir, "client.sock") }

// ParsePeers reads "name=URL,name=URL" and checks each URL.
func ParsePeers(peers string) (map[string]*url.URL, error) {
	out := map[string]*url.URL{}
	for _, p := range strings.Split(peers, ",") {
		name, raw, ok := strings.Cut(strings.TrimSpace(p), "=")
		if !ok || name == "" || raw == "" {
			return nil, errs.Invalid("peers", "each peer is name=URL (as s1=http://10.0.0.1:2380), got %q", p)
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "unix") || u.Host == "" && u.Scheme != "unix" {
			return nil, errs.Invalid("peers", "peer %s: want an http(s) URL with a host and port, got %q", name, raw)
		}
		if _, dup := out[name]; dup {
			return nil, errs.Invalid("peers", "peer %s is named twice", name)
		}
		out[name] = u
	}
	return out, nil
}

// Start runs the member and returns once it has joined its cluster (a
// quorum of Peers is up), or fails after StartTimeout.
func Start(ctx context.Context, c Config) (*Member, error) {
	if c.Dir == "" {
		return nil, errs.Invalid("data-dir", "an embedded etcd member needs a data directory")
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return nil, errs.Wrap(errs.Unavailable, "data-dir", err)
	}
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(c.Dir, "etcd")
	cfg.LogLevel = c.LogLevel
	if cfg.LogLevel == "" {
		cfg.LogLevel = "error"
	}
	cfg.LogOutputs = []string{"stderr"}
	cfg.QuotaBackendBytes = c.QuotaBytes
	if cfg.QuotaBackendBytes == 0 {
		cfg.QuotaBackendBytes = DefaultQuota
	}
	// hetsched compacts what it deleted (etcdstore); the periodic
	// compactor is a safety net for history it does not know of.
	cfg.AutoCompactionMode = embed.CompactorModePeriodic
	cfg.AutoCompactionRetention = "1h"
	cfg.EnableGRPCGateway = false
	// etcd keeps the raft entries since its last snapshot in memory, and
	// hetsched's entries are up to 1 MiB (etcdstore's chunks): snapshot
	// every 2,000 entries, keeping 1,000 for slow followers, rather than
	// etcd's 10,000 and 5,000, so a member holds at most about 3 GiB of
	// them under a burst of large commits.
	cfg.SnapshotCount = 2000
	cfg.SnapshotCatchUpEntries = 1000
	sock := ClientSocket(c.Dir)
	_ = os.Remove(sock) // left by a killed process
	listen := []url.URL{{Scheme: "unix", Path: sock}}
	for _, raw := range c.ClientURLs {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return nil, errs.Invalid("etcd-listen-client", "want a URL such as http://127.0.0.1:2379, got %q", raw)
		}
		listen = append(listen, *u)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = listen, listen
	if err := c.secure(cfg); err != nil {
		return nil, err
	}
	if c.Peers == "" {
		name := c.Name
		if name == "" {
			name = "default"
		}
		peer := url.URL{Scheme: "unix", Path: filepath.Join(c.Dir, "peer.sock")}
		_ = os.Remove(peer.Path)
		cfg.Name = name
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.InitialCluster = name + "=" + peer.String()
	} else {
		peers, err := ParsePeers(c.Peers)
		if err != nil {
			return nil, err
		}
		self, ok := peers[c.Name]
		if !ok {
			return nil, errs.Invalid("name", "%q is not one of --peers (%s)", c.Name, c.Peers)
		}
		cfg.Name = c.Name
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*self}, []url.URL{*self}
		cfg.InitialCluster = c.Peers
	}
	cfg.InitialClusterToken = "hetsched"
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, errs.New(errs.Unavailable, "", "start the embedded etcd member %s: %v", cfg.Name, err)
	}
	wait := c.StartTimeout
	if wait == 0 {
		wait = 2 * time.Minute
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	// A member that never became ready is stopped before it is closed:
	// Close alone waits for client servers that start only once ready
	// (etcd-io/etcd#9533), and hung for ever on a member that could not
	// join.
	abort := func() { e.Server.Stop(); e.Close() }
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		abort()
		return nil, errs.New(errs.Unavailable, "", "embedded etcd member %s failed: %v", cfg.Name, err)
	case <-timer.C:
		abort()
		return nil, errs.New(errs.Unavailable, "", "embedded etcd member %s did not join its cluster within %s: are a majority of --peers (%s) running, and do their certificates and this one's share a CA?", cfg.Name, wait, c.Peers)
	case <-ctx.Done():
		abort()
		return nil, errs.Wrap(errs.Unavailable, "", ctx.Err())
	}
	return &Member{etcd: e, socket: sock}, nil
}

// Endpoint is the client URL hetsched's own etcd client uses.
func (m *Member) Endpoint() string { return "unix://" + m.socket }

// Err reports a failure of the running member (it then stops serving).
func (m *Member) Err() <-chan error { return m.etcd.Err() }

// Close stops the member (it leaves no lock behind; its data stays).
func (m *Member) Close() {
	m.etcd.Close()
}

// ShedRaftLeadership moves etcd's raft leadership from this member to
// another voting member when this one holds it, and says to whom ("":
// it did not hold it). The hetsched leader sheds it: when both ran in one
// process and it paused, every lease's renewals waited for etcd's own
// election too, the standbys' revocation of its lease as well, and
// leaders changed several times in a row. Each other member is tried
// until one takes it or ctx ends.
func (m *Member) ShedRaftLeadership(ctx context.Context) (string, error) {
	s := m.etcd.Server
	self := s.MemberID()
	if s.Leader() != self {
		return "", nil
	}
	var last error
	members := s.Cluster().Members()
	rand.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	for _, mem := range members {
		if mem.ID == self || mem.IsLearner {
			continue
		}
		// A member that is up to date takes over within a few ticks; one
		// paused or cut off never does: the next is tried.
		tctx, cancel := context.WithTimeout(ctx, shedTry)
		last = s.MoveLeader(tctx, uint64(self), uint64(mem.ID))
		cancel()
		if last == nil {
			return mem.Name, nil
		}
		if ctx.Err() != nil || s.Leader() != self {
			break
		}
	}
	return "", last // nil: no other voting member (a cluster of one)
}

// shedTry bounds one member's try to take etcd's raft leadership.
const shedTry = time.Second

// String names the member.
func (m *Member) String() string { return fmt.Sprintf("etcd member %s", m.etcd.Config().Name) }

// secure checks the URLs' schemes against the TLS material and sets the
// peer and client TLS of cfg: https:// URLs need PeerCert, PeerKey and
// PeerCA, and accept only members' certificates; http:// ones are
// refused off loopback unless InsecurePlaintext.
func (c Config) secure(cfg *embed.Config) error {
	var names []string
	var plain [][2]string // field, URL
	tlsURLs, tlsClients := 0, 0
	check := func(field string, u *url.URL) error {
		switch u.Scheme {
		case "https":
			tlsURLs++
			if field != "peers" {
				tlsClients++
			}
		case "http":
			if !netaddr.Loopback(u.Host) {
				plain = append(plain, [2]string{field, u.String()})
			}
		case "unix":
		default:
			return errs.Invalid(field, "want an http(s) URL, got %q", u.String())
		}
		return nil
	}
	if c.Peers != "" {
		peers, err := ParsePeers(c.Peers)
		if err != nil {
			return err
		}
		schemes := map[string]bool{}
		for _, name := range slices.Sorted(maps.Keys(peers)) {
			names = append(names, certs.MemberCN(name))
			schemes[peers[name].Scheme] = true
			if err := check("peers", peers[name]); err != nil {
				return err
			}
		}
		if len(schemes) > 1 {
			return errs.Invalid("peers", "every peer URL is https:// (TLS between members) or every one http://, not a mix: %s", c.Peers)
		}
	} else {
		names = []string{certs.MemberCN(c.Name), certs.MemberCN("default")}
	}
	for i := range cfg.ListenClientUrls {
		if err := check("etcd-listen-client", &cfg.ListenClientUrls[i]); err != nil {
			return err
		}
	}
	have := c.PeerCert != "" || c.PeerKey != "" || c.PeerCA != ""
	switch {
	case tlsURLs > 0 && (c.PeerCert == "" || c.PeerKey == "" || c.PeerCA == ""):
		return errs.Invalid("peer-cert", "https:// peer or client URLs need --peer-cert, --peer-key and --peer-ca: this member's certificate (hetsched certs member), its key and the CA")
	case tlsURLs == 0 && have:
		return errs.Invalid("peer-cert", "the member's URLs are not https://: give https:// --peers for TLS between members, or leave out --peer-cert, --peer-key and --peer-ca")
	case len(plain) > 0 && !c.InsecurePlaintext:
		return errs.Invalid(plain[0][0], "%s is cleartext and unauthenticated off loopback: anyone who reaches it can read every task and write raft messages; use https:// URLs with --peer-cert, --peer-key and --peer-ca (hetsched certs member), or --insecure-plaintext to accept that", plain[0][1])
	}
	if tlsURLs == 0 {
		return nil
	}
	self := c.Name
	if c.Peers == "" && self == "" {
		self = "default"
	}
	if err := certs.CheckMember("peer-cert", "peer-key", "peer-ca", c.PeerCert, c.PeerKey, c.PeerCA, self); err != nil {
		return err
	}
	info := transport.TLSInfo{CertFile: c.PeerCert, KeyFile: c.PeerKey, TrustedCAFile: c.PeerCA, ClientCertAuth: true, AllowedCNs: names}
	if tlsURLs > tlsClients {
		cfg.PeerTLSInfo = info
	}
	if tlsClients > 0 {
		cfg.ClientTLSInfo = info
	}
	return nil
}

// Check checks the configuration's URLs and TLS material as Start
// does, without starting anything.
func (c Config) Check() error {
	cfg := embed.NewConfig()
	for _, raw := range c.ClientURLs {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			return errs.Invalid("etcd-listen-client", "want a URL such as http://127.0.0.1:2379, got %q", raw)
		}
		cfg.ListenClientUrls = append(cfg.ListenClientUrls, *u)
	}
	return c.secure(cfg)
}

// PlaintextWarning is the line to print at start when Config allows
// cleartext URLs off loopback ("" when it does not).
func (c Config) PlaintextWarning() string {
	if !c.InsecurePlaintext || c.Peers == "" {
		return ""
	}
	peers, err := ParsePeers(c.Peers)
	if err != nil {
		return ""
	}
	for _, u := range peers {
		if u.Scheme == "http" && !netaddr.Loopback(u.Host) {
			return "WARNING: --insecure-plaintext: the embedded etcd members speak cleartext without authentication (--peers " + c.Peers + "); anyone who reaches a peer port can read every task and write raft messages"
		}
	}
	return ""
}
