package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// sseServer answers GET /api/v1/events with script[i] for its i-th
// connection (the last one again after the end) and records each
// connection's query.
type sseServer struct {
	mu      sync.Mutex
	queries []string
	conns   chan string // each connection's since
	script  []func(w http.ResponseWriter, r *http.Request)
}

func newSSEServer(t *testing.T, script ...func(w http.ResponseWriter, r *http.Request)) (*sseServer, *Client) {
	s := &sseServer{script: script, conns: make(chan string, 100)}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		n := len(s.queries)
		s.queries = append(s.queries, r.URL.RawQuery)
		s.mu.Unlock()
		s.conns <- r.URL.Query().Get("since")
		s.script[min(n, len(s.script)-1)](w, r)
	}))
	t.Cleanup(ts.Close)
	return s, NewClient(ts.URL, "", 5*time.Second)
}

// events writes the SSE text body and flushes; with hold it then waits
// for the client to go.
func events(body string, hold bool) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, body)
		w.(http.Flusher).Flush()
		if hold {
			<-r.Context().Done()
		}
	}
}

func taskEvent(seq int, id, state string) string {
	return fmt.Sprintf("id: %d\nevent: task\ndata: {\"seq\":%d,\"kind\":\"task\",\"id\":%q,\"state\":%q}\n\n", seq, seq, id, state)
}

func next(t *testing.T, ch <-chan event) event {
	t.Helper()
	select {
	case ev := <-ch:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return event{}
}

func since(t *testing.T, s *sseServer) string {
	t.Helper()
	select {
	case v := <-s.conns:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("no connection within 10s")
	}
	return ""
}

// runStream connects and runs st until the test ends; finished is closed
// when run returns, with its error in *errp.
func runStream(t *testing.T, st *stream) (out <-chan event, finished <-chan struct{}, errp *error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cn, err := st.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	events, done := make(chan event, 100), make(chan struct{})
	errp = new(error)
	go func() { *errp = st.run(ctx, cn, events); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return events, done, errp
}

// TestStreamResumesAfterTheLastEvent: a dropped stream reconnects with
// ?since= the last event's id, after the server's retry delay (here its
// floor), and multi-line data and comments are read as SSE says.
func TestStreamResumesAfterTheLastEvent(t *testing.T) {
	s, c := newSSEServer(t,
		events("retry: 1\n\n: keep-alive\n\n"+taskEvent(5, "a", "pending")+taskEvent(6, "a", "scheduled"), false),
		events("id: 7\nevent: task\ndata: {\"seq\":7,\"kind\":\"task\",\ndata: \"id\":\"a\",\"state\":\"running\"}\n\n", true))
	st := newStream(c)
	out, _, _ := runStream(t, st)
	if v := since(t, s); v != "" {
		t.Errorf("the first connection has since=%q, want none (from now)", v)
	}
	for _, want := range []string{"pending", "scheduled", "running"} {
		if ev := next(t, out); ev.ID != "a" || ev.State != want {
			t.Errorf("got %+v, want a %s", ev, want)
		}
	}
	if v := since(t, s); v != "6" {
		t.Errorf("the reconnection has since=%q, want 6", v)
	}
	if st.retry != minRetry {
		t.Errorf("retry %v, want the server's 1ms raised to %v", st.retry, minRetry)
	}
}

// TestStreamGivesUp: connections that keep failing end the stream after
// maxReconnects, with the last error.
func TestStreamGivesUp(t *testing.T) {
	fail := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		fmt.Fprint(w, `{"error":{"code":"unavailable","message":"too many event streams"}}`)
	}
	s, c := newSSEServer(t, events(taskEvent(1, "a", "pending"), false), fail)
	st := newStream(c)
	st.retry = time.Millisecond
	out, done, errp := runStream(t, st)
	next(t, out)
	select {
	case <-done:
		if err := *errp; err == nil || !strings.Contains(err.Error(), fmt.Sprintf("failed %d times in a row", maxReconnects)) || !strings.Contains(err.Error(), "too many event streams") {
			t.Errorf("got %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not give up")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queries) != 1+maxReconnects {
		t.Errorf("%d connections, want %d", len(s.queries), 1+maxReconnects)
	}
}

// TestStreamIdleReconnects: a stream that goes silent (no keep-alive) is
// taken for dead and resumed.
func TestStreamIdleReconnects(t *testing.T) {
	s, c := newSSEServer(t, events(taskEvent(3, "a", "pending"), true), events(taskEvent(4, "a", "scheduled"), true))
	st := newStream(c)
	st.idle, st.retry = 50*time.Millisecond, time.Millisecond
	out, _, _ := runStream(t, st)
	since(t, s)
	next(t, out)
	if v := since(t, s); v != "3" {
		t.Errorf("since=%q after the idle stream, want 3", v)
	}
	if ev := next(t, out); ev.State != "scheduled" {
		t.Errorf("got %+v", ev)
	}
}

// TestStreamResyncs: when the server no longer has the events after the
// cursor (400 on since: it restarted), the stream goes on from now and
// says so with a resync event.
func TestStreamResyncs(t *testing.T) {
	refuse := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("since") == "" {
			events(taskEvent(1, "b", "pending"), true)(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		fmt.Fprint(w, `{"error":{"code":"invalid_argument","field":"since","message":"events before 1 are no longer kept"}}`)
	}
	s, c := newSSEServer(t, events(taskEvent(9, "a", "pending"), false), refuse)
	st := newStream(c)
	st.retry = time.Millisecond
	out, _, _ := runStream(t, st)
	next(t, out)
	if ev := next(t, out); ev.Kind != kindResync {
		t.Fatalf("got %+v, want a resync", ev)
	}
	if ev := next(t, out); ev.ID != "b" {
		t.Errorf("got %+v after the resync", ev)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.Join(s.queries, " ") != " since=9 " {
		t.Errorf("queries %q", s.queries)
	}
}
