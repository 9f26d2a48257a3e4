package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/cli"
)

// startCmd runs the hetsched command line args in this process until the
// test ends; its standard output goes to out, its standard error to errs.
func startCmd(t *testing.T, out io.Writer, errs io.Writer, args ...string) (stop func()) {
	t.Helper()
	root := newRoot()
	root.SetOut(out)
	root.SetErr(errs)
	root.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: %v", args[0], err)
			}
		}
	}
	t.Cleanup(stop)
	return stop
}

// waitUntil polls ok (every 20ms) until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
	}
}

// TestTLSEndToEnd: certificates made by `hetsched certs`, a server on
// 127.0.0.1:0 serving TLS with --client-ca, the real agent command
// authenticating by its node-a certificate (no token), and the CLI as an
// admin by certificate: a command task submitted over TLS runs on node-a
// and succeeds. The agent's certificate does not let it register node-b;
// expired and foreign certificates, a foreign --ca and plain HTTP are
// refused, each with a message that says why.
func TestTLSEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs an agent and a task")
	}
	t.Setenv(asCLI, "1") // the agent's shims run this test binary as hetsched
	dir := filepath.Join(t.TempDir(), "pki")
	other := filepath.Join(t.TempDir(), "other")
	for _, args := range [][]string{
		{"certs", "init", "--dir", dir},
		{"certs", "server", "--dir", dir},
		{"certs", "agent", "--dir", dir, "--nodes", "node-a"},
		{"certs", "client", "--dir", dir, "--role", "admin"},
		{"certs", "init", "--dir", other},
		{"certs", "client", "--dir", other, "--role", "admin"},
	} {
		if out, err := run(t, args...); err != nil || !strings.Contains(out, "wrote ") {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	if _, err := run(t, "certs", "init", "--dir", dir); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("certs init over a CA: %v", err)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	ca := f("ca.pem")
	admin := []string{"--ca", ca, "--cert", f("client-admin.pem"), "--key", f("client-admin-key.pem")}

	pr, pw := io.Pipe()
	startCmd(t, pw, io.Discard, "server", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(t.TempDir(), "data"),
		"--tls-cert", f("server.pem"), "--tls-key", f("server-key.pem"), "--client-ca", ca, "--heartbeat-interval", "500ms")
	lines := bufio.NewScanner(pr)
	if !lines.Scan() {
		t.Fatal("the server printed nothing")
	}
	first := lines.Text()
	go io.Copy(io.Discard, pr)
	base, ok := strings.CutPrefix(first, "hetsched server: ")
	base, _, _ = strings.Cut(base, " ")
	if !ok || !strings.HasPrefix(base, "https://127.0.0.1:") {
		t.Fatalf("first line %q, want hetsched server: https://127.0.0.1:PORT", first)
	}

	var agentLog childproc.SyncBuffer
	startCmd(t, io.Discard, &agentLog, "agent", "--server", base, "--name", "node-a", "--work-dir", t.TempDir(), "--grace", "1s",
		"--ca", ca, "--cert", f("agent-node-a.pem"), "--key", f("agent-node-a-key.pem"))
	getNode := func(name string) (string, error) {
		out, err := run(t, append([]string{"get", "nodes", "-o", "json", "--server", base}, admin...)...)
		if err != nil {
			return "", err
		}
		var l struct {
			Nodes []struct{ Name, State string } `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			return "", err
		}
		for _, n := range l.Nodes {
			if n.Name == name {
				return n.State, nil
			}
		}
		return "", nil
	}
	waitUntil(t, 30*time.Second, "node-a ready", func() bool {
		s, err := getNode("node-a")
		if err != nil {
			t.Fatalf("get nodes over TLS: %v", err)
		}
		return s == "ready"
	})

	task := filepath.Join(t.TempDir(), "task.yaml")
	os.WriteFile(task, []byte("id: hello\npriority: 1\nresources: {cpu: 100m}\ncommand: [sh, -c, echo hello over tls]\n"), 0o600)
	if out, err := run(t, append([]string{"submit", "-f", task, "--server", base}, admin...)...); err != nil || !strings.Contains(out, "hello") {
		t.Fatalf("submit over TLS: %v %s", err, out)
	}
	// The $HETSCHED_* defaults stand for the flags.
	t.Setenv("HETSCHED_CA", ca)
	t.Setenv("HETSCHED_CERT", f("client-admin.pem"))
	t.Setenv("HETSCHED_KEY", f("client-admin-key.pem"))
	var view struct{ State, Node string }
	waitUntil(t, 30*time.Second, "task hello to finish", func() bool {
		out, err := run(t, "describe", "task", "hello", "-o", "json", "--server", base)
		if err != nil {
			t.Fatalf("describe over TLS: %v", err)
		}
		json.Unmarshal([]byte(out), &view)
		return view.State == "succeeded" || view.State == "failed"
	})
	if view.State != "succeeded" || view.Node != "node-a" {
		t.Fatalf("task hello: %+v", view)
	}
	if out, err := run(t, "logs", "hello", "--server", base); err != nil || strings.TrimSpace(out) != "hello over tls" {
		t.Fatalf("logs: %v %q", err, out)
	}

	// HTTP/2 by ALPN for the CLI's client.
	tc, err := certs.ClientTLSConfig(ca, f("client-admin.pem"), f("client-admin-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	c := cli.NewTLSClient(base, "", 10*time.Second, tc)
	resp, err := c.HTTP.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("CLI to server: %s, want HTTP/2", resp.Proto)
	}

	// node-a's certificate does not register node-b: the agent is told so.
	var bLog childproc.SyncBuffer
	stopB := startCmd(t, io.Discard, &bLog, "agent", "--server", base, "--name", "node-b", "--work-dir", t.TempDir(),
		"--ca", ca, "--cert", f("agent-node-a.pem"), "--key", f("agent-node-a-key.pem"))
	waitUntil(t, 30*time.Second, "node-b's registration refused", func() bool {
		return strings.Contains(bLog.String(), "register failed")
	})
	stopB()
	if l := bLog.String(); !strings.Contains(l, "403 permission_denied") || !strings.Contains(l, `node \"node-b\"`) {
		t.Fatalf("node-b agent log:\n%s", l)
	}
	if s, err := getNode("node-b"); err != nil || s != "" {
		t.Fatalf("node-b: %q %v", s, err)
	}

	// Refusals, each saying why.
	expCert, expKey, err := certs.Issue(dir, certs.IssueOptions{Kind: certs.KindClient, Role: certs.RoleAdmin, Name: "old",
		NotBefore: time.Now().Add(-72 * time.Hour), Validity: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"expired certificate", []string{"--cert", expCert, "--key", expKey}, []string{"cert:", "expired on"}},
		{"foreign CA's certificate", []string{"--cert", filepath.Join(other, "client-admin.pem"), "--key", filepath.Join(other, "client-admin-key.pem")},
			[]string{"cannot reach", "the server refused this client's certificate (--cert)", "not signed by the CA the server trusts", "tls: unknown certificate authority"}},
		{"foreign --ca", []string{"--ca", filepath.Join(other, "ca.pem")}, []string{"not signed by a CA this client trusts: check --ca", "unknown authority"}},
		{"plain HTTP", []string{"--server", strings.Replace(base, "https://", "http://", 1), "--ca", "", "--cert", "", "--key", ""},
			[]string{"HTTP request to an HTTPS server", "use an https:// --server URL"}},
		{"TLS flags for http://", []string{"--server", strings.Replace(base, "https://", "http://", 1)}, []string{"need an https:// --server"}},
	} {
		_, err := run(t, append([]string{"get", "nodes", "--server", base, "--timeout", "10s"}, c.args...)...)
		for _, w := range c.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want %q", c.name, err, w)
			}
		}
	}
	// The server's own verdict on an expired certificate, past the CLI's
	// check.
	kp, err := tls.LoadX509KeyPair(expCert, expKey)
	if err != nil {
		t.Fatal(err)
	}
	raw := &tls.Config{RootCAs: tc.RootCAs, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &kp, nil }}
	err = cli.GetNodes(context.Background(), cli.NewTLSClient(base, "", 10*time.Second, raw), io.Discard, cli.Table)
	if err == nil || !strings.Contains(err.Error(), "the server refused this client's certificate (--cert): it has expired") || !strings.Contains(err.Error(), "tls: expired certificate") {
		t.Fatalf("expired certificate at the server: %v", err)
	}
	if strings.Contains(agentLog.String(), "register failed") {
		t.Errorf("node-a's agent had failures:\n%s", agentLog.String())
	}
}
