package server

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// issue 15 §7: a client that declares a small body and trickles it is cut
// off after the body deadline with 408, and the answer names no address.
func TestSlowBodyGets408(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	addr := strings.TrimPrefix(s.base, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"id":"slow","resources":{"cpu":"1"}}`
	fmt.Fprintf(conn, "POST /api/v1/tasks HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", addr, len(body), body[:5])
	sent := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(bodyMax)) // the old behaviour held it this long
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body: %v", err)
	}
	took := time.Since(sent)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 408 || !strings.Contains(string(b), "request_timeout") {
		t.Fatalf("trickled body: %d %s", resp.StatusCode, b)
	}
	if strings.Contains(string(b), "127.0.0.1") || strings.Contains(string(b), "tcp") {
		t.Errorf("the answer names addresses: %s", b)
	}
	if want := bodyDeadline(int64(len(body))); took > want+5*time.Second {
		t.Errorf("answered after %v, want about %v", took, want)
	}
	t.Logf("a %d-byte body sent 5 bytes in: 408 after %v", len(body), took.Round(time.Millisecond))
}

func TestBodyDeadlineScales(t *testing.T) {
	if d := bodyDeadline(100); d < bodyBase || d > bodyBase+time.Millisecond || bodyDeadline(-1) != bodyMax || bodyDeadline(MaxBodyBytes+1) != bodyMax {
		t.Errorf("deadlines: %v %v %v", d, bodyDeadline(-1), bodyDeadline(MaxBodyBytes+1))
	}
	if d := bodyDeadline(10 << 20); d != bodyBase+10*time.Second {
		t.Errorf("10 MiB: %v", d)
	}
}

// issue 15 §7: an error quotes at most ~200 characters of the offending
// value (70,000 came back before).
func TestErrorsDoNotEchoWholeValues(t *testing.T) {
	s := start(t, t.TempDir())
	defer s.stop(t)
	long := strings.Repeat("x", 70_000)
	for _, body := range []string{
		`{"id":"` + long + `","resources":{"cpu":"1"}}`,
		`{"resources":{"cpu":"` + long + `"}}`,
		`{"resources":{"cpu":"1"},"queue":"` + long + `"}`,
		`{"resources":{"cpu":"1"},"` + long + `":1}`,
		`{"resources":{"cpu":"1"},"duration":"` + long + `"}`,
		`{"resources":{"cpu":"1"},"nodeSelector":{"a":"` + long + `"}}`,
		`{"resources":{"` + long + `":"1"}}`,
	} {
		code, m := call(t, "POST", s.base+"/api/v1/tasks", body)
		msg := errMsg(m)
		if code != 400 || msg == "" || len(msg) > maxErrorMessage+64 || strings.Count(msg, "x") > 2*400 {
			t.Errorf("%.60s…: %d, message of %d bytes: %.300s", body, code, len(msg), msg)
		}
		f, _ := json.Marshal(m)
		if len(f) > 2*maxErrorMessage {
			t.Errorf("%.60s…: error body of %d bytes", body, len(f))
		}
	}
}

// openStream opens GET /events as tok and returns the response (its body
// open) or the status of a refusal.
func openStream(t *testing.T, base, tok string) (*http.Response, int) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := (&http.Client{}).Do(req) // no client timeout: a stream stays open
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return nil, resp.StatusCode
	}
	return resp, 200
}

// issue 15 §7: event streams are capped per tenant and in all (503).
func TestEventStreamCaps(t *testing.T) {
	dir := t.TempDir()
	tokens := dir + "/tokens.yaml"
	writeFile(t, tokens, "tokens:\n  - {token: "+aTok+", role: tenant, tenant: team-a}\n  - {token: "+bTok+", role: tenant, tenant: team-b}\n")
	s := startWith(t, Options{DataDir: dir + "/data", TokensFile: tokens, MaxEventStreams: 3, MaxEventStreamsPerTenant: 2})
	defer s.stop(t)
	a1, _ := openStream(t, s.base, aTok)
	a2, _ := openStream(t, s.base, aTok)
	if _, code := openStream(t, s.base, aTok); code != 503 {
		t.Fatalf("team-a's third stream: %d, want 503", code)
	}
	b1, code := openStream(t, s.base, bTok)
	if code != 200 {
		t.Fatalf("team-b's first stream: %d", code)
	}
	defer b1.Body.Close()
	if _, code := openStream(t, s.base, bTok); code != 503 {
		t.Fatalf("a stream past the total of 3: %d, want 503", code)
	}
	a1.Body.Close()
	// The slot comes back once the server sees the client gone.
	deadline := time.Now().Add(10 * time.Second)
	for {
		b2, code := openStream(t, s.base, bTok)
		if code == 200 {
			b2.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed stream's slot was not given back: %d", code)
		}
		time.Sleep(20 * time.Millisecond)
	}
	a2.Body.Close()
}

// issue 15 §7: a subscriber that stops reading is dropped once a write
// has waited the write timeout; the server goes on.
func TestDeadSubscriberIsDropped(t *testing.T) {
	s := startWith(t, Options{DataDir: t.TempDir(), EventWriteTimeout: 300 * time.Millisecond})
	defer s.stop(t)
	addr := strings.TrimPrefix(s.base, "http://")
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /api/v1/events HTTP/1.1\r\nHost: %s\r\n\r\n", addr) // and never read
	streams := func() string {
		for _, line := range strings.Split(string(scrape(t, s.base)), "\n") {
			if v, ok := strings.CutPrefix(line, "hetsched_event_streams "); ok {
				return v
			}
		}
		return ""
	}
	for deadline := time.Now().Add(10 * time.Second); streams() != "1"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the stream did not open: %s", streams())
		}
	}
	// More events than the socket buffers hold (4 MiB at most here); then
	// the write that blocks is cut off after the timeout, or, if the
	// buffers took the last event, the next keep-alive's (15 s) is.
	var b strings.Builder
	for round := 0; streams() == "1" && round < 20; round++ {
		b.Reset()
		b.WriteString(`{"tasks":[`)
		for i := range 2000 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":"r%d-%d-with-a-long-name-to-fill-the-buffers-faster","resources":{"cpu":"1m"},"lease":"1h"}`, round, i)
		}
		b.WriteString(`]}`)
		if code, m := call(t, "POST", s.base+"/api/v1/tasks", b.String()); code != 201 {
			t.Fatalf("batch: %d %v", code, m)
		}
	}
	for deadline := time.Now().Add(40 * time.Second); streams() == "1"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server still holds a subscriber that reads nothing after 40,000 tasks and 40 s")
		}
	}
	if c, _ := call(t, "GET", s.base+"/healthz", ""); c != 200 {
		t.Fatalf("healthz after the drop: %d", c)
	}
}

// issue 15 §7: one address holds at most --max-conns-per-ip connections;
// past it a new one is answered 503 and closed, and a closed one frees
// its place.
func TestMaxConnsPerIP(t *testing.T) {
	s := startWith(t, Options{DataDir: t.TempDir(), MaxConnsPerIP: 2})
	defer s.stop(t)
	addr := strings.TrimPrefix(s.base, "http://")
	get := func(c net.Conn) (*http.Response, error) {
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		return http.ReadResponse(bufio.NewReader(c), nil)
	}
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if resp, err := get(c); err != nil || resp.StatusCode != 200 {
			t.Fatalf("a connection within the cap: %v %v", resp, err)
		}
		held = append(held, c)
	}
	third, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	_ = third.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the third connection: %v %v", resp, err)
	}
	held[0].Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := get(c)
		c.Close()
		if err == nil && resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed connection's place was not freed: %v %v", resp, err)
		}
	}
}
