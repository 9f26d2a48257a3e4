package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
)

// fenceCounter is a runner that runs nothing and counts its fences.
type fenceCounter struct{ fences atomic.Int64 }

func (*fenceCounter) nodes() []api.Node                         { return []api.Node{{Name: "n1"}} }
func (*fenceCounter) beats() []agentapi.Beat                    { return []agentapi.Beat{{Node: "n1"}} }
func (*fenceCounter) sync([]agentapi.Assignment)                {}
func (*fenceCounter) assign(agentapi.Assignment)                {}
func (*fenceCounter) revoke(task string, attempt int, _ string) {}
func (f *fenceCounter) fence(string)                            { f.fences.Add(1) }

// TestHeartbeatsGoOnThroughTheReconnectBackoff: when the assignment
// stream ends, the agent waits a backoff before it registers again (up to
// 2 s once registrations failed before). Its tasks are at stake meanwhile:
// heartbeats go on through the wait, so a fence deadline shorter than the
// backoff does not kill them. (CI found the gap: a leader froze right
// after the stream to the previous one broke, and the agent, silent for
// 1.6 s of backoff, fenced its tasks 33 ms before a new leader answered.)
func TestHeartbeatsGoOnThroughTheReconnectBackoff(t *testing.T) {
	var (
		mu        sync.Mutex
		registers int
		streams   int
	)
	const failFirst = 6 // backoff 100 ms doubling to its 2 s cap
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch {
		case r.URL.Path == "/api/v1/agents/register":
			mu.Lock()
			registers++
			n := registers
			mu.Unlock()
			if n <= failFirst {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"an election is in progress"}}`)
				return
			}
			// A deadline of 900 ms: shorter than any backoff at the cap.
			_, _ = io.WriteString(w, `{"agent":"n1","generation":1,"heartbeatInterval":"300ms","missedHeartbeats":3}`)
		case strings.HasSuffix(r.URL.Path, "/heartbeat"):
			_, _ = io.WriteString(w, `{"nodes":1}`)
		case strings.HasSuffix(r.URL.Path, "/assignments"):
			mu.Lock()
			streams++
			n := streams
			mu.Unlock()
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			if n > 1 {
				<-r.Context().Done() // the second stream stays up
				return
			}
			time.Sleep(100 * time.Millisecond) // the first breaks (a failover)
		default:
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, `{}`)
		}
	}))
	defer srv.Close()
	c, err := newClient(srv.URL, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &fenceCounter{}
	s := &session{name: "n1", c: c, r: r, rep: newReporter(),
		log: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, 30*time.Second, func() bool { return s.connected.Load() == 2 }, "the agent registered again after its stream broke")
	if n := r.fences.Load(); n != 0 {
		t.Fatalf("the agent fenced its tasks %d time(s) while it waited to register again; want its heartbeats to go on", n)
	}
}
