package h2raw

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hetsched/hetsched/internal/loadgen"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// h2cServer serves handler over h2c on 127.0.0.1:0 with maxStreams
// concurrent streams a connection.
func h2cServer(t *testing.T, maxStreams int, handler http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := loadgen.EchoServer(handler)
	srv.HTTP2.MaxConcurrentStreams = maxStreams
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestHoldsManyStreamsAndAnswersEachOnce parks more requests than the
// server's stream limit, releases them, and checks that every request is
// answered exactly once with its own body, over one connection.
func TestHoldsManyStreamsAndAnswersEachOnce(t *testing.T) {
	release := make(chan struct{})
	var mu sync.Mutex
	parked := 0
	addr := h2cServer(t, 500, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("x-token") != "t" || r.URL.Query().Get("wait") != "1m" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		parked++
		mu.Unlock()
		<-release
		w.WriteHeader(http.StatusCreated)
		w.Write(append([]byte("echo:"), b...))
	}))
	const n = 2000
	got := make(chan Response, n)
	c, err := Dial(addr, Options{OnResponse: func(r Response) { got <- r }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.MaxStreams() != 500 {
		t.Fatalf("server's stream limit %d, want 500", c.MaxStreams())
	}
	sent := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			if err := c.Post("/x?wait=1m", [][2]string{{"x-token", "t"}}, []byte(fmt.Sprint(i)), uint64(i)); err != nil {
				sent <- err
				return
			}
		}
		sent <- c.Flush()
	}()
	// The server holds at most 500; the rest wait in Post.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		p := parked
		mu.Unlock()
		if p == 500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d parked, want 500", p)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if a := c.Active(); a != 500 {
		t.Fatalf("%d active streams, want 500 (the limit)", a)
	}
	close(release)
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	seen := make(map[uint64]bool)
	for i := 0; i < n; i++ {
		select {
		case r := <-got:
			if r.Err != nil || r.Status != http.StatusCreated || string(r.Body) != fmt.Sprintf("echo:%d", r.Tag) {
				t.Fatalf("response %+v (body %q)", r, r.Body)
			}
			if seen[r.Tag] {
				t.Fatalf("tag %d answered twice", r.Tag)
			}
			seen[r.Tag] = true
		case <-time.After(20 * time.Second):
			t.Fatalf("%d of %d answered", i, n)
		}
	}
}

// TestCloseFailsOutstandingRequests: requests still waiting when the
// client closes are answered with an error, once each.
func TestCloseFailsOutstandingRequests(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	addr := h2cServer(t, 100, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	got := make(chan Response, 10)
	c, err := Dial(addr, Options{OnResponse: func(r Response) { got <- r }})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := c.Post("/", nil, []byte("{}"), uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	for i := 0; i < 10; i++ {
		r := <-got
		if r.Err == nil || !strings.Contains(r.Err.Error(), "closed") {
			t.Fatalf("response after close: %+v", r)
		}
	}
	if err := c.Post("/", nil, nil, 99); err == nil {
		t.Fatal("Post on a closed connection succeeded")
	}
}

// TestDialRejectsAnHTTP1Server: a server that does not speak h2c fails
// the settings exchange within the dial timeout instead of hanging.
func TestDialRejectsAnHTTP1Server(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler()}
	go srv.Serve(ln)
	defer srv.Close()
	_, err = Dial(ln.Addr().String(), Options{DialTimeout: 2 * time.Second, OnResponse: func(Response) {}})
	if err == nil {
		t.Fatal("dial to an HTTP/1.1-only server succeeded")
	}
}
