package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/errs"
)

// pki is a CA directory with a server certificate, two agents' and two
// clients' certificates.
type pki struct{ dir string }

func newPKI(t *testing.T) pki {
	t.Helper()
	p := pki{filepath.Join(t.TempDir(), "pki")}
	if err := certs.Init(p.dir, certs.CAOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, o := range []certs.IssueOptions{
		{Kind: certs.KindServer},
		{Kind: certs.KindAgent, Nodes: []string{"node-a"}},
		{Kind: certs.KindAgent, Name: "gpus", Nodes: []string{"gpu-*"}},
		{Kind: certs.KindClient, Role: certs.RoleAdmin},
		{Kind: certs.KindClient, Role: certs.RoleTenant, Tenant: "team-a"},
		{Kind: certs.KindClient, Role: certs.RoleMetrics, Name: "prometheus"},
	} {
		if _, _, err := certs.Issue(p.dir, o); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func (p pki) file(name string) string { return filepath.Join(p.dir, name) }

// client is an HTTPS client trusting the CA, presenting the named
// certificate ("" for none).
func (p pki) client(t *testing.T, cert string) *http.Client {
	t.Helper()
	var tc *tls.Config
	var err error
	if cert == "" {
		tc, err = certs.ClientTLSConfig(p.file("ca.pem"), "", "")
	} else {
		tc, err = certs.ClientTLSConfig(p.file("ca.pem"), p.file(cert+".pem"), p.file(cert+"-key.pem"))
	}
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc, ForceAttemptHTTP2: true}}
}

func (p pki) serverOptions(dir string) Options {
	return Options{DataDir: filepath.Join(dir, "data"), TLSCert: p.file("server.pem"), TLSKey: p.file("server-key.pem"), ClientCA: p.file("ca.pem")}
}

func do(t *testing.T, c *http.Client, token, method, url, body string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

func register(node string) string {
	return `{"agent":"` + node + `","nodes":[{"name":"` + node + `","capacity":{"cpu":"1","memory":"1Gi"}}]}`
}

// TestTLSCertificatesAreIdentities: over HTTPS (HTTP/2 by ALPN), client
// certificates are principals: an agent certificate registers only the
// nodes it names (403 naming the other), an admin's sees everything, a
// tenant's acts as its tenant, a token still works without a
// certificate, and a certificate wins over a token sent with it.
func TestTLSCertificatesAreIdentities(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(tokens, []byte("tokens:\n  - {token: "+aTok+", role: tenant, tenant: team-a}\n  - {token: "+adminTok+", role: admin}\n"), 0o600)
	opt := p.serverOptions(dir)
	opt.TokensFile = tokens
	s := startWith(t, opt)
	defer s.stop(t)
	base := strings.Replace(s.base, "http://", "https://", 1)

	agentA := p.client(t, "agent-node-a")
	resp, body := do(t, agentA, "", "POST", base+"/api/v1/agents/register", register("node-a"))
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("node-a by its certificate: %d %s %v", resp.StatusCode, resp.Proto, body)
	}
	resp, body = do(t, agentA, "", "POST", base+"/api/v1/agents/register", register("node-b"))
	if resp.StatusCode != 403 || errCode(body) != string(errs.PermissionDenied) || !strings.Contains(errMsg(body), `"node-b"`) || errField(body) != "nodes[0].name" {
		t.Fatalf("node-b by node-a's certificate: %d %v", resp.StatusCode, body)
	}
	// The agent handlers hold certificate agents to their nodes as they
	// do bound tokens.
	if resp, body = do(t, agentA, "", "POST", base+"/api/v1/agents/node-a/heartbeat", `{"nodes":[{"node":"node-b","cpu":0.1}]}`); resp.StatusCode != 403 || !strings.Contains(errMsg(body), `"node-b"`) {
		t.Fatalf("heartbeat for node-b by node-a's certificate: %d %v", resp.StatusCode, body)
	}
	if resp, body = do(t, agentA, "", "POST", base+"/api/v1/agents/node-a/heartbeat", `{"nodes":[{"node":"node-a","cpu":0.1}]}`); resp.StatusCode != 200 {
		t.Fatalf("heartbeat for node-a: %d %v", resp.StatusCode, body)
	}
	// A token sent along does not widen what the certificate allows.
	if resp, body = do(t, agentA, adminTok, "POST", base+"/api/v1/agents/register", register("node-b")); resp.StatusCode != 403 {
		t.Fatalf("node-b by node-a's certificate and an admin token: %d %v", resp.StatusCode, body)
	}
	// Agents by pattern; agents may not submit.
	gpus := p.client(t, "agent-gpus")
	if resp, body = do(t, gpus, "", "POST", base+"/api/v1/agents/register", register("gpu-7")); resp.StatusCode != 200 {
		t.Fatalf("gpu-7 by gpu-*: %d %v", resp.StatusCode, body)
	}
	if resp, body = do(t, gpus, "", "POST", base+"/api/v1/agents/register", register("cpu-1")); resp.StatusCode != 403 {
		t.Fatalf("cpu-1 by gpu-*: %d %v", resp.StatusCode, body)
	}
	if resp, _ = do(t, gpus, "", "POST", base+"/api/v1/tasks", `{"id":"x","resources":{"cpu":"1"}}`); resp.StatusCode != 403 {
		t.Fatalf("an agent submitting: %d", resp.StatusCode)
	}
	// A tenant by certificate and the same tenant by token see the same tasks.
	tenant := p.client(t, "client-team-a")
	if resp, body = do(t, tenant, "", "POST", base+"/api/v1/tasks", `{"id":"a1","resources":{"cpu":"1"}}`); resp.StatusCode != 201 {
		t.Fatalf("tenant submit: %d %v", resp.StatusCode, body)
	}
	anon := p.client(t, "")
	if resp, body = do(t, anon, aTok, "GET", base+"/api/v1/tasks/a1", ""); resp.StatusCode != 200 {
		t.Fatalf("team-a token reading a1: %d %v", resp.StatusCode, body)
	}
	resp, body = do(t, p.client(t, "client-admin"), "", "GET", base+"/api/v1/nodes", "")
	agents := map[string]bool{}
	nodes, _ := body["nodes"].([]any)
	for _, n := range nodes {
		if m, _ := n.(map[string]any); m["agent"] != nil {
			agents[m["name"].(string)] = true
		}
	}
	if resp.StatusCode != 200 || len(agents) != 2 || !agents["node-a"] || !agents["gpu-7"] {
		t.Fatalf("admin lists nodes: %d, agents' nodes %v, want node-a and gpu-7 only", resp.StatusCode, agents)
	}
	// A metrics certificate reads /metrics and nothing else.
	prom := p.client(t, "client-prometheus")
	if resp, _ = do(t, prom, "", "GET", base+"/metrics", ""); resp.StatusCode != 200 {
		t.Fatalf("metrics certificate on /metrics: %d", resp.StatusCode)
	}
	if resp, _ = do(t, prom, "", "GET", base+"/api/v1/tasks", ""); resp.StatusCode != 403 {
		t.Fatalf("metrics certificate listing tasks: %d", resp.StatusCode)
	}
	if resp, body = do(t, anon, "", "GET", base+"/api/v1/tasks", ""); resp.StatusCode != 401 || !strings.Contains(errMsg(body), "client certificate") {
		t.Fatalf("neither certificate nor token: %d %v", resp.StatusCode, body)
	}
}

// TestTLSOnlyPort: the TLS port speaks nothing else: plaintext HTTP/1.1
// gets a 400 that says so, h2c prior knowledge fails; with --client-ca
// alone (no tokens) certificates are the whole of authentication.
func TestTLSOnlyPort(t *testing.T) {
	p := newPKI(t)
	s := startWith(t, p.serverOptions(t.TempDir()))
	defer s.stop(t)
	base := strings.Replace(s.base, "http://", "https://", 1)
	resp, err := client.Get(s.base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "HTTP request to an HTTPS server") {
		t.Fatalf("plain HTTP to the TLS port: %d %q", resp.StatusCode, b)
	}
	h2cTransport := &http.Transport{Protocols: new(http.Protocols)}
	h2cTransport.Protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Timeout: 5 * time.Second, Transport: h2cTransport}
	if resp, err := h2c.Get(s.base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatalf("h2c to the TLS port answered %d", resp.StatusCode)
	}
	if resp, _ := do(t, p.client(t, "client-admin"), "", "GET", base+"/api/v1/cluster", ""); resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Fatalf("admin certificate, no tokens configured: %d %s", resp.StatusCode, resp.Proto)
	}
	if resp, body := do(t, p.client(t, ""), "some-token-0123456789", "GET", base+"/api/v1/cluster", ""); resp.StatusCode != 401 {
		t.Fatalf("a token on a certificate-only server: %d %v", resp.StatusCode, body)
	}
	// HTTP/1.1 over TLS works too.
	h1 := p.client(t, "client-admin")
	h1.Transport.(*http.Transport).ForceAttemptHTTP2 = false
	h1.Transport.(*http.Transport).TLSClientConfig.NextProtos = []string{"http/1.1"}
	if resp, _ := do(t, h1, "", "GET", base+"/api/v1/cluster", ""); resp.StatusCode != 200 || resp.ProtoMajor != 1 {
		t.Fatalf("HTTP/1.1 over TLS: %d %s", resp.StatusCode, resp.Proto)
	}
}

// TestCheckTransport: the rules of who may listen where, with and
// without TLS.
func TestCheckTransport(t *testing.T) {
	const tok, crt, key, ca = "tokens.yaml", "server.pem", "server-key.pem", "ca.pem"
	for _, c := range []struct {
		name  string
		opt   Options
		field string // "" accepted
		warn  bool
	}{
		{"loopback, nothing", Options{Listen: "127.0.0.1:7070"}, "", false},
		{"loopback, tokens, plaintext", Options{Listen: "localhost:7070", TokensFile: tok}, "", false},
		{"loopback v6, tokens, plaintext", Options{Listen: "[::1]:7070", TokensFile: tok}, "", false},
		{"all interfaces, no auth", Options{Listen: "0.0.0.0:7070"}, "listen", false},
		{"all interfaces, TLS, no auth", Options{Listen: "0.0.0.0:7070", TLSCert: crt, TLSKey: key}, "listen", false},
		{"tokens off loopback, plaintext", Options{Listen: "0.0.0.0:7070", TokensFile: tok}, "listen", false},
		{"empty host, tokens, plaintext", Options{Listen: ":7070", TokensFile: tok}, "listen", false},
		{"tokens off loopback, asked for plaintext", Options{Listen: "192.0.2.1:7070", TokensFile: tok, InsecurePlaintext: true}, "", true},
		{"tokens off loopback, TLS", Options{Listen: "0.0.0.0:7070", TokensFile: tok, TLSCert: crt, TLSKey: key}, "", false},
		{"certificates only off loopback", Options{Listen: "0.0.0.0:7070", TLSCert: crt, TLSKey: key, ClientCA: ca}, "", false},
		{"client CA without TLS", Options{Listen: "127.0.0.1:7070", ClientCA: ca}, "client-ca", false},
		{"cert without key", Options{Listen: "127.0.0.1:7070", TLSCert: crt}, "tls-key", false},
		{"key without cert", Options{Listen: "127.0.0.1:7070", TLSKey: key}, "tls-cert", false},
		{"plaintext and TLS", Options{Listen: "0.0.0.0:7070", TokensFile: tok, TLSCert: crt, TLSKey: key, InsecurePlaintext: true}, "insecure-plaintext", false},
	} {
		warn, err := checkTransport(c.opt)
		if errs.FieldOf(err) != c.field || (err != nil) != (c.field != "") || (warn != "") != c.warn {
			t.Errorf("%s: %v, warn %q", c.name, err, warn)
		}
	}
	_, err := checkTransport(Options{Listen: "0.0.0.0:7070", TokensFile: tok})
	if !strings.Contains(err.Error(), "--tls-cert") || !strings.Contains(err.Error(), "--insecure-plaintext") {
		t.Errorf("the refusal does not say what to do: %v", err)
	}
}

// TestInsecurePlaintextStartsAndWarns: a real server on every interface
// with tokens: refused without TLS, started with --insecure-plaintext and
// a warning after the first line (tools read the address from it).
func TestInsecurePlaintextStartsAndWarns(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	os.WriteFile(tokens, []byte("tokens:\n  - {token: "+adminTok+", role: admin}\n"), 0o600)
	opt := Options{Listen: "0.0.0.0:0", DataDir: filepath.Join(dir, "data"), TokensFile: tokens, Logger: quiet}
	if err := Run(context.Background(), io.Discard, opt); errs.FieldOf(err) != "listen" || !strings.Contains(err.Error(), "cleartext") {
		t.Fatalf("tokens on 0.0.0.0 without TLS: %v", err)
	}
	opt.InsecurePlaintext = true
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, pw, opt); pw.Close() }()
	sc := bufio.NewScanner(pr)
	var lines []string
	var drain sync.WaitGroup
	for len(lines) < 3 && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	drain.Add(1)
	go func() { defer drain.Done(); io.Copy(io.Discard, pr) }()
	defer func() { cancel(); <-done; drain.Wait() }()
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "hetsched server: http://") || !strings.HasPrefix(lines[2], "WARNING: --insecure-plaintext") {
		t.Fatalf("start lines: %q", lines)
	}
	_, port, _ := net.SplitHostPort(strings.Fields(strings.TrimPrefix(lines[0], "hetsched server: http://"))[0])
	if code, _ := callAs(t, adminTok, "GET", "http://127.0.0.1:"+port+"/api/v1/cluster", ""); code != 200 {
		t.Fatalf("admin over the insecure port: %d", code)
	}
}
