package kube

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/hetsched/hetsched/internal/kube/kubewire"
)

// The configuration hetsched kube's clients are made from dials through
// kubewire's gathering dialer with --gather-writes, and through
// client-go's own without it.
func TestClientConfigGathersWritesWhenAsked(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://`+ln.Addr().String()+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, wire := range []kubewire.Options{kubewire.Fast(), kubewire.Stock()} {
		cfg, err := clientConfig(Options{Kubeconfig: kc, QPS: 10, Burst: 20, Wire: wire})
		if err != nil {
			t.Fatal(err)
		}
		if (cfg.Dial != nil) != wire.GatherWrites {
			t.Fatalf("--gather-writes=%v: a Dial of its own %v", wire.GatherWrites, cfg.Dial != nil)
		}
		if cfg.Dial == nil {
			continue
		}
		c, err := cfg.Dial(t.Context(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}
