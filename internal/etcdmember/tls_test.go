package etcdmember

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/errs"
)

// newCA makes a CA in a new directory, and member certificates for names
// (for 127.0.0.1).
func newCA(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := certs.Init(dir, certs.CAOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if _, _, err := certs.Issue(dir, certs.IssueOptions{Kind: certs.KindMember, Name: n, DNSNames: []string{"localhost"}}); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func memberFiles(dir, name string) (cert, key, ca string) {
	return filepath.Join(dir, "member-"+name+".pem"), filepath.Join(dir, "member-"+name+"-key.pem"), filepath.Join(dir, certs.CAFile)
}

// The URLs' schemes and the TLS material are checked before the member
// starts: http:// off loopback is refused unless InsecurePlaintext,
// https:// needs a member certificate of this member that the CA
// verifies, and http:// takes none.
func TestSecureRefusesWhatIsUnsafeOrWrong(t *testing.T) {
	ca := newCA(t, "s1", "s2")
	other := newCA(t, "s1")
	if _, _, err := certs.Issue(ca, certs.IssueOptions{Kind: certs.KindAgent, Nodes: []string{"n1"}}); err != nil {
		t.Fatal(err)
	}
	cert, key, caFile := memberFiles(ca, "s1")
	agentCert, agentKey := filepath.Join(ca, "agent-n1.pem"), filepath.Join(ca, "agent-n1-key.pem")
	tlsPeers := "s1=https://127.0.0.1:2380,s2=https://127.0.0.1:2381"
	for _, c := range []struct {
		name  string
		cfg   Config
		field string // "" for none
	}{
		{"cleartext peers off loopback", Config{Name: "s1", Peers: "s1=http://10.0.0.1:2380,s2=http://10.0.0.2:2380"}, "peers"},
		{"cleartext peers, accepted", Config{Name: "s1", Peers: "s1=http://10.0.0.1:2380,s2=http://10.0.0.2:2380", InsecurePlaintext: true}, ""},
		{"cleartext peers on loopback", Config{Name: "s1", Peers: "s1=http://127.0.0.1:2380,s2=http://localhost:2381"}, ""},
		{"a cleartext client URL off loopback", Config{Name: "s1", ClientURLs: []string{"http://10.0.0.1:2379"}}, "etcd-listen-client"},
		{"a mix of schemes", Config{Name: "s1", Peers: "s1=https://127.0.0.1:2380,s2=http://127.0.0.1:2381", PeerCert: cert, PeerKey: key, PeerCA: caFile}, "peers"},
		{"TLS without certificates", Config{Name: "s1", Peers: tlsPeers}, "peer-cert"},
		{"certificates without TLS", Config{Name: "s1", Peers: "s1=http://127.0.0.1:2380", PeerCert: cert, PeerKey: key, PeerCA: caFile}, "peer-cert"},
		{"another member's certificate", Config{Name: "s2", Peers: tlsPeers, PeerCert: cert, PeerKey: key, PeerCA: caFile}, "peer-cert"},
		{"an agent's certificate", Config{Name: "s1", Peers: tlsPeers, PeerCert: agentCert, PeerKey: agentKey, PeerCA: caFile}, "peer-cert"},
		{"another CA", Config{Name: "s1", Peers: tlsPeers, PeerCert: cert, PeerKey: key, PeerCA: filepath.Join(other, certs.CAFile)}, "peer-ca"},
		{"TLS", Config{Name: "s1", Peers: tlsPeers, PeerCert: cert, PeerKey: key, PeerCA: caFile}, ""},
	} {
		cfg := embed.NewConfig()
		for _, raw := range c.cfg.ClientURLs {
			cfg.ListenClientUrls = append(cfg.ListenClientUrls, *mustURL(t, raw))
		}
		err := c.cfg.secure(cfg)
		if c.field == "" && err != nil || c.field != "" && errs.FieldOf(err) != c.field {
			t.Errorf("%s: %v, want an error on %q", c.name, err, c.field)
		}
		if c.name == "TLS" && (!cfg.PeerTLSInfo.ClientCertAuth || strings.Join(cfg.PeerTLSInfo.AllowedCNs, ",") != certs.MemberCN("s1")+","+certs.MemberCN("s2")) {
			t.Errorf("the peers' TLS: %+v", cfg.PeerTLSInfo)
		}
	}
	if w := (Config{Peers: "s1=http://10.0.0.1:2380", InsecurePlaintext: true}).PlaintextWarning(); !strings.Contains(w, "WARNING") {
		t.Errorf("no warning for cleartext peers: %q", w)
	}
}

// Members on https:// peer URLs form their cluster; a member whose
// certificate another CA signed cannot join it; and the peer port answers
// only a member's certificate: neither no certificate nor an agent's
// of the same CA reads /members.
func TestPeersSpeakTLSAndAcceptOnlyMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three etcd members")
	}
	ca := newCA(t, "s1", "s2")
	rogue := newCA(t, "s3")
	// Certificates of the same CA that are no member's: an admin's, and
	// an agent's whose node name is a host name of this machine (etcd
	// checks a client certificate's names against the caller's address).
	for _, o := range []certs.IssueOptions{{Kind: certs.KindAgent, Nodes: []string{"localhost"}}, {Kind: certs.KindClient, Role: certs.RoleAdmin}} {
		if _, _, err := certs.Issue(ca, o); err != nil {
			t.Fatal(err)
		}
	}
	ports, err := childproc.FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	peerURL := func(i int) string { return fmt.Sprintf("https://localhost:%d", ports[i]) }
	peers := fmt.Sprintf("s1=%s,s2=%s,s3=%s", peerURL(0), peerURL(1), peerURL(2))
	start := func(name, dir string, wait time.Duration) (*Member, error) {
		cert, key, caFile := memberFiles(dir, name)
		return Start(context.Background(), Config{Name: name, Dir: t.TempDir(), Peers: peers, PeerCert: cert, PeerKey: key, PeerCA: caFile, StartTimeout: wait})
	}
	type started struct {
		m   *Member
		err error
	}
	ch := make(chan started, 2)
	for _, n := range []string{"s1", "s2"} {
		go func() { m, err := start(n, ca, time.Minute); ch <- started{m, err} }()
	}
	for range 2 {
		s := <-ch
		if s.err != nil {
			t.Fatal(s.err)
		}
		t.Cleanup(s.m.Close)
	}
	// s3's certificate is signed by a CA the others do not trust.
	if m, err := start("s3", rogue, 5*time.Second); err == nil {
		m.Close()
		t.Fatal("a member with another CA's certificate joined")
	}

	get := func(certFile, keyFile string) (int, string, error) {
		tc, err := certs.ClientTLSConfig(filepath.Join(ca, certs.CAFile), certFile, keyFile)
		if err != nil {
			return 0, "", err
		}
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
		resp, err := hc.Get(peerURL(0) + "/members")
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b), nil
	}
	if code, body, err := get("", ""); err == nil {
		t.Errorf("no certificate: %d %q, want a refused handshake", code, body)
	}
	for _, who := range []string{"agent-localhost", "client-admin"} {
		if code, body, err := get(filepath.Join(ca, who+".pem"), filepath.Join(ca, who+"-key.pem")); err == nil && code == http.StatusOK {
			t.Errorf("%s's certificate read the members: %q", who, body)
		}
	}
	// A member's certificate (with client auth) is a peer's.
	cert, key, _ := memberFiles(ca, "s2")
	code, body, err := get(cert, key)
	if err != nil || code != http.StatusOK || !strings.Contains(body, "s2") {
		t.Errorf("a member's certificate: %d %q %v", code, body, err)
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
