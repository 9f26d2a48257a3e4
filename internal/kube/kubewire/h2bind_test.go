package kubewire

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// checkLeaksAtCleanup checks, after every other cleanup of the test, that
// no goroutine it started is left (the package's shared cluster, started
// before, runs beside).
func checkLeaksAtCleanup(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// h2TestConfig is a client configuration for a TLS server of srv's
// certificate at addr, with a bearer token.
func h2TestConfig(srv *httptest.Server, addr string) *rest.Config {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &rest.Config{Host: "https://" + addr, BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
}

// h2Events records a binder's connection events.
type h2Events struct {
	mu  sync.Mutex
	got []string
}

func (e *h2Events) observe(ev string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
}

func (e *h2Events) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return strings.Join(e.got, " ")
}

// h2TestPoster is a bindPoster whose Bindings go over an h2Binder for cfg.
func h2TestPoster(t *testing.T, cfg *rest.Config) *bindPoster {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &bindPoster{base: url.URL{Scheme: u.Scheme, Host: u.Host, Path: "/api/v1"}}
	var why string
	if p.h2, why = newH2Binder(cfg, p.base); p.h2 == nil {
		t.Fatalf("no h2 binder for a token over HTTPS: %s", why)
	}
	t.Cleanup(p.h2.close)
	return p
}

var bindingPath = regexp.MustCompile(`^/api/v1/namespaces/([^/]+)/pods/([^/]+)/binding$`)

// Against Go's own HTTP/2 server: many Bindings at once go over one
// connection, each with the headers and body client-go would send, never
// more streams open than the server allows, and a refusal keeps its
// class.
func TestH2BinderAgainstGosServer(t *testing.T) {
	checkLeaksAtCleanup(t)
	var conns, inflight, most atomic.Int32
	var mu sync.Mutex
	var problems []string
	problem := func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		problems = append(problems, fmt.Sprintf(f, a...))
	}
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		body, _ := io.ReadAll(r.Body)
		m := bindingPath.FindStringSubmatch(r.URL.Path)
		switch {
		case r.ProtoMajor != 2 || r.Method != http.MethodPost || m == nil:
			problem("%s %s %s", r.Proto, r.Method, r.URL.Path)
		case r.Header.Get("Content-Type") != protobufType || r.Header.Get("Authorization") != "Bearer tok" ||
			!strings.HasPrefix(r.Header.Get("User-Agent"), "hetsched-test") || r.ContentLength != int64(len(body)):
			problem("%s: headers %v, length %d of %d", r.URL.Path, r.Header, r.ContentLength, len(body))
		case !bytes.HasPrefix(body, protobufMagic):
			problem("%s: body not protobuf", r.URL.Path)
		}
		if m == nil || !bytes.HasPrefix(body, protobufMagic) {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var env runtime.Unknown
		var b corev1.Binding
		if env.Unmarshal(body[len(protobufMagic):]) != nil || b.Unmarshal(env.Raw) != nil || b.Name != m[2] || b.Namespace != m[1] || b.Target.Name != "n1" {
			problem("%s: binding %+v", r.URL.Path, b)
		}
		if strings.HasPrefix(m[2], "taken-") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pod %s is already assigned","reason":"Conflict","code":409}`, m[2])
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"kind":"Status","status":"Success","code":201}`))
	}))
	srv.EnableHTTP2 = true
	srv.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 3}
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	defer srv.Close()
	cfg := h2TestConfig(srv, srv.Listener.Addr().String())
	cfg.UserAgent = "hetsched-test"
	p := h2TestPoster(t, cfg)

	const n = 60
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		name := fmt.Sprintf("p-%d", i)
		if i%10 == 0 {
			name = fmt.Sprintf("taken-%d", i)
		}
		wg.Go(func() { errs[i] = p.bind(t.Context(), "ns", name, "uid", "n1", nil) })
	}
	// The server holds every request: as many wait there as it allows.
	deadline := time.Now().Add(30 * time.Second)
	for inflight.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, err := range errs {
		if i%10 == 0 {
			if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "already assigned") {
				t.Errorf("binding %d: %v, want the server's conflict", i, err)
			}
		} else if err != nil {
			t.Errorf("binding %d: %v", i, err)
		}
	}
	for _, p := range problems {
		t.Error(p)
	}
	if m := most.Load(); m > 3 {
		t.Errorf("%d streams open at once; the server allows 3", m)
	}
	if c := conns.Load(); c != 1 {
		t.Errorf("%d connections for %d Bindings, want 1", c, n)
	}
}

// fakeH2 is an HTTP/2 server spoken frame by frame: each connection it
// accepts gets its SETTINGS, then every frame the client sends goes to
// onFrame with the connection's number (from 1) and a way to answer.
type fakeH2 struct {
	ln      net.Listener
	conns   atomic.Int32
	mu      sync.Mutex
	open    []net.Conn
	onFrame func(conn int, f http2.Frame, w *fakeH2Writer)
	// settings are every connection's first SETTINGS.
	settings []http2.Setting
	wg       sync.WaitGroup
}

// fakeH2Writer writes a fake connection's frames.
type fakeH2Writer struct {
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

// answer ends stream id with status and no body.
func (w *fakeH2Writer) answer(id uint32, status int) error {
	w.hbuf.Reset()
	w.enc.WriteField(hpack.HeaderField{Name: ":status", Value: fmt.Sprint(status)})
	return w.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: w.hbuf.Bytes(), EndHeaders: true, EndStream: true})
}

func newFakeH2(t *testing.T, onFrame func(conn int, f http2.Frame, w *fakeH2Writer), settings ...http2.Setting) (*fakeH2, *rest.Config) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.StartTLS() // for its certificate
	certs := srv.TLS.Certificates
	cfg := h2TestConfig(srv, "")
	srv.Close()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: certs, NextProtos: []string{http2.NextProtoTLS}})
	if err != nil {
		t.Fatal(err)
	}
	if len(settings) == 0 {
		settings = []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 100}}
	}
	f := &fakeH2{ln: ln, onFrame: onFrame, settings: settings}
	cfg.Host = "https://" + ln.Addr().String()
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(f.conns.Add(1))
			f.mu.Lock()
			f.open = append(f.open, c)
			f.mu.Unlock()
			f.wg.Go(func() { f.serve(n, c) })
		}
	})
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.open {
			c.Close()
		}
		f.mu.Unlock()
		f.wg.Wait()
	})
	return f, cfg
}

func (f *fakeH2) serve(n int, c net.Conn) {
	defer c.Close()
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	w := &fakeH2Writer{fr: http2.NewFramer(c, c)}
	w.enc = hpack.NewEncoder(&w.hbuf)
	w.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if w.fr.WriteSettings(f.settings...) != nil {
		return
	}
	for {
		fr, err := w.fr.ReadFrame()
		if err != nil {
			return
		}
		if s, ok := fr.(*http2.SettingsFrame); ok && !s.IsAck() {
			w.fr.WriteSettingsAck()
			continue
		}
		f.onFrame(n, fr, w)
	}
}

// A GOAWAY that says the Binding's stream was never processed sends it
// again, on a new connection.
func TestH2BinderSendsAgainAfterGoAway(t *testing.T) {
	checkLeaksAtCleanup(t)
	f, cfg := newFakeH2(t, func(conn int, fr http2.Frame, w *fakeH2Writer) {
		if h, ok := fr.(*http2.MetaHeadersFrame); ok {
			if conn == 1 {
				w.fr.WriteGoAway(0, http2.ErrCodeNo, nil)
			} else {
				w.answer(h.StreamID, http.StatusCreated)
			}
		}
	})
	p := h2TestPoster(t, cfg)
	var events h2Events
	p.h2.observe = events.observe
	if err := p.bind(t.Context(), "ns", "p", "uid", "n1", nil); err != nil {
		t.Fatal(err)
	}
	if c := f.conns.Load(); c != 2 {
		t.Errorf("%d connections, want 2 (the second after the GOAWAY)", c)
	}
	if got := events.String(); got != "dialed goaway dialed" {
		t.Errorf("connection events %q, want dialed goaway dialed", got)
	}
}

// A refused stream is sent again (on the same connection: it lives on).
func TestH2BinderSendsARefusedStreamAgain(t *testing.T) {
	checkLeaksAtCleanup(t)
	var mu sync.Mutex
	var ids []uint32
	f, cfg := newFakeH2(t, func(conn int, fr http2.Frame, w *fakeH2Writer) {
		if h, ok := fr.(*http2.MetaHeadersFrame); ok {
			mu.Lock()
			ids = append(ids, h.StreamID)
			first := len(ids) == 1
			mu.Unlock()
			if first {
				w.fr.WriteRSTStream(h.StreamID, http2.ErrCodeRefusedStream)
			} else {
				w.answer(h.StreamID, http.StatusCreated)
			}
		}
	})
	p := h2TestPoster(t, cfg)
	if err := p.bind(t.Context(), "ns", "p", "uid", "n1", nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != 2 || ids[0] != 1 || ids[1] != 3 || f.conns.Load() != 1 {
		t.Errorf("streams %v over %d connections, want [1 3] over 1", ids, f.conns.Load())
	}
}

// A Binding that times out resets its stream; a connection that then
// answers no PING is closed, and the next Binding dials another.
func TestH2BinderDropsAStalledConnection(t *testing.T) {
	checkLeaksAtCleanup(t)
	var mu sync.Mutex
	var seen []string
	f, cfg := newFakeH2(t, func(conn int, fr http2.Frame, w *fakeH2Writer) {
		mu.Lock()
		defer mu.Unlock()
		switch fr := fr.(type) {
		case *http2.MetaHeadersFrame:
			if conn == 1 {
				seen = append(seen, "headers")
			} else {
				w.answer(fr.StreamID, http.StatusCreated)
			}
		case *http2.RSTStreamFrame:
			seen = append(seen, "reset "+fr.ErrCode.String())
		case *http2.PingFrame:
			seen = append(seen, "ping") // never answered
		}
	})
	p := h2TestPoster(t, cfg)
	p.h2.stallAfter, p.h2.pingWait = time.Nanosecond, 50*time.Millisecond
	var events h2Events
	p.h2.observe = events.observe
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	err := p.bind(ctx, "ns", "p", "uid", "n1", nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a Binding the server never answers: %v, want the deadline", err)
	}
	// The connection goes once the ping went unanswered.
	p.h2.mu.Lock()
	first := p.h2.conn
	p.h2.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for first.usable() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if first.usable() {
		t.Fatal("the stalled connection is still used")
	}
	if err := p.bind(t.Context(), "ns", "p", "uid", "n1", nil); err != nil {
		t.Fatalf("after the stalled connection: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"headers", "reset CANCEL", "ping"}; fmt.Sprint(seen) != fmt.Sprint(want) || f.conns.Load() != 2 {
		t.Errorf("the stalled connection saw %q over %d connections, want %q over 2", seen, f.conns.Load(), want)
	}
	if got := events.String(); got != "dialed stalled dialed" {
		t.Errorf("connection events %q, want dialed stalled dialed", got)
	}
}

// SETTINGS whose values HTTP/2 forbids (a frame size under 16 KiB) end
// the connection: the Binding fails with the protocol error, and no
// stream was opened under them.
func TestH2BinderRefusesInvalidSettings(t *testing.T) {
	checkLeaksAtCleanup(t)
	var streams atomic.Int32
	_, cfg := newFakeH2(t, func(_ int, fr http2.Frame, w *fakeH2Writer) {
		if h, ok := fr.(*http2.MetaHeadersFrame); ok {
			streams.Add(1)
			w.answer(h.StreamID, http.StatusCreated)
		}
	}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1})
	p := h2TestPoster(t, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, _, err := p.h2.bind(ctx, "ns", "p", []byte("body"))
	var ce http2.ConnectionError
	if !errors.As(err, &ce) || http2.ErrCode(ce) != http2.ErrCodeProtocol {
		t.Errorf("a server's frame size of 1: %v, want a protocol error", err)
	}
	if n := streams.Load(); n != 0 {
		t.Errorf("%d streams opened under invalid settings", n)
	}
}

// The binder is used only where it speaks for the client as client-go's
// transport would.
func TestNewH2BinderOnlyWhereItSpeaksAsClientGo(t *testing.T) {
	base := url.URL{Scheme: "https", Host: "127.0.0.1:6443", Path: "/api/v1"}
	for _, tc := range []struct {
		name string
		cfg  func(*rest.Config)
		base url.URL
		want bool
	}{
		{"a token", func(*rest.Config) {}, base, true},
		{"a token file", func(c *rest.Config) { c.BearerToken, c.BearerTokenFile = "", "/var/run/token" }, base, true},
		{"basic", func(c *rest.Config) { c.BearerToken, c.Username, c.Password = "", "u", "p" }, base, true},
		{"plain HTTP", func(*rest.Config) {}, url.URL{Scheme: "http", Host: "127.0.0.1:8080", Path: "/api/v1"}, false},
		{"exec", func(c *rest.Config) { c.ExecProvider = &clientcmdapi.ExecConfig{Command: "x"} }, base, false},
		{"impersonation", func(c *rest.Config) { c.Impersonate.UserName = "alice" }, base, false},
		{"certificate files", func(c *rest.Config) { c.CertFile, c.KeyFile = "/c.crt", "/c.key" }, base, false},
		{"wrapped transport", func(c *rest.Config) {
			c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return rt }
		}, base, false},
		{"a proxy", func(c *rest.Config) { c.Proxy = http.ProxyFromEnvironment }, base, false},
		{"an auth provider", func(c *rest.Config) { c.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"} }, base, false},
		{"a custom transport", func(c *rest.Config) { c.Transport = http.DefaultTransport }, base, false},
		{"content settings", func(c *rest.Config) { c.DisableCompression = true; c.ContentType = "x" }, base, true},
		{"a next-protocol list", func(c *rest.Config) { c.NextProtos = []string{"h2"} }, base, true},
		{"a field off the allow-list", func(c *rest.Config) { c.AuthConfigPersister = noPersister{} }, base, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &rest.Config{Host: "https://" + base.Host, BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
			tc.cfg(c)
			b, why := newH2Binder(c, tc.base)
			if got := b != nil; got != tc.want || got == (why != "") {
				t.Errorf("binder made: %v (why not: %q), want %v", got, why, tc.want)
			}
		})
	}
	t.Run("DISABLE_HTTP2", func(t *testing.T) {
		t.Setenv("DISABLE_HTTP2", "true")
		c := &rest.Config{Host: "https://" + base.Host, BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
		if b, why := newH2Binder(c, base); b != nil || !strings.Contains(why, "DISABLE_HTTP2") {
			t.Errorf("with DISABLE_HTTP2 set (client-go's transport then speaks HTTP/1.1): binder %v, why not %q", b != nil, why)
		}
	})
	t.Run("HTTP/2 health-check knobs", func(t *testing.T) {
		t.Setenv("HTTP2_READ_IDLE_TIMEOUT_SECONDS", "12")
		t.Setenv("HTTP2_PING_TIMEOUT_SECONDS", "nope")
		c := &rest.Config{Host: "https://" + base.Host, BearerToken: "tok", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
		b, _ := newH2Binder(c, base)
		if b == nil || b.stallAfter != 12*time.Second || b.pingWait != h2PingWait {
			t.Errorf("binder %+v: want the read-idle time from the environment and the default PING timeout", b)
		}
	})
	t.Run("the environment's proxy", func(t *testing.T) {
		t.Setenv("HTTPS_PROXY", "http://proxy.example:3128")
		t.Setenv("NO_PROXY", "")
		c := &rest.Config{Host: "https://api.example:6443", BearerToken: "tok"}
		if b, _ := newH2Binder(c, url.URL{Scheme: "https", Host: "api.example:6443", Path: "/api/v1"}); b != nil {
			t.Error("a binder made where client-go would go through HTTPS_PROXY")
		}
	})
}

// A token file is read again after a minute, as client-go's is; a failed
// read keeps the last token.
func TestH2CredentialsRereadTheTokenFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		if err := os.WriteFile(file, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first")
	c := &h2Credentials{file: file, static: "Bearer static"}
	t0 := time.Unix(1000, 0)
	if got := c.authorization(t0); got != "Bearer first" {
		t.Fatalf("got %q", got)
	}
	write("second")
	if got := c.authorization(t0.Add(30 * time.Second)); got != "Bearer first" {
		t.Errorf("within the minute: %q, want the token read", got)
	}
	if got := c.authorization(t0.Add(61 * time.Second)); got != "Bearer second" {
		t.Errorf("after the minute: %q, want the new token", got)
	}
	os.Remove(file)
	if got := c.authorization(t0.Add(200 * time.Second)); got != "Bearer second" {
		t.Errorf("the file gone: %q, want the last token", got)
	}
}

// A server that does not offer h2 gets the Binding through the poster's
// own HTTP client, and the binder is not tried again.
func TestH2BinderFallsBackWithoutH2(t *testing.T) {
	checkLeaksAtCleanup(t)
	var protos []string
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Proto)
		mu.Unlock()
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
	}))
	srv.StartTLS() // HTTP/1.1 only
	defer srv.Close()
	cfg := h2TestConfig(srv, srv.Listener.Addr().String())
	p := h2TestPoster(t, cfg)
	hc := srv.Client()
	defer hc.CloseIdleConnections()
	p.hc = hc
	for i := range 2 {
		if err := p.bind(t.Context(), "ns", fmt.Sprintf("p-%d", i), "uid", "n1", nil); err != nil {
			t.Fatalf("binding %d: %v", i, err)
		}
	}
	if !p.h2off.Load() {
		t.Error("the binder is still on after the server offered no h2")
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(protos) != "[HTTP/1.1 HTTP/1.1]" {
		t.Errorf("the server saw %v, want two HTTP/1.1 Bindings", protos)
	}
}

// noPersister is an AuthProviderConfigPersister that keeps nothing.
type noPersister struct{}

func (noPersister) Persist(map[string]string) error { return nil }
