package observability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hetsched/hetsched/internal/childproc"
)

// TestMain removes the hetsched binary built for the live test and then
// checks that no test left a goroutine behind.
func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines left behind:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// root is the repository's root directory (tests run in their package's).
func root(t *testing.T) string {
	t.Helper()
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// deployPath is a file under deploy/ (prometheus/alerts.yml, say).
func deployPath(t *testing.T, rel string) string {
	t.Helper()
	return filepath.Join(root(t), "deploy", filepath.FromSlash(rel))
}

// need finds one of Debian's prometheus package's binaries: a test skips
// without it, except under CI=true, where .ci/run installs it.
func need(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing under CI=true: apt-get install -y prometheus", name)
		}
		t.Skipf("%s not installed: apt-get install -y prometheus", name)
	}
	return p
}

// run runs a command in dir, bounded by a timeout, and returns its output.
func run(t *testing.T, dir string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// build is the hetsched binary, built once per test binary.
var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// hetschedBinary builds cmd/hetsched (once) into a directory TestMain
// removes.
func hetschedBinary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		build.dir, build.err = os.MkdirTemp("", "hetsched-observability-")
		if build.err == nil {
			build.bin, build.err = childproc.Build(build.dir)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.bin
}

// newClient is an HTTP client whose every call has a timeout; its idle
// connections are closed when the test ends (no goroutine outlives it).
func newClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Timeout: 10 * time.Second, Transport: tr}
}

// call sends a JSON body (none when "") and decodes a JSON answer into out
// (skipped when nil); it returns the status code.
func call(c *http.Client, method, url, body string, out any) (int, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, err
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %d, not JSON: %q", method, url, resp.StatusCode, b)
		}
	}
	return resp.StatusCode, nil
}

// eventually retries f every 200ms until it returns nil, failing the test
// with f's last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
