package kubewire

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpproxy"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"k8s.io/client-go/rest"
)

// h2Binder posts Bindings over an HTTP/2 connection of its own to the API
// server, writing the frames itself: a Binding is a HEADERS and a DATA
// frame written by the bind worker that asks, gathered with the other
// workers' into the connection's system calls (coalescingConn), and its
// answer is read by one reader goroutine that hands each stream its status
// and body. Through Go's HTTP/2 transport a Binding also started a
// goroutine of its own (8 % of hetsched kube's CPU in bench kube's
// window), went through net/http's client and client-go's round trippers
// (each copies the request), and added its unique :path to the header
// table, evicting an older entry each time (hpack's table upkeep was 4 %).
// Here the :path and content-length are sent never indexed, and the rest
// of the headers come from the table after the first Binding. Measured
// side by side (BENCHMARKS.md, run AE): 6-10 % less CPU per pod.
//
// It is used only where it speaks for the client exactly as client-go
// would (newH2Binder): HTTPS, credentials that are a bearer token (its
// file re-read each minute, as client-go does), a username and password
// or a client certificate given inline, and no proxy, impersonation, exec
// or auth provider plugin, or wrapped transport; the bindPoster does the
// rest.
//
// Obligations, kept where the frames are read and written:
//   - stream ids are taken and their HEADERS written in one order (under
//     wmu), and the header encoder's state is only touched there;
//   - at most the server's SETTINGS_MAX_CONCURRENT_STREAMS streams are
//     open; a Binding waits for a slot (bounded by its context);
//   - a body goes out only within the server's flow-control windows; one
//     larger than a new stream's window, or than a frame, is not sent here
//     (errH2TooBig: the poster sends it);
//   - everything the server sends is read and acknowledged as HTTP/2
//     requires (SETTINGS, PING, the connection's receive window);
//   - a stream the server never processed (above a GOAWAY's last stream,
//     refused, or on a connection that went away before it was written)
//     ends with errH2Unsent and is sent again (on a new connection after
//     a GOAWAY), at most h2SendTries times in all; one that
//     may have been processed ends with errH2Lost (transient: the retry
//     then meets a conflict, "already assigned", if it was);
//   - a Binding that times out resets its stream; when nothing at all was
//     read for h2StallAfter by then, and a PING is not answered within
//     h2PingWait, the connection is closed and the next Binding dials
//     another;
//   - close ends the connection and waits for its reader.
type h2Binder struct {
	target    string // host:port dialed
	authority string
	prefix    string // the escaped path before /namespaces: /api/v1
	userAgent string
	creds     *h2Credentials
	dial      func(ctx context.Context, network, address string) (net.Conn, error)
	tls       *tls.Config
	// plaintext skips TLS: only the tests' in-memory harness sets it
	// (newH2Binder never does).
	plaintext bool
	now       func() time.Time
	// stallAfter and pingWait decide that a connection is dead
	// (h2StallAfter, h2PingWait; shorter in tests).
	stallAfter, pingWait time.Duration
	// observe, when set, counts a connection's events (h2ConnEvents).
	observe func(event string)

	mu      sync.Mutex
	conn    *h2Conn
	dialing chan struct{} // closed when the dial under way ends
	closed  bool
	conns   sync.WaitGroup // the connections' readers
}

var (
	errH2Unsent = errors.New("kube: http2: the binding was not processed (connection going away or refused)")
	errH2Lost   = errors.New("kube: http2: connection lost before the binding's answer")
	errH2TooBig = errors.New("kube: http2: binding larger than the server's window or frame")
	errH2Closed = errors.New("kube: http2: binder closed")
	errH2NoH2   = errors.New("kube: http2: the API server did not offer h2")
)

const (
	// h2InitialMaxStreams is assumed until the server's SETTINGS say.
	h2InitialMaxStreams = 100
	// h2StreamWindow is the receive window a stream is given (an answer
	// larger than that stalls until its Binding times out).
	h2StreamWindow = 1 << 20
	// h2ConnWindow is the connection's receive window, topped up when
	// half of it was used.
	h2ConnWindow = 1 << 30
	// h2MaxBody bounds what is kept of an answer (maxStatusBytes).
	h2MaxBody = maxStatusBytes
	// h2StallAfter and h2PingWait decide that a connection is dead.
	h2StallAfter = 5 * time.Second
	h2PingWait   = 5 * time.Second
	// h2DialTimeout bounds a dial and its TLS handshake.
	h2DialTimeout = 10 * time.Second
	// h2SendTries bounds how often an unsent Binding is sent again.
	h2SendTries = 3
	// h2MaxStreamID: past it, a connection takes no new stream.
	h2MaxStreamID = 1<<31 - 1
)

// h2ConnEvents are what observe is told of a connection.
var h2ConnEvents = []string{"dialed", "dial_failed", "goaway", "stalled", "lost"}

func (b *h2Binder) event(e string) {
	if b.observe != nil {
		b.observe(e)
	}
}

// h2Credentials is the Authorization header a config's credentials make.
type h2Credentials struct {
	static string // "Bearer …" or "Basic …", or "" (a client certificate, or none)
	file   string // a bearer token file, re-read each h2TokenPeriod
	mu     sync.Mutex
	token  string
	readAt time.Time
}

// h2TokenPeriod is how long a token read from a file is used (client-go's
// cached file token source: a minute).
const h2TokenPeriod = time.Minute

func (c *h2Credentials) authorization(now time.Time) string {
	if c.file == "" {
		return c.static
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.token == "" || now.Sub(c.readAt) >= h2TokenPeriod {
		if b, err := os.ReadFile(c.file); err == nil {
			if t := strings.TrimSpace(string(b)); t != "" {
				c.token = t
			}
		}
		c.readAt = now // a failed read keeps the last token for a period
	}
	if c.token == "" {
		return c.static
	}
	return "Bearer " + c.token
}

// newH2Binder returns a binder for cfg posting under base (the core
// group's versioned root, bindPoster.base), or nil and why not when cfg
// asks for what only client-go's transport does (see the type).
func newH2Binder(cfg *rest.Config, base url.URL) (*h2Binder, string) {
	switch {
	case cfg == nil:
		return nil, "no configuration"
	case base.Scheme != "https" || base.Host == "":
		return nil, "the API server is not an https:// address"
	case !h2Speaks(cfg):
		return nil, "the configuration sets " + strings.Join(h2Unknown(cfg), ", ") + ", which only client-go's transport honours"
	}
	// apimachinery's switch against HTTP/2 (its CVEs): client-go's
	// transport then speaks HTTP/1.1, and so does the poster over it.
	if os.Getenv("DISABLE_HTTP2") != "" {
		return nil, "DISABLE_HTTP2 is set"
	}
	// client-go's transport goes through the environment's proxy
	// (net/http's ProxyFromEnvironment reads the same variables, once).
	if p, err := httpproxy.FromEnvironment().ProxyFunc()(&url.URL{Scheme: "https", Host: base.Host}); err != nil || p != nil {
		return nil, "the environment asks for a proxy (HTTPS_PROXY)"
	}
	tc, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, "its TLS configuration: " + err.Error()
	}
	if tc == nil {
		tc = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		tc = tc.Clone()
	}
	// http/1.1 offered too: a server without h2 then says so by choosing
	// it (errH2NoH2), where one offered h2 alone may refuse the handshake.
	tc.NextProtos = []string{http2.NextProtoTLS, "http/1.1"}
	host, port, err := net.SplitHostPort(base.Host)
	if err != nil {
		host, port = base.Host, "443"
	}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	creds := &h2Credentials{file: cfg.BearerTokenFile}
	switch {
	case cfg.BearerToken != "":
		creds.static = "Bearer " + cfg.BearerToken
	case cfg.Username != "" || cfg.Password != "":
		creds.static = "Basic " + base64.StdEncoding.EncodeToString([]byte(cfg.Username+":"+cfg.Password))
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = rest.DefaultKubernetesUserAgent()
	}
	dial := cfg.Dial // GatheringDial where the caller gathers writes
	if dial == nil {
		dial = (&net.Dialer{Timeout: h2DialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	return &h2Binder{
		target: net.JoinHostPort(host, port), authority: base.Host, prefix: base.EscapedPath(),
		userAgent: ua, creds: creds, dial: dial, tls: tc, now: time.Now,
		stallAfter: envSeconds("HTTP2_READ_IDLE_TIMEOUT_SECONDS", h2StallAfter),
		pingWait:   envSeconds("HTTP2_PING_TIMEOUT_SECONDS", h2PingWait),
	}, ""
}

// envSeconds is the environment variable name as whole seconds, as
// apimachinery reads its HTTP/2 health-check knobs (the read-idle time
// before a PING, and the PING's timeout); unset, not a number, or not
// positive: def.
func envSeconds(name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return def
	}
	return time.Duration(n) * time.Second
}

// h2Config and h2TLS are the rest.Config and TLSClientConfig fields the
// binder speaks as client-go's transport does: the address, static
// credentials (a token, a token file it re-reads, basic), the server's
// and the client's TLS material given inline, the user agent, the dialer,
// and the fields that shape no request on the wire. Any other field set
// (an auth or exec provider, impersonation, a proxy, a wrapped or custom
// transport, certificate files client-go redials on rotating, or a field
// a later client-go adds) leaves the Bindings to client-go's transport:
// an allow-list, so that a new credential type cannot slip past.
var (
	h2Config = map[string]bool{"Host": true, "APIPath": true, "ContentConfig": true, "Username": true, "Password": true,
		"BearerToken": true, "BearerTokenFile": true, "TLSClientConfig": true, "UserAgent": true, "DisableCompression": true,
		"QPS": true, "Burst": true, "RateLimiter": true, "WarningHandler": true, "WarningHandlerWithContext": true,
		"Timeout": true, "Dial": true}
	h2TLS = map[string]bool{"Insecure": true, "ServerName": true, "CAFile": true, "CAData": true, "CertData": true, "KeyData": true, "NextProtos": true}
)

// h2Speaks reports whether every field cfg sets is one the binder honours.
func h2Speaks(cfg *rest.Config) bool { return len(h2Unknown(cfg)) == 0 }

// h2Unknown names the fields cfg sets that the binder does not honour.
func h2Unknown(cfg *rest.Config) []string {
	return append(setOutside(reflect.ValueOf(*cfg), h2Config, ""), setOutside(reflect.ValueOf(cfg.TLSClientConfig), h2TLS, "TLSClientConfig.")...)
}

// setOutside names the fields of v (a struct) set outside allowed.
func setOutside(v reflect.Value, allowed map[string]bool, prefix string) []string {
	var out []string
	t := v.Type()
	for i := range t.NumField() {
		if !allowed[t.Field(i).Name] && !v.Field(i).IsZero() {
			out = append(out, prefix+t.Field(i).Name)
		}
	}
	return out
}

// bind posts body, a Binding for pod ns/name, and returns the answer's
// status and body (up to h2MaxBody bytes).
func (b *h2Binder) bind(ctx context.Context, ns, name string, body []byte) (int, []byte, error) {
	path := b.prefix + "/namespaces/" + url.PathEscape(ns) + "/pods/" + url.PathEscape(name) + "/binding"
	var err error
	for range h2SendTries {
		var cc *h2Conn
		if cc, err = b.connection(ctx); err != nil {
			return 0, nil, err
		}
		var st *h2Stream
		if st, err = cc.roundTrip(ctx, path, body); err == nil {
			return st.status, st.body, nil
		}
		if !errors.Is(err, errH2Unsent) || ctx.Err() != nil {
			return 0, nil, err
		}
	}
	return 0, nil, err
}

// connection is the binder's usable connection, dialed when there is none.
func (b *h2Binder) connection(ctx context.Context) (*h2Conn, error) {
	b.mu.Lock()
	for {
		if b.closed {
			b.mu.Unlock()
			return nil, errH2Closed
		}
		if c := b.conn; c != nil {
			if c.usable() {
				b.mu.Unlock()
				return c, nil
			}
			c.retire() // its streams run out; then it closes
		}
		if ch := b.dialing; ch != nil {
			b.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			b.mu.Lock()
			continue
		}
		ch := make(chan struct{})
		b.dialing = ch
		b.mu.Unlock()
		c, err := b.dialConn(ctx)
		if err != nil {
			b.event("dial_failed")
		} else {
			b.event("dialed")
		}
		b.mu.Lock()
		b.dialing = nil
		close(ch)
		if err != nil {
			b.mu.Unlock()
			return nil, err
		}
		if b.closed {
			b.mu.Unlock()
			c.close(errH2Closed)
			return nil, errH2Closed
		}
		b.conn = c
		b.conns.Add(1)
		go func() { defer b.conns.Done(); c.readLoop() }()
	}
}

// close ends the binder's connection and waits for its reader; later
// Bindings fail with errH2Closed.
func (b *h2Binder) close() {
	b.mu.Lock()
	b.closed = true
	c := b.conn
	b.mu.Unlock()
	if c != nil {
		c.close(errH2Closed)
	}
	b.conns.Wait()
}

// dialConn dials the API server, speaks TLS with ALPN h2 and writes the
// client's preface; the reader is not started yet.
func (b *h2Binder) dialConn(ctx context.Context) (*h2Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, h2DialTimeout)
	defer cancel()
	raw, err := b.dial(dctx, "tcp", b.target)
	if err != nil {
		return nil, err
	}
	tc, err := b.handshake(dctx, raw)
	if err != nil {
		return nil, err
	}
	c := &h2Conn{
		b: b, nc: tc, bw: bufio.NewWriterSize(tc, 16<<10), streams: map[uint32]*h2Stream{}, nextID: 1,
		maxStreams: h2InitialMaxStreams, sendWin: 65535, peerStreamWin: 65535, maxFrame: 16384,
	}
	c.cond.L = &c.mu
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(tc, 16<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.lastRead.Store(b.now().UnixNano())
	if d, ok := dctx.Deadline(); ok {
		// A server that takes the connection but reads nothing holds the
		// preface's write no longer than the dial.
		tc.SetWriteDeadline(d)
		defer tc.SetWriteDeadline(time.Time{})
	}
	c.wmu.Lock()
	_, err = c.bw.WriteString(http2.ClientPreface)
	if err == nil {
		err = c.fr.WriteSettings(
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: h2StreamWindow},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: 1 << 20})
	}
	if err == nil {
		err = c.fr.WriteWindowUpdate(0, h2ConnWindow-65535)
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err == nil {
		err = c.firstSettings(dctx)
	}
	if err != nil {
		tc.Close()
		return nil, err
	}
	return c, nil
}

// handshake speaks TLS over raw and checks that the server chose h2 (the
// test build's in-memory pipes speak HTTP/2 without TLS: plaintext).
func (b *h2Binder) handshake(ctx context.Context, raw net.Conn) (net.Conn, error) {
	if b.plaintext {
		return raw, nil
	}
	tc := tls.Client(raw, b.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	if tc.ConnectionState().NegotiatedProtocol != http2.NextProtoTLS {
		tc.Close()
		return nil, errH2NoH2
	}
	return tc, nil
}

// firstSettings reads the server's first frame, its SETTINGS (RFC 9113
// 3.4), and applies them before any stream opens: its stream limit is
// known from the first Binding on.
func (c *h2Conn) firstSettings(ctx context.Context) error {
	if d, ok := ctx.Deadline(); ok {
		c.nc.SetReadDeadline(d)
		defer c.nc.SetReadDeadline(time.Time{})
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return err
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return fmt.Errorf("kube: http2: the server's first frame is %v, not its SETTINGS", f.Header().Type)
	}
	return c.settings(sf)
}

// h2Conn is one HTTP/2 connection of an h2Binder.
type h2Conn struct {
	b    *h2Binder
	nc   net.Conn
	bw   *bufio.Writer
	fr   *http2.Framer // read by readLoop only, written under wmu
	henc *hpack.Encoder
	hbuf bytes.Buffer

	wmu sync.Mutex // the framer's writes, the encoder, stream ids in order

	mu            sync.Mutex
	cond          sync.Cond // a slot or window opened, or the connection failed
	streams       map[uint32]*h2Stream
	reserved      int // slots taken by Bindings not yet written
	nextID        uint32
	maxStreams    int
	sendWin       int64 // the connection's send window
	peerStreamWin int64 // a new stream's send window
	maxFrame      int
	goAway        uint32 // a GOAWAY's last stream id + 1; 0: none
	err           error  // sticky: the connection failed or closed
	recvUnacked   int64
	pinged        bool
	lastRead      atomic.Int64 // unix ns of the last frame read
}

// h2Stream is one Binding's stream.
type h2Stream struct {
	id     uint32
	status int
	body   []byte
	err    error
	done   chan struct{}
}

func (c *h2Conn) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err == nil && c.goAway == 0 && c.nextID < h2MaxStreamID
}

// retire takes no new stream on the connection (its ids ran out, say):
// it closes once its open streams ended.
func (c *h2Conn) retire() {
	c.mu.Lock()
	if c.goAway == 0 {
		c.goAway = h2MaxStreamID
	}
	drained := c.err == nil && len(c.streams) == 0 && c.reserved == 0
	c.mu.Unlock()
	if drained {
		c.close(errH2Unsent)
	}
}

// roundTrip sends one Binding on a new stream and waits for its answer.
func (c *h2Conn) roundTrip(ctx context.Context, path string, body []byte) (*h2Stream, error) {
	auth := c.b.creds.authorization(c.b.now())
	st, maxFrame, err := c.open(ctx, int64(len(body)))
	if err != nil {
		return nil, err
	}
	err = c.writeRequest(st.id, path, auth, body, maxFrame)
	c.wmu.Unlock()
	if err != nil {
		// Nothing of it may have gone out, or all of it: the connection
		// is dropped and the Binding's fate is the retry's to learn.
		c.close(fmt.Errorf("%w: %v", errH2Lost, err))
	}
	select {
	case <-st.done:
		if st.err != nil {
			return nil, st.err
		}
		return st, nil
	case <-ctx.Done():
		c.cancel(st)
		return nil, ctx.Err()
	}
}

// open waits for a stream slot and n bytes of the connection's send
// window, then opens a stream: it returns holding wmu, the stream's id
// taken in order and the stream registered, with the largest frame the
// server reads.
func (c *h2Conn) open(ctx context.Context, n int64) (*h2Stream, int, error) {
	c.mu.Lock()
	if n > c.peerStreamWin || int(n) > c.maxFrame {
		c.mu.Unlock()
		return nil, 0, errH2TooBig
	}
	for {
		stop := context.AfterFunc(ctx, func() { c.mu.Lock(); c.cond.Broadcast(); c.mu.Unlock() })
		for c.err == nil && c.goAway == 0 && ctx.Err() == nil &&
			(len(c.streams)+c.reserved >= c.maxStreams || c.sendWin < n) {
			c.cond.Wait()
		}
		stop()
		switch {
		case c.err != nil || c.goAway != 0:
			c.mu.Unlock()
			return nil, 0, errH2Unsent
		case ctx.Err() != nil:
			c.mu.Unlock()
			return nil, 0, ctx.Err()
		}
		c.reserved++
		c.sendWin -= n
		c.mu.Unlock()

		c.wmu.Lock()
		c.mu.Lock()
		c.reserved--
		if c.err != nil || c.goAway != 0 || c.nextID >= h2MaxStreamID {
			c.sendWin += n
			c.cond.Broadcast()
			c.mu.Unlock()
			c.wmu.Unlock()
			return nil, 0, errH2Unsent
		}
		if len(c.streams) >= c.maxStreams {
			// The server's SETTINGS lowered the limit meanwhile: wait
			// again (a stream over it would be refused, or worse).
			c.sendWin += n
			c.wmu.Unlock()
			continue
		}
		st := &h2Stream{id: c.nextID, done: make(chan struct{})}
		c.nextID += 2
		c.streams[st.id] = st
		maxFrame := c.maxFrame
		c.mu.Unlock()
		return st, maxFrame, nil
	}
}

// writeRequest writes a Binding's HEADERS (and CONTINUATIONs) and its
// DATA, then flushes them together. Called under wmu.
func (c *h2Conn) writeRequest(id uint32, path, auth string, body []byte, maxFrame int) error {
	c.hbuf.Reset()
	c.henc.WriteField(hpack.HeaderField{Name: ":method", Value: http.MethodPost})
	c.henc.WriteField(hpack.HeaderField{Name: ":scheme", Value: "https"})
	c.henc.WriteField(hpack.HeaderField{Name: ":authority", Value: c.b.authority})
	// Unique to the Binding: never indexed, so the table keeps the rest.
	c.henc.WriteField(hpack.HeaderField{Name: ":path", Value: path, Sensitive: true})
	c.henc.WriteField(hpack.HeaderField{Name: "content-type", Value: protobufType})
	c.henc.WriteField(hpack.HeaderField{Name: "accept", Value: protobufType + ", application/json"})
	c.henc.WriteField(hpack.HeaderField{Name: "user-agent", Value: c.b.userAgent})
	if auth != "" {
		c.henc.WriteField(hpack.HeaderField{Name: "authorization", Value: auth})
	}
	c.henc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(len(body)), Sensitive: true})
	block := c.hbuf.Bytes()
	first := true
	for len(block) > 0 || first {
		frag := block[:min(len(block), maxFrame)]
		block = block[len(frag):]
		var err error
		if first {
			err = c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndHeaders: len(block) == 0})
			first = false
		} else {
			err = c.fr.WriteContinuation(id, len(block) == 0, frag)
		}
		if err != nil {
			return err
		}
	}
	if err := c.fr.WriteData(id, true, body); err != nil {
		return err
	}
	return c.bw.Flush()
}

// cancel ends a stream whose Binding gave up: the server is told (a
// reset), and a connection that answers nothing is found out.
func (c *h2Conn) cancel(st *h2Stream) {
	c.mu.Lock()
	_, open := c.streams[st.id]
	if open {
		delete(c.streams, st.id)
		c.cond.Broadcast()
	}
	stalled := c.err == nil && !c.pinged && c.b.now().Sub(time.Unix(0, c.lastRead.Load())) >= c.b.stallAfter
	if stalled {
		c.pinged = true
	}
	c.mu.Unlock()
	if open {
		c.write(func() error { return c.fr.WriteRSTStream(st.id, http2.ErrCodeCancel) })
	}
	if stalled {
		sent := c.b.now().UnixNano()
		c.write(func() error { return c.fr.WritePing(false, [8]byte{'h', 'e', 't', 's', 'c', 'h', 'e', 'd'}) })
		wait := c.b.pingWait
		time.AfterFunc(wait, func() {
			c.mu.Lock()
			open := c.err == nil
			c.mu.Unlock()
			if c.lastRead.Load() < sent && open {
				c.b.event("stalled")
				c.close(fmt.Errorf("%w: no answer to a ping in %v", errH2Lost, wait))
			}
			c.mu.Lock()
			c.pinged = false
			c.mu.Unlock()
		})
	}
}

// write writes one frame and flushes it; a failure drops the connection.
func (c *h2Conn) write(frame func() error) {
	c.wmu.Lock()
	err := frame()
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		c.close(fmt.Errorf("%w: %v", errH2Lost, err))
	}
}

// close fails the connection with err (the first error sticks): every
// open stream ends (errH2Lost, or err when it is errH2Closed) and the
// connection is closed, which ends its reader.
func (c *h2Conn) close(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	streams := c.streams
	c.streams = map[uint32]*h2Stream{}
	c.cond.Broadcast()
	c.mu.Unlock()
	for _, st := range streams {
		st.err = errH2Lost
		if errors.Is(err, errH2Closed) {
			st.err = err
		}
		close(st.done)
	}
	c.nc.Close()
}

// bindH2 is the bindPoster's path through its h2Binder: the encoded
// Binding sent and its answer read as the poster reads one. done is false
// when the poster must send it itself.
func (p *bindPoster) bindH2(ctx context.Context, ns, name string, body []byte) (bool, error) {
	code, answer, err := p.h2.bind(ctx, ns, name, body)
	switch {
	case errors.Is(err, errH2TooBig):
		return false, nil // the poster sends it
	case errors.Is(err, errH2NoH2):
		p.h2off.Store(true)
		return false, nil
	case err != nil:
		return true, err
	case code >= 200 && code < 300:
		return true, nil
	}
	return true, bindFailure(code, name, answer)
}
