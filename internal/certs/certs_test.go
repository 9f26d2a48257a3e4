package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

func newCA(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pki")
	if err := Init(dir, CAOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func issue(t *testing.T, dir string, opt IssueOptions) (string, string) {
	t.Helper()
	c, k, err := Issue(dir, opt)
	if err != nil {
		t.Fatalf("issue %+v: %v", opt, err)
	}
	return c, k
}

func parse(t *testing.T, p string) *x509.Certificate {
	t.Helper()
	cs, err := readCerts("cert", p)
	if err != nil {
		t.Fatal(err)
	}
	return cs[0]
}

func pool(t *testing.T, dir string) *x509.CertPool {
	t.Helper()
	p, err := loadPool("ca", filepath.Join(dir, CAFile))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestChainsSANsAndUsages: every kind of certificate verifies against the
// CA for its own use only, carries the SANs and roles asked for, has a
// random 128-bit serial and an ECDSA P-256 key; keys are 0600.
func TestChainsSANsAndUsages(t *testing.T) {
	dir := newCA(t)
	ca := parse(t, filepath.Join(dir, CAFile))
	if !ca.IsCA || ca.NotAfter.Sub(ca.NotBefore) < 9*365*24*time.Hour {
		t.Errorf("CA: IsCA %v, valid %s", ca.IsCA, ca.NotAfter.Sub(ca.NotBefore))
	}
	srvCert, srvKey := issue(t, dir, IssueOptions{Kind: KindServer})
	agentCert, agentKey := issue(t, dir, IssueOptions{Kind: KindAgent, Nodes: []string{"node-a", "gpu-*"}})
	adminCert, _ := issue(t, dir, IssueOptions{Kind: KindClient, Role: RoleAdmin})
	tenantCert, _ := issue(t, dir, IssueOptions{Kind: KindClient, Role: RoleTenant, Tenant: "team-a", Validity: 48 * time.Hour})
	for _, want := range []string{"server.pem", "server-key.pem", "agent-node-a.pem", "agent-node-a-key.pem", "client-admin.pem", "client-team-a.pem"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Errorf("%s: %v", want, err)
		}
	}
	if agentKey != filepath.Join(dir, "agent-node-a-key.pem") {
		t.Errorf("agent key path %s", agentKey)
	}
	roots := pool(t, dir)
	verify := func(p string, usage x509.ExtKeyUsage, host string) error {
		_, err := parse(t, p).Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: host})
		return err
	}
	for _, host := range []string{"localhost", "127.0.0.1", "::1"} {
		if err := verify(srvCert, x509.ExtKeyUsageServerAuth, host); err != nil {
			t.Errorf("server cert for %s: %v", host, err)
		}
	}
	if err := verify(srvCert, x509.ExtKeyUsageServerAuth, "example.com"); err == nil {
		t.Error("server cert verified for a host it does not name")
	}
	for _, p := range []string{agentCert, adminCert, tenantCert} {
		if err := verify(p, x509.ExtKeyUsageClientAuth, ""); err != nil {
			t.Errorf("%s as client: %v", p, err)
		}
		if err := verify(p, x509.ExtKeyUsageServerAuth, ""); err == nil {
			t.Errorf("%s verified as a server certificate", p)
		}
	}
	if err := verify(srvCert, x509.ExtKeyUsageClientAuth, ""); err == nil {
		t.Error("the server certificate verified as a client certificate")
	}
	custom := issueServer(t, dir, "api.example.com", "192.0.2.7")
	if c := parse(t, custom); !slices.Equal(c.DNSNames, []string{"api.example.com"}) || len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(net.ParseIP("192.0.2.7")) {
		t.Errorf("custom SANs %v %v", c.DNSNames, c.IPAddresses)
	}
	a := parse(t, agentCert)
	if a.Subject.CommonName != "node-a" || !slices.Equal(a.Subject.Organization, []string{"hetsched:agent"}) || !slices.Equal(a.DNSNames, []string{"node-a", "gpu-*"}) {
		t.Errorf("agent cert subject %v SANs %v", a.Subject, a.DNSNames)
	}
	tc := parse(t, tenantCert)
	if got := tc.NotAfter.Sub(tc.NotBefore); got != 48*time.Hour {
		t.Errorf("tenant cert validity %s", got)
	}
	serials := map[string]bool{}
	for _, p := range []string{srvCert, agentCert, adminCert, tenantCert, custom} {
		c := parse(t, p)
		if c.SerialNumber.BitLen() < 64 || serials[c.SerialNumber.String()] {
			t.Errorf("%s: serial %v (short or repeated)", p, c.SerialNumber)
		}
		serials[c.SerialNumber.String()] = true
		pub, ok := c.PublicKey.(*ecdsa.PublicKey)
		if !ok || pub.Curve != elliptic.P256() {
			t.Errorf("%s: key %T", p, c.PublicKey)
		}
		if c.NotAfter.After(ca.NotAfter) {
			t.Errorf("%s outlives the CA", p)
		}
	}
	for _, k := range []string{srvKey, agentKey, filepath.Join(dir, CAKeyFile)} {
		fi, err := os.Stat(k)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v %v", k, fi.Mode(), err)
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", fi.Mode())
	}
}

func issueServer(t *testing.T, dir, dns, ip string) string {
	c, _ := issue(t, dir, IssueOptions{Kind: KindServer, Name: "api", DNSNames: []string{dns}, IPs: []net.IP{net.ParseIP(ip)}})
	return c
}

// TestNeverOverwrites: init and issue refuse to replace existing files
// (and leave them as they were) unless Force.
func TestNeverOverwrites(t *testing.T) {
	dir := newCA(t)
	before, _ := os.ReadFile(filepath.Join(dir, CAKeyFile))
	err := Init(dir, CAOptions{})
	if errs.CodeOf(err) != errs.AlreadyExists || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("second init: %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, CAKeyFile)); !bytes.Equal(before, after) {
		t.Fatal("the CA key changed")
	}
	c, k := issue(t, dir, IssueOptions{Kind: KindServer})
	cb, _ := os.ReadFile(c)
	if _, _, err := Issue(dir, IssueOptions{Kind: KindServer}); errs.CodeOf(err) != errs.AlreadyExists {
		t.Fatalf("second issue: %v", err)
	}
	// A key left alone (say, its certificate was deleted) is not replaced either.
	os.Remove(c)
	kb, _ := os.ReadFile(k)
	if _, _, err := Issue(dir, IssueOptions{Kind: KindServer}); errs.CodeOf(err) != errs.AlreadyExists || !strings.Contains(err.Error(), k) {
		t.Fatalf("issue over a key: %v", err)
	}
	if after, _ := os.ReadFile(k); !bytes.Equal(kb, after) {
		t.Fatal("the key changed")
	}
	if _, _, err := Issue(dir, IssueOptions{Kind: KindServer, Force: true}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(c); bytes.Equal(cb, after) {
		t.Fatal("force did not replace the certificate")
	}
	if fi, _ := os.Stat(k); fi.Mode().Perm() != 0o600 {
		t.Errorf("forced key mode %v", fi.Mode())
	}
	if err := Init(dir, CAOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, CAKeyFile)); bytes.Equal(before, after) {
		t.Fatal("force did not replace the CA")
	}
}

// TestIssueRefusesBadOptions: every refusal names its flag.
func TestIssueRefusesBadOptions(t *testing.T) {
	dir := newCA(t)
	for _, c := range []struct {
		opt   IssueOptions
		field string
	}{
		{IssueOptions{Kind: "robot"}, "kind"},
		{IssueOptions{Kind: KindAgent}, "nodes"},
		{IssueOptions{Kind: KindAgent, Nodes: []string{"gpu-["}}, "nodes"},
		{IssueOptions{Kind: KindAgent, Nodes: []string{"a b"}}, "nodes"},
		{IssueOptions{Kind: KindAgent, Nodes: []string{"gpu-*"}}, "name"},
		{IssueOptions{Kind: KindClient}, "role"},
		{IssueOptions{Kind: KindClient, Role: RoleAgent}, "role"},
		{IssueOptions{Kind: KindClient, Role: RoleTenant}, "tenant"},
		{IssueOptions{Kind: KindClient, Role: RoleAdmin, Tenant: "x"}, "tenant"},
		{IssueOptions{Kind: KindServer, DNSNames: []string{"a/b"}}, "dns"},
		{IssueOptions{Kind: KindServer, Validity: -time.Hour}, "validity"},
		{IssueOptions{Kind: KindServer, Validity: 20 * 365 * 24 * time.Hour}, "validity"},
		{IssueOptions{Kind: KindMember}, "name"},
		{IssueOptions{Kind: KindMember, Name: "s1", Nodes: []string{"n"}}, "kind"},
		{IssueOptions{Kind: KindMember, Name: "s 1"}, "name"},
	} {
		if _, _, err := Issue(dir, c.opt); errs.FieldOf(err) != c.field {
			t.Errorf("%+v: %v, want field %s", c.opt, err, c.field)
		}
	}
	if _, _, err := Issue(t.TempDir(), IssueOptions{Kind: KindServer}); err == nil || !strings.Contains(err.Error(), "certs init") {
		t.Errorf("no CA: %v", err)
	}
}

// TestIdentity maps client certificates to roles, tenants and nodes, and
// refuses certificates that say no role or a wrong one.
func TestIdentity(t *testing.T) {
	dir := newCA(t)
	agentCert, _ := issue(t, dir, IssueOptions{Kind: KindAgent, Name: "rack1", Nodes: []string{"gpu-*", "cpu-1"}})
	role, tenant, nodes, err := Identity(parse(t, agentCert))
	if err != nil || role != RoleAgent || tenant != "" || !slices.Equal(nodes, []string{"gpu-*", "cpu-1"}) {
		t.Errorf("agent: %s %s %v %v", role, tenant, nodes, err)
	}
	admin, _ := issue(t, dir, IssueOptions{Kind: KindClient, Role: RoleAdmin})
	if role, tenant, nodes, err := Identity(parse(t, admin)); err != nil || role != RoleAdmin || tenant != "" || nodes != nil {
		t.Errorf("admin: %s %s %v %v", role, tenant, nodes, err)
	}
	prom, _ := issue(t, dir, IssueOptions{Kind: KindClient, Role: RoleMetrics})
	if role, _, _, err := Identity(parse(t, prom)); err != nil || role != RoleMetrics || !strings.HasSuffix(prom, "client-metrics.pem") {
		t.Errorf("metrics: %s %v %s", role, err, prom)
	}
	ten, _ := issue(t, dir, IssueOptions{Kind: KindClient, Role: RoleTenant, Tenant: "team-a"})
	if role, tenant, _, err := Identity(parse(t, ten)); err != nil || role != RoleTenant || tenant != "team-a" {
		t.Errorf("tenant: %s %s %v", role, tenant, err)
	}
	srv, _ := issue(t, dir, IssueOptions{Kind: KindServer})
	if _, _, _, err := Identity(parse(t, srv)); errs.CodeOf(err) != errs.Unauthenticated || !strings.Contains(err.Error(), "not for client authentication") {
		t.Errorf("server cert as identity: %v", err)
	}
	for _, c := range []struct {
		subject pkix.Name
		dns     []string
		want    string
	}{
		{pkix.Name{CommonName: "x", Organization: []string{"acme"}}, nil, "names no hetsched role"},
		{pkix.Name{CommonName: "x", Organization: []string{"hetsched:root"}}, nil, "unknown role"},
		{pkix.Name{CommonName: "x", Organization: []string{"hetsched:agent", "hetsched:admin"}}, nil, "two roles"},
		{pkix.Name{CommonName: "x", Organization: []string{"hetsched:agent"}}, nil, "names no nodes"},
		{pkix.Name{CommonName: "x", Organization: []string{"hetsched:agent"}}, []string{"gpu-["}, "not a valid pattern"},
		{pkix.Name{CommonName: "-bad-", Organization: []string{"hetsched:tenant"}}, nil, "common name must be the tenant"},
	} {
		cert := signRaw(t, dir, c.subject, c.dns)
		if _, _, _, err := Identity(cert); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want %q", c.subject, c.dns, err, c.want)
		}
	}
}

// signRaw signs a client certificate with any subject and DNS SANs.
func signRaw(t *testing.T, dir string, subject pkix.Name, dns []string) *x509.Certificate {
	t.Helper()
	ca, caKey, err := loadCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: subject, DNSNames: dns,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConfigsRefuseBadFiles: each way a file can be wrong is refused
// before serving, naming the flag and the reason.
func TestConfigsRefuseBadFiles(t *testing.T) {
	dir := newCA(t)
	srvCert, srvKey := issue(t, dir, IssueOptions{Kind: KindServer})
	agentCert, agentKey := issue(t, dir, IssueOptions{Kind: KindAgent, Nodes: []string{"node-a"}})
	old, oldKey := issue(t, dir, IssueOptions{Kind: KindServer, Name: "old", NotBefore: time.Now().Add(-72 * time.Hour), Validity: 24 * time.Hour})
	future, futureKey := issue(t, dir, IssueOptions{Kind: KindServer, Name: "future", NotBefore: time.Now().Add(24 * time.Hour), Validity: 24 * time.Hour})
	oldAgent, oldAgentKey := issue(t, dir, IssueOptions{Kind: KindAgent, Nodes: []string{"node-b"}, NotBefore: time.Now().Add(-72 * time.Hour), Validity: 24 * time.Hour})
	notPEM := filepath.Join(t.TempDir(), "x.pem")
	os.WriteFile(notPEM, []byte("hello\n"), 0o600)
	missing := filepath.Join(t.TempDir(), "nosuch.pem")
	ca := filepath.Join(dir, CAFile)
	for _, c := range []struct {
		name             string
		cert, key, other string
		client           bool
		field, want      string
	}{
		{"missing cert", missing, srvKey, "", false, "tls-cert", "no such file"},
		{"missing key", srvCert, missing, "", false, "tls-key", "no such file"},
		{"not PEM", notPEM, srvKey, "", false, "tls-cert", "not a PEM certificate"},
		{"key as cert", srvKey, srvKey, "", false, "tls-cert", "holds a private key"},
		{"cert as key", srvCert, srvCert, "", false, "tls-key", "holds a certificate"},
		{"key of another", srvCert, agentKey, "", false, "tls-key", "is not the key of the certificate"},
		{"expired", old, oldKey, "", false, "tls-cert", "expired on"},
		{"not yet valid", future, futureKey, "", false, "tls-cert", "not valid yet"},
		{"agent cert serving", agentCert, agentKey, "", false, "tls-cert", "not a server certificate"},
		{"leaf as client CA", srvCert, srvKey, agentCert, false, "client-ca", "not a CA certificate"},
		{"missing client CA", srvCert, srvKey, missing, false, "client-ca", "no such file"},
		{"missing CA", "", "", missing, true, "ca", "no such file"},
		{"leaf as CA", "", "", srvCert, true, "ca", "not a CA certificate"},
		{"cert without key", agentCert, "", ca, true, "key", "required"},
		{"expired client", oldAgent, oldAgentKey, ca, true, "cert", "expired on"},
		{"server cert as client", srvCert, srvKey, ca, true, "cert", "not a client certificate"},
	} {
		var err error
		if c.client {
			_, err = ClientTLSConfig(c.other, c.cert, c.key)
		} else {
			_, err = ServerTLSConfig(c.cert, c.key, c.other)
		}
		if errs.FieldOf(err) != c.field || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want field %s and %q", c.name, err, c.field, c.want)
		}
	}
	if _, err := ServerTLSConfig(srvCert, srvKey, ca); err != nil {
		t.Errorf("good server files: %v", err)
	}
	if _, err := ClientTLSConfig(ca, agentCert, agentKey); err != nil {
		t.Errorf("good client files: %v", err)
	}
}

// handshake runs one TLS connection between the two configs on
// 127.0.0.1 and returns the server's view and each side's error.
func handshake(t *testing.T, srv, cli *tls.Config, host string) (st tls.ConnectionState, serverErr, clientErr error) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type result struct {
		err error
		st  tls.ConnectionState
	}
	done := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		err = tc.Handshake()
		if err == nil {
			_, err = c.Write([]byte("ok"))
		}
		done <- result{err, tc.ConnectionState()}
	}()
	cfg := cli.Clone()
	cfg.ServerName = host
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ln.Addr().String(), cfg)
	if err == nil {
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		buf := make([]byte, 2)
		_, err = conn.Read(buf) // TLS 1.3: the server's verdict on our certificate arrives here
		conn.Close()
	}
	r := <-done
	return r.st, r.err, err
}

// TestHandshakes: a real TLS handshake with a client certificate, and the
// ways it fails: an expired client certificate, one of a foreign CA, a
// server certificate the client's CA did not sign, a host it is not for.
// Each failure's Hint names the cause and the flag.
func TestHandshakes(t *testing.T) {
	dir := newCA(t)
	foreign := newCA(t)
	ca := filepath.Join(dir, CAFile)
	srvCert, srvKey := issue(t, dir, IssueOptions{Kind: KindServer})
	srv, err := ServerTLSConfig(srvCert, srvKey, ca)
	if err != nil {
		t.Fatal(err)
	}
	agentCert, agentKey := issue(t, dir, IssueOptions{Kind: KindAgent, Nodes: []string{"node-a"}})
	cli, err := ClientTLSConfig(ca, agentCert, agentKey)
	if err != nil {
		t.Fatal(err)
	}
	cli.NextProtos = []string{"h2", "http/1.1"}
	st, serr, cerr := handshake(t, srv, cli, "127.0.0.1")
	if serr != nil || cerr != nil {
		t.Fatalf("good handshake: server %v, client %v", serr, cerr)
	}
	if st.NegotiatedProtocol != "h2" || len(st.VerifiedChains) != 1 || st.VerifiedChains[0][0].Subject.CommonName != "node-a" {
		t.Fatalf("state: proto %q, chains %d", st.NegotiatedProtocol, len(st.VerifiedChains))
	}
	// No client certificate at all is allowed (token clients).
	tokenCli, _ := ClientTLSConfig(ca, "", "")
	if st, serr, cerr := handshake(t, srv, tokenCli, "localhost"); serr != nil || cerr != nil || len(st.VerifiedChains) != 0 {
		t.Fatalf("no client cert: server %v, client %v", serr, cerr)
	}

	oldCert, oldKey := issue(t, dir, IssueOptions{Kind: KindAgent, Nodes: []string{"node-b"}, NotBefore: time.Now().Add(-72 * time.Hour), Validity: 24 * time.Hour})
	fCert, fKey := issue(t, foreign, IssueOptions{Kind: KindAgent, Nodes: []string{"node-a"}})
	for _, c := range []struct {
		name, cert, key  string
		serverSays, hint string
		clientSays       string
	}{
		{"expired", oldCert, oldKey, "certificate has expired", "it has expired", "tls: expired certificate"},
		{"foreign CA", fCert, fKey, "certificate signed by unknown authority", "not signed by the CA the server trusts", "tls: unknown certificate authority"},
	} {
		kp, err := tls.LoadX509KeyPair(c.cert, c.key) // past ClientTLSConfig's own checks
		if err != nil {
			t.Fatal(err)
		}
		// GetClientCertificate, as ClientTLSConfig does: Certificates would
		// not offer a certificate whose issuer the server does not list.
		raw := &tls.Config{RootCAs: cli.RootCAs, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }}
		_, serr, cerr := handshake(t, srv, raw, "127.0.0.1")
		if serr == nil || !strings.Contains(serr.Error(), c.serverSays) {
			t.Errorf("%s: server error %v, want %q", c.name, serr, c.serverSays)
		}
		if cerr == nil || !strings.Contains(cerr.Error(), c.clientSays) || !strings.Contains(Hint(cerr), c.hint) || !strings.Contains(Hint(cerr), "--cert") {
			t.Errorf("%s: client error %v, hint %q", c.name, cerr, Hint(cerr))
		}
	}
	// The client verifies the server: a foreign CA, a host not in the SANs.
	fcli, _ := ClientTLSConfig(filepath.Join(foreign, CAFile), "", "")
	if _, _, cerr := handshake(t, srv, fcli, "127.0.0.1"); !errors.As(cerr, new(x509.UnknownAuthorityError)) || !strings.Contains(Hint(cerr), "--ca") {
		t.Errorf("foreign server: %v, hint %q", cerr, Hint(cerr))
	}
	if _, _, cerr := handshake(t, srv, tokenCli, "api.example.com"); !errors.As(cerr, new(x509.HostnameError)) || !strings.Contains(Hint(cerr), "api.example.com") {
		t.Errorf("wrong host: %v, hint %q", cerr, Hint(cerr))
	}
}

// TestServerCertificateReload: a server certificate replaced on disk is
// served from the next handshake; a broken replacement keeps the last
// good one.
func TestServerCertificateReload(t *testing.T) {
	dir := newCA(t)
	c, k := issue(t, dir, IssueOptions{Kind: KindServer})
	cfg, err := ServerTLSConfig(c, k, "")
	if err != nil {
		t.Fatal(err)
	}
	serial := func() *big.Int {
		kp, err := cfg.GetCertificate(&tls.ClientHelloInfo{})
		if err != nil || kp == nil {
			t.Fatalf("GetCertificate: %v", err)
		}
		return kp.Leaf.SerialNumber
	}
	first := serial()
	if _, _, err := Issue(dir, IssueOptions{Kind: KindServer, Force: true}); err != nil {
		t.Fatal(err)
	}
	second := serial()
	if second.Cmp(first) == 0 || second.Cmp(parse(t, c).SerialNumber) != 0 {
		t.Fatalf("after reissue: serving %v, first %v, on disk %v", second, first, parse(t, c).SerialNumber)
	}
	if err := writeFile(c, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("junk")}), 0o644, true); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got.Cmp(second) != 0 {
		t.Fatalf("after a broken reissue: serving %v, want the last good %v", got, second)
	}
}

// TestExplainReadsTheAlert: a request that saw only a broken pipe (a TLS
// 1.3 server's alert lost behind the request) is explained by reading the
// alert on a fresh connection; a server that accepts the certificate, or
// a client without one, gets no hint.
func TestExplainReadsTheAlert(t *testing.T) {
	dir := newCA(t)
	ca := filepath.Join(dir, CAFile)
	srvCert, srvKey := issue(t, dir, IssueOptions{Kind: KindServer})
	srv, err := ServerTLSConfig(srvCert, srvKey, ca)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", srv)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if c.(*tls.Conn).Handshake() == nil {
					c.Write([]byte("settings"))
				}
			}()
		}
	}()
	oldCert, oldKey := issue(t, dir, IssueOptions{Kind: KindClient, Role: RoleAdmin, Name: "old", NotBefore: time.Now().Add(-72 * time.Hour), Validity: 24 * time.Hour})
	kp, err := tls.LoadX509KeyPair(oldCert, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := pool(t, dir)
	expired := &tls.Config{RootCAs: roots, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }}
	broken := &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}
	addr := "https://" + ln.Addr().String()
	if h := Explain(broken, addr, expired); !strings.Contains(h, "it has expired") || !strings.Contains(h, "(remote error: tls: expired certificate)") {
		t.Errorf("expired, broken pipe: hint %q", h)
	}
	goodCert, goodKey := issue(t, dir, IssueOptions{Kind: KindClient, Role: RoleAdmin})
	good, err := ClientTLSConfig(ca, goodCert, goodKey)
	if err != nil {
		t.Fatal(err)
	}
	if h := Explain(broken, addr, good); h != "" {
		t.Errorf("accepted certificate: hint %q", h)
	}
	if h := Explain(broken, addr, &tls.Config{RootCAs: roots}); h != "" {
		t.Errorf("no client certificate: hint %q", h)
	}
}

// A member certificate is for server and client auth, names the member
// by MemberCN (which no other leaf can carry), has the SANs asked for,
// passes CheckMember for its own name only, and is no API identity.
func TestMemberCertificate(t *testing.T) {
	dir := newCA(t)
	cert, key := issue(t, dir, IssueOptions{Kind: KindMember, Name: "s1", DNSNames: []string{"h1"}, IPs: []net.IP{net.ParseIP("10.0.0.1")}})
	if filepath.Base(cert) != "member-s1.pem" {
		t.Errorf("file %s", cert)
	}
	c := parse(t, cert)
	if c.Subject.CommonName != MemberCN("s1") || !hasUsage(c, x509.ExtKeyUsageServerAuth) || !hasUsage(c, x509.ExtKeyUsageClientAuth) ||
		!slices.Equal(c.DNSNames, []string{"h1"}) || len(c.IPAddresses) != 1 {
		t.Errorf("member certificate: CN %q, usages %v, SANs %v %v", c.Subject.CommonName, c.ExtKeyUsage, c.DNSNames, c.IPAddresses)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: pool(t, dir), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("verify: %v", err)
	}
	ca := filepath.Join(dir, CAFile)
	if err := CheckMember("peer-cert", "peer-key", "peer-ca", cert, key, ca, "s1"); err != nil {
		t.Errorf("CheckMember s1: %v", err)
	}
	if err := CheckMember("peer-cert", "peer-key", "peer-ca", cert, key, ca, "s2"); errs.FieldOf(err) != "peer-cert" {
		t.Errorf("CheckMember as s2: %v", err)
	}
	srv, srvKey := issue(t, dir, IssueOptions{Kind: KindServer})
	if err := CheckMember("peer-cert", "peer-key", "peer-ca", srv, srvKey, ca, "server"); errs.FieldOf(err) != "peer-cert" {
		t.Errorf("CheckMember of a server certificate: %v", err)
	}
	if err := CheckMember("peer-cert", "peer-key", "peer-ca", cert, srvKey, ca, "s1"); errs.FieldOf(err) != "peer-key" {
		t.Errorf("CheckMember with another key: %v", err)
	}
	if err := CheckMember("peer-cert", "peer-key", "peer-ca", cert, key, filepath.Join(newCA(t), CAFile), "s1"); errs.FieldOf(err) != "peer-ca" {
		t.Errorf("CheckMember with another CA: %v", err)
	}
	if role, _, _, err := Identity(c); err == nil {
		t.Errorf("a member certificate is the API identity %q", role)
	}
}
