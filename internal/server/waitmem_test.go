package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// netHTTPFrames stands for the frames net/http's HTTP/2 server keeps below
// a handler (runHandler, the handler adapters: about 270 bytes in Go
// 1.26); with the test goroutine's own frame, about 300.
//
//go:noinline
func netHTTPFrames(s *Server, w http.ResponseWriter, r *http.Request) {
	var pad [160]byte
	pad[0] = 1
	s.ServeHTTP(w, r)
	runtime.KeepAlive(&pad)
}

// growStack makes the calling goroutine's stack 8 KiB, as the deepest point
// of a request's handling (reading HTTP/2 frames, decoding, submitting)
// does.
//
//go:noinline
func growStack(n int) byte {
	var pad [160]byte
	pad[n%256] = byte(n)
	if n > 0 {
		return growStack(n-1) + pad[(n+1)%256]
	}
	return pad[0]
}

// TestWaitingStackShrinks: a POST /schedule waiting for its placement
// holds a goroutine whose stack the garbage collector shrinks to 4 KiB
// (half of what it grew to), because what is on it while it waits is
// small (ServeHTTP's frame, park's and the runtime's select). At a
// million waiting HTTP/2 streams that is 4 GiB less than 8 KiB stacks.
func TestWaitingStackShrinks(t *testing.T) {
	eng := openEngine(t)
	if err := eng.UpsertNode(context.Background(), api.Node{Name: "n1", Capacity: resource.List{"cpu": 1000, "memory": 1 << 30}}); err != nil {
		t.Fatal(err)
	}
	s := New(eng, "", quiet, nil, nil, nil)
	defer s.Close()

	const n = 1000
	ctx, cancel := context.WithCancel(context.Background())
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.StackInuse
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		// Never placeable (2 CPUs on a 1-CPU cluster): it waits until
		// the test ends it.
		body := `{"id":"w` + itoa(i) + `","resources":{"cpu":"2"}}`
		req := httptest.NewRequestWithContext(ctx, "POST", "http://127.0.0.1/api/v1/schedule?wait=10m", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		go func() {
			defer wg.Done()
			growStack(24) // about 6.5 KiB deep: the stack is now 8 KiB
			netHTTPFrames(s, rec, req)
			codes[i] = rec.Code
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.adm.inflight.Load() < n || parked(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d requests waiting after 30s", s.adm.inflight.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	per := float64(ms.StackInuse-before) / n
	t.Logf("stack per waiting request: %.0f bytes", per)
	cancel() // the clients leave: every request is answered (202)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusAccepted {
			t.Fatalf("request %d: status %d after its client left, want 202", i, c)
		}
	}
	if per > 4096+512 && !raceEnabled {
		t.Fatalf("a waiting request's stack is %.0f bytes: the frames on it while it waits keep the runtime from shrinking it to 4 KiB", per)
	}
}

// parked counts the goroutines parked in (*Server).park.
func parked(s *Server) int {
	buf := make([]byte, 64<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "(*Server).awaitChange(")
}

func itoa(i int) string {
	const d = "0123456789"
	if i < 10 {
		return d[i : i+1]
	}
	return itoa(i/10) + d[i%10:i%10+1]
}

// openEngine is an engine on a fresh store, both closed when the test ends.
func openEngine(t *testing.T) *engine.Engine {
	t.Helper()
	st, err := store.OpenDisk(t.TempDir(), store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Config{Core: core.DefaultConfig(), Logger: quiet}, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(eng.Close)
	return eng
}
