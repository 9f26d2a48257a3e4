package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/errs"
)

// TestPprofListener: the profiles are served on their own loopback
// listener when asked for, never on the API's handler tree, and a
// non-loopback profiling address is refused before anything starts.
func TestPprofListener(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := servePprof(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/mutex?debug=1", "/debug/pprof/goroutine?debug=1"} {
		resp, err := client.Get("http://" + addr.String() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(b) == 0 {
			t.Fatalf("%s: status %d, %d bytes", path, resp.StatusCode, len(b))
		}
	}

	s := start(t, t.TempDir())
	defer s.stop(t)
	resp, err := client.Get(s.base + "/debug/pprof/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the API serves /debug/pprof/: status %d", resp.StatusCode)
	}

	if _, err := servePprof(ctx, "0.0.0.0:0"); errs.CodeOf(err) != errs.InvalidArgument {
		t.Fatalf("non-loopback pprof: %v", err)
	}
	err = Run(ctx, io.Discard, Options{Listen: "127.0.0.1:0", DataDir: t.TempDir(), PprofListen: "10.1.2.3:6060"})
	if errs.CodeOf(err) != errs.InvalidArgument || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("Run with a non-loopback pprof address: %v", err)
	}
}
