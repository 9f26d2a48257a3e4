// Package servertest starts a real hetsched server in the test's process,
// on 127.0.0.1 with a port from :0 and a data directory under t.TempDir().
package servertest

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/server"
)

// Start serves with the given --nodes file contents (YAML) and returns the
// base URL; the server stops when the test ends.
func Start(t testing.TB, nodesYAML string) string {
	t.Helper()
	return StartWith(t, nodesYAML, nil)
}

// StartWith is Start with set changing the options first (tokens, say).
func StartWith(t testing.TB, nodesYAML string, set func(*server.Options)) string {
	t.Helper()
	dir := t.TempDir()
	nodes := filepath.Join(dir, "nodes.yaml")
	if err := os.WriteFile(nodes, []byte(nodesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	opt := server.Options{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), NodesFile: nodes,
		Logger: slog.New(slog.DiscardHandler), Ready: func(a string) { ready <- a }}
	if set != nil {
		set(&opt)
	}
	go func() { done <- server.Run(ctx, io.Discard, opt) }()
	select {
	case a := <-ready:
		t.Cleanup(func() { cancel(); <-done })
		return "http://" + a
	case err := <-done:
		cancel()
		t.Fatalf("server: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("server did not start within 30s")
	}
	return ""
}
