package serverlist

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func get(t *testing.T, l *List, hc *http.Client) (string, error) {
	t.Helper()
	resp, err := l.Send(hc, func(base string) (*http.Request, error) {
		return http.NewRequestWithContext(context.Background(), http.MethodGet, base+"/", nil)
	}, func(base string, err error) error { return err })
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	return resp.Header.Get("X-Name"), nil
}

func named(name string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Header().Set("X-Name", name) }))
}

// A refused server is skipped; the one that answered is asked first next
// time; after an answer lost on a reached server, the next request starts
// with the next one and the lost request is not sent again.
func TestSendFailsOver(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()
	b := named("b")
	defer b.Close()
	hung := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hung }))
	defer slow.Close()
	defer close(hung) // before slow.Close, which waits for its handlers
	hc := &http.Client{Timeout: 300 * time.Millisecond}

	l := New([]string{refused, b.URL})
	if name, err := get(t, l, hc); err != nil || name != "b" {
		t.Fatalf("past a refused server: %q %v", name, err)
	}
	if l.Current() != b.URL {
		t.Fatalf("the server that answered is not first: %s", l.Current())
	}

	l = New([]string{slow.URL, b.URL})
	if _, err := get(t, l, hc); err == nil {
		t.Fatal("a request whose answer was lost was sent again elsewhere")
	}
	if name, err := get(t, l, hc); err != nil || name != "b" {
		t.Fatalf("the request after a lost answer: %q %v, want b", name, err)
	}

	l = New([]string{refused, refused})
	if _, err := get(t, l, hc); err == nil || !strings.Contains(err.Error(), "no server answered") {
		t.Fatalf("every server refused: %v", err)
	}
}

// NewRequest carries the token and a JSON body only when given.
func TestNewRequest(t *testing.T) {
	ctx := context.Background()
	r, err := NewRequest(ctx, http.MethodPost, "http://127.0.0.1:1/api/v1/tasks", []byte(`{}`), "tok")
	if err != nil || r.Header.Get("Authorization") != "Bearer tok" || r.Header.Get("Content-Type") != "application/json" || r.ContentLength != 2 {
		t.Errorf("with a body and a token: %v %v", r.Header, err)
	}
	r, err = NewRequest(ctx, http.MethodGet, "http://127.0.0.1:1/api/v1/tasks", nil, "")
	if err != nil || r.Header.Get("Authorization") != "" || r.Header.Get("Content-Type") != "" || r.Body != nil {
		t.Errorf("without: %v %v", r.Header, err)
	}
	if _, err := NewRequest(ctx, "GET", "http://[::1", nil, ""); err == nil {
		t.Error("a bad URL made a request")
	}
}
