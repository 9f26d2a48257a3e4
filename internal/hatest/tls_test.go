package hatest

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/store/etcdstore"
)

// TestExternalEtcdOverTLS: a server with --store etcd uses an external
// etcd that requires TLS client certificates (--etcd-ca, --etcd-cert,
// --etcd-key): it leads and stores what it acknowledges there; without a
// client certificate it never leads.
func TestExternalEtcdOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts an etcd and two servers")
	}
	dir := t.TempDir()
	if err := certs.Init(dir, certs.CAOptions{}); err != nil {
		t.Fatal(err)
	}
	srvCert, srvKey, err := certs.Issue(dir, certs.IssueOptions{Kind: certs.KindServer, Name: "etcd"})
	if err != nil {
		t.Fatal(err)
	}
	cliCert, cliKey, err := certs.Issue(dir, certs.IssueOptions{Kind: certs.KindClient, Role: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.pem")
	port := freePorts(t, 1)[0]
	endpoint := "https://127.0.0.1:" + strconv.Itoa(port)
	e := startTLSEtcd(t, endpoint, ca, srvCert, srvKey)
	defer e.Close()

	data := t.TempDir()
	s, err := childproc.Start(bin(t), time.Minute, "server", "--store", "etcd", "--etcd-endpoints", endpoint,
		"--etcd-ca", ca, "--etcd-cert", cliCert, "--etcd-key", cliKey, "--listen", "127.0.0.1:0", "--data-dir", data, "--memory-limit", "off")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	waitUntil(t, 30*time.Second, "the server to lead", func() bool { return leads(s.URL) })
	body := `{"id":"over-tls","resources":{"cpu":"1"}}`
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/api/v1/tasks", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("submit: %s", resp.Status)
	}
	// The log in etcd holds it (read with a client certificate too).
	tc, err := certs.ClientTLSConfig(ca, cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tc, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Read back through the store's own reader (the log is compressed):
	// a second, read-only copy of the server's store in etcd.
	copyOf, err := etcdstore.Open(ctx, cli, etcdstore.Options{Prefix: "/hetsched/store/"})
	if err != nil {
		t.Fatal(err)
	}
	defer copyOf.Close()
	if _, ok, err := copyOf.Get(ctx, engine.KindTask, "over-tls"); err != nil || !ok {
		t.Fatalf("the acknowledged task is not in the store in etcd: %v %v", ok, err)
	}

	// Without a client certificate etcd refuses the connection: the
	// server starts as a standby and never leads.
	bad, err := childproc.Start(bin(t), time.Minute, "server", "--store", "etcd", "--etcd-endpoints", endpoint,
		"--etcd-ca", ca, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--memory-limit", "off", "--etcd-prefix", "/other/")
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Kill()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if leads(bad.URL) {
			t.Fatal("a server without an etcd client certificate leads")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if code := ready(bad.URL); code == http.StatusOK {
		t.Errorf("the server without an etcd client certificate says it is ready")
	}
}

// leads reports whether base answers /readyz 200 as the leader.
func leads(base string) bool {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(base + "/readyz")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	b := make([]byte, 512)
	n, _ := resp.Body.Read(b)
	return resp.StatusCode == http.StatusOK && !strings.Contains(string(b[:n]), "standby")
}

// startTLSEtcd runs a one-member etcd in this process whose client URL
// requires TLS with a client certificate signed by ca.
func startTLSEtcd(t *testing.T, endpoint, ca, cert, key string) *embed.Etcd {
	t.Helper()
	dir, err := os.MkdirTemp("", "etcdtls")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "data")
	cfg.LogLevel = "error"
	u, _ := url.Parse(endpoint)
	peer := url.URL{Scheme: "unix", Path: filepath.Join(dir, "peer.sock")}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*u}, []url.URL{*u}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: cert, KeyFile: key, TrustedCAFile: ca, ClientCertAuth: true}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(time.Minute):
		e.Close()
		t.Fatal("etcd did not start")
	}
	return e
}

// TestHAPeersOverTLS: three --ha servers on https:// peers, each with its
// member certificate (hetsched certs member), form their cluster, lead,
// store a task, and fail over with it when the leader is killed; a
// fourth server given a certificate of another CA is refused by them (it
// never joins: its start times out).
func TestHAPeersOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts three servers")
	}
	dir := t.TempDir()
	if err := certs.Init(dir, certs.CAOptions{}); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, 3)
	peers := strings.ReplaceAll(strings.ReplaceAll(c.peers, "http://", "https://"), "127.0.0.1", "localhost")
	c.peers = peers
	for _, n := range c.names {
		if _, _, err := certs.Issue(dir, certs.IssueOptions{Kind: certs.KindMember, Name: n, DNSNames: []string{"localhost"}}); err != nil {
			t.Fatal(err)
		}
	}
	c.wrap = func(i int, cmd []string) []string {
		m := filepath.Join(dir, "member-"+c.names[i])
		return append(cmd, "--peer-cert", m+".pem", "--peer-key", m+"-key.pem", "--peer-ca", filepath.Join(dir, certs.CAFile))
	}
	c.startAll()
	l := c.leader(time.Minute)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := submit(ctx, c.client(), "over-tls-peers"); err != nil {
		t.Fatal(err)
	}
	c.kill(l)
	next := c.leader(time.Minute)
	if next == l {
		t.Fatalf("%s still leads after its kill", c.names[l])
	}
	if st, _ := taskState(t, c, "over-tls-peers"); st == "" {
		t.Errorf("the task is gone after the failover")
	}
	// A member whose certificate another CA signed: named in --peers
	// (as s3, the killed leader's slot is not needed: any member's name
	// with the others' CA missing will do), it cannot join.
	rogue := t.TempDir()
	if err := certs.Init(rogue, certs.CAOptions{}); err != nil {
		t.Fatal(err)
	}
	name := c.names[l]
	if _, _, err := certs.Issue(rogue, certs.IssueOptions{Kind: certs.KindMember, Name: name, DNSNames: []string{"localhost"}}); err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimPrefix(c.urls[l], "http://")
	m := filepath.Join(rogue, "member-"+name)
	out, err := exec.CommandContext(ctx, c.bin, "server", "--ha", "--name", name, "--peers", peers, "--data-dir", t.TempDir(),
		"--listen", addr, "--memory-limit", "off", "--peer-cert", m+".pem", "--peer-key", m+"-key.pem",
		"--peer-ca", filepath.Join(rogue, certs.CAFile), "--etcd-start-timeout", "5s").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "did not join its cluster") {
		t.Errorf("a member of another CA: %v\n%s", err, tail(string(out), 2000))
	}
}
