package server

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/metrics"
)

// Limits on hostile and dead clients (issue 15 §7).
//
// An event stream holds a goroutine and a slot until its client leaves: a
// client that stops reading is cut off once one write has waited
// StreamWriteTimeout, and the streams open at once are capped in all and
// per tenant (503 past either). A connection holds a file descriptor: one
// client address may hold at most --max-conns-per-ip; past it a new
// connection is answered 503 and closed.

// Defaults of the limits (Options: 0 means the default, negative none).
const (
	DefaultMaxEventStreams          = 1000
	DefaultMaxEventStreamsPerTenant = 100
	DefaultMaxConnsPerIP            = 4096
	// StreamWriteTimeout is how long one write to an event stream may
	// block before the subscriber is dropped as not reading.
	StreamWriteTimeout = 30 * time.Second
)

// limitOf resolves an Options limit: 0 is def, negative is none (-1).
func limitOf(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return -1
	}
	return v
}

// streamSlots counts open event streams, in all and per owner.
type streamSlots struct {
	mu       sync.Mutex
	max      int // -1: none
	perOwner int
	open     int
	byOwner  map[string]int
	gauge    func(float64)
}

func newStreamSlots(max, perOwner int, m *metrics.Metrics) *streamSlots {
	s := &streamSlots{max: max, perOwner: perOwner, byOwner: map[string]int{}}
	if m != nil {
		s.gauge = m.EventStreams.Set
	}
	return s
}

// take holds a slot for owner, or says why there is none.
func (s *streamSlots) take(owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.max >= 0 && s.open >= s.max {
		return errs.New(errs.Unavailable, "", "the server holds its maximum of %d event streams: retry later", s.max)
	}
	if s.perOwner >= 0 && s.byOwner[owner] >= s.perOwner {
		return errs.New(errs.Unavailable, "", "%s holds its maximum of %d event streams: close one first", owner, s.perOwner)
	}
	s.open++
	s.byOwner[owner]++
	if s.gauge != nil {
		s.gauge(float64(s.open))
	}
	return nil
}

// give returns owner's slot.
func (s *streamSlots) give(owner string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.byOwner[owner]--; s.byOwner[owner] <= 0 {
		delete(s.byOwner, owner)
	}
	if s.gauge != nil {
		s.gauge(float64(s.open))
	}
}

// streamOwner is whom p's streams count against: a tenant, or a role.
func streamOwner(p Principal) string {
	if p.Role == RoleTenant {
		return "tenant " + p.Tenant
	}
	return "role " + p.Role
}

// perIPListener caps the connections open at once from one IP address.
type perIPListener struct {
	net.Listener
	max     int
	mu      sync.Mutex
	open    map[string]int
	refused func()
	// plain: the connections speak plaintext HTTP, so a refusal can be
	// answered; on a TLS port it is only closed.
	plain bool
}

func newPerIPListener(ln net.Listener, max int, m *metrics.Metrics, plain bool) net.Listener {
	if max < 0 {
		return ln
	}
	l := &perIPListener{Listener: ln, max: max, open: map[string]int{}, plain: plain}
	if m != nil {
		c := m.Refused.WithLabelValues("connections_per_ip")
		l.refused = c.Inc
	}
	return l
}

// tooManyConns is written to a connection past the cap, then it is closed.
const tooManyConns = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s"

// Accept returns the next connection within the cap; those past it are
// answered and closed here.
func (l *perIPListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		if l.open[ip] >= l.max {
			l.mu.Unlock()
			l.refuse(c)
			continue
		}
		l.open[ip]++
		l.mu.Unlock()
		return &countedConn{Conn: c, release: func() { l.release(ip) }}, nil
	}
}

func (l *perIPListener) refuse(c net.Conn) {
	if l.refused != nil {
		l.refused()
	}
	if !l.plain {
		_ = c.Close()
		return
	}
	go func() { // never block Accept on a client's window
		body := `{"error":{"code":"unavailable","message":"unavailable: too many connections from this address (the server's --max-conns-per-ip)"}}`
		_ = c.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte(fmt.Sprintf(tooManyConns, len(body), body)))
		_ = c.Close()
	}()
}

func (l *perIPListener) release(ip string) {
	l.mu.Lock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
	l.mu.Unlock()
}

// remoteIP is a connection's peer address without its port.
func remoteIP(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// countedConn gives its slot back once, when closed.
type countedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
