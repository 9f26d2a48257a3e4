// Package h2raw is an HTTP/2 client over cleartext (h2c, prior knowledge)
// that holds very many concurrent requests without a goroutine per
// request: a connection has one reader goroutine, and callers write
// requests from their own goroutine. It exists to put a million waiting
// POST /api/v1/schedule requests on one server from one client process,
// where Go's http.Client would park a goroutine (and its buffers) per
// request.
//
// Contracts:
//   - Each request gets exactly one Response through the OnResponse
//     callback: the server's answer, or an error (stream reset, GOAWAY,
//     connection failure, Close). OnResponse runs on the reader goroutine
//     and must not block for long.
//   - Post respects the server's SETTINGS_MAX_CONCURRENT_STREAMS and the
//     connection's send window; it blocks (after flushing what it wrote)
//     until both allow the request, or the connection fails.
//   - Request bodies must fit in the stream's initial send window (the
//     server's SETTINGS_INITIAL_WINDOW_SIZE, 65,535 bytes by default):
//     the client never waits on a stream window.
//   - Dial has a timeout; reads fail after IdleTimeout without any frame
//     from the server, so a dead server cannot hang a run.
package h2raw

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Response is the outcome of one request.
type Response struct {
	// Tag is the caller's tag given to Post.
	Tag    uint64
	Status int
	Body   []byte
	// Err is set when the request got no complete answer.
	Err error
	// At is when the response's last frame was read.
	At time.Time
}

// Options configures a connection.
type Options struct {
	// DialTimeout bounds connecting and the settings exchange (default 10s).
	DialTimeout time.Duration
	// IdleTimeout fails the connection when no frame arrives for this
	// long (default 15m). Waiting requests do not make the server send
	// frames, so it must exceed the longest expected wait.
	IdleTimeout time.Duration
	// LocalAddr, when set, is the source address to dial from.
	LocalAddr *net.TCPAddr
	// OnResponse receives every request's outcome (required).
	OnResponse func(Response)
	// MaxBody bounds a response body (default 1 MiB); longer bodies fail
	// the request.
	MaxBody int
}

type stream struct {
	tag    uint64
	status int
	body   []byte
}

// Conn is one h2c connection.
type Conn struct {
	opt  Options
	nc   net.Conn
	host string

	// wmu guards the write side: the framer's writer, the encoder, the
	// next stream id, and the send-window accounting below.
	wmu      sync.Mutex
	cond     *sync.Cond
	bw       *bufio.Writer
	fr       *http2.Framer
	henc     *hpack.Encoder
	hbuf     bytes.Buffer
	nextID   uint32
	active   int   // streams opened and not yet answered
	peerMax  int   // SETTINGS_MAX_CONCURRENT_STREAMS
	sendWin  int64 // connection send window
	streamIW int64 // the server's initial stream window
	failed   error // set once the connection is dead
	streams  map[uint32]*stream
	unacked  int64 // response bytes consumed since our last WINDOW_UPDATE

	done chan struct{}
}

// recvWindow is the connection and stream receive window we announce.
const recvWindow = 1 << 30

// Dial connects to addr ("127.0.0.1:7070") and exchanges settings.
func Dial(addr string, opt Options) (*Conn, error) {
	if opt.OnResponse == nil {
		return nil, errors.New("h2raw: OnResponse is required")
	}
	if opt.DialTimeout <= 0 {
		opt.DialTimeout = 10 * time.Second
	}
	if opt.IdleTimeout <= 0 {
		opt.IdleTimeout = 15 * time.Minute
	}
	if opt.MaxBody <= 0 {
		opt.MaxBody = 1 << 20
	}
	d := net.Dialer{Timeout: opt.DialTimeout}
	if opt.LocalAddr != nil {
		d.LocalAddr = opt.LocalAddr
	}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &Conn{opt: opt, nc: nc, host: addr, nextID: 1, peerMax: 100, sendWin: 65535, streamIW: 65535,
		streams: make(map[uint32]*stream), done: make(chan struct{})}
	c.cond = sync.NewCond(&c.wmu)
	c.bw = bufio.NewWriterSize(nc, 64<<10)
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, 64<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(64<<10, nil)
	c.fr.MaxHeaderListSize = 64 << 10
	c.henc = hpack.NewEncoder(&c.hbuf)

	_ = nc.SetDeadline(time.Now().Add(opt.DialTimeout))
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		nc.Close()
		return nil, err
	}
	if err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: recvWindow},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20},
	); err != nil {
		nc.Close()
		return nil, err
	}
	if err := c.fr.WriteWindowUpdate(0, recvWindow-65535); err != nil {
		nc.Close()
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	// The server's first frame is its SETTINGS; apply it before any
	// request so the stream limit is known.
	f, err := c.fr.ReadFrame()
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("h2raw: reading the server's settings: %w", err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		nc.Close()
		return nil, fmt.Errorf("h2raw: the server's first frame is %v, not SETTINGS", f.Header().Type)
	}
	c.applySettings(sf)
	if err := c.fr.WriteSettingsAck(); err != nil {
		nc.Close()
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		nc.Close()
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	go c.readLoop()
	return c, nil
}

// MaxStreams is the server's current limit on concurrent streams.
func (c *Conn) MaxStreams() int {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.peerMax
}

// Active is the number of requests sent and not yet answered.
func (c *Conn) Active() int {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.active
}

// applySettings must run with wmu held or before the reader starts.
func (c *Conn) applySettings(sf *http2.SettingsFrame) {
	_ = sf.ForeachSetting(func(s http2.Setting) error {
		switch s.ID {
		case http2.SettingMaxConcurrentStreams:
			c.peerMax = int(s.Val)
		case http2.SettingInitialWindowSize:
			c.streamIW = int64(s.Val)
		}
		return nil
	})
}

// Post sends a POST of body to path with the given extra headers (lower
// case names) and tag. It does not flush unless it has to wait: call
// Flush after a burst. It fails only when the connection has failed.
func (c *Conn) Post(path string, headers [][2]string, body []byte, tag uint64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if int64(len(body)) > c.streamIW {
		return fmt.Errorf("h2raw: body of %d bytes exceeds the stream window %d", len(body), c.streamIW)
	}
	for c.failed == nil && (c.active >= c.peerMax || c.sendWin < int64(len(body))) {
		if err := c.bw.Flush(); err != nil {
			c.failLocked(err)
			break
		}
		c.cond.Wait()
	}
	if c.failed != nil {
		return c.failed
	}
	id := c.nextID
	c.nextID += 2
	c.hbuf.Reset()
	enc := func(k, v string) { _ = c.henc.WriteField(hpack.HeaderField{Name: k, Value: v}) }
	enc(":method", "POST")
	enc(":scheme", "http")
	enc(":authority", c.host)
	enc(":path", path)
	enc("content-type", "application/json")
	enc("content-length", strconv.Itoa(len(body)))
	for _, h := range headers {
		enc(h[0], h[1])
	}
	c.streams[id] = &stream{tag: tag}
	c.active++
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.hbuf.Bytes(), EndHeaders: true, EndStream: len(body) == 0})
	if err == nil && len(body) > 0 {
		err = c.fr.WriteData(id, true, body)
		c.sendWin -= int64(len(body))
	}
	if err != nil {
		c.failLocked(err)
		return err
	}
	return nil
}

// Flush writes out buffered requests.
func (c *Conn) Flush() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.failed != nil {
		return c.failed
	}
	if err := c.bw.Flush(); err != nil {
		c.failLocked(err)
		return err
	}
	return nil
}

// Close fails every outstanding request and closes the connection; it
// waits for the reader to finish.
func (c *Conn) Close() {
	c.wmu.Lock()
	c.failLocked(errors.New("h2raw: connection closed"))
	c.wmu.Unlock()
	<-c.done
}

// failLocked marks the connection dead (first error wins) and wakes
// writers; the reader answers the outstanding streams when it exits.
func (c *Conn) failLocked(err error) {
	if c.failed == nil {
		c.failed = err
		c.nc.Close()
	}
	c.cond.Broadcast()
}

func (c *Conn) readLoop() {
	defer close(c.done)
	var err error
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(c.opt.IdleTimeout))
		var f http2.Frame
		if f, err = c.fr.ReadFrame(); err != nil {
			break
		}
		if err = c.handle(f); err != nil {
			break
		}
	}
	c.wmu.Lock()
	c.failLocked(err)
	failed := c.failed
	rest := c.streams
	c.streams = map[uint32]*stream{}
	c.active = 0
	c.wmu.Unlock()
	now := time.Now()
	for _, s := range rest {
		c.opt.OnResponse(Response{Tag: s.tag, Err: failed, At: now})
	}
}

func (c *Conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		c.wmu.Lock()
		c.applySettings(f)
		err := c.fr.WriteSettingsAck()
		if err == nil {
			err = c.bw.Flush()
		}
		c.cond.Broadcast()
		c.wmu.Unlock()
		return err
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		c.wmu.Lock()
		err := c.fr.WritePing(true, f.Data)
		if err == nil {
			err = c.bw.Flush()
		}
		c.wmu.Unlock()
		return err
	case *http2.WindowUpdateFrame:
		if f.StreamID == 0 {
			c.wmu.Lock()
			c.sendWin += int64(f.Increment)
			c.cond.Broadcast()
			c.wmu.Unlock()
		}
		return nil
	case *http2.MetaHeadersFrame:
		c.wmu.Lock()
		s := c.streams[f.StreamID]
		c.wmu.Unlock()
		if s == nil {
			return nil
		}
		if st := f.PseudoValue("status"); st != "" {
			if n, err := strconv.Atoi(st); err == nil && n >= 200 {
				s.status = n
			}
		}
		if f.StreamEnded() {
			c.finish(f.StreamID, nil)
		}
		return nil
	case *http2.DataFrame:
		n := int64(len(f.Data()))
		c.wmu.Lock()
		s := c.streams[f.StreamID]
		c.unacked += int64(f.Length)
		var err error
		if c.unacked > recvWindow/2 {
			err = c.fr.WriteWindowUpdate(0, uint32(c.unacked))
			if err == nil {
				err = c.bw.Flush()
			}
			c.unacked = 0
		}
		c.wmu.Unlock()
		if err != nil {
			return err
		}
		if s == nil {
			return nil
		}
		if len(s.body)+int(n) > c.opt.MaxBody {
			c.finish(f.StreamID, fmt.Errorf("h2raw: response body over %d bytes", c.opt.MaxBody))
			return nil
		}
		s.body = append(s.body, f.Data()...)
		if f.StreamEnded() {
			c.finish(f.StreamID, nil)
		}
		return nil
	case *http2.RSTStreamFrame:
		c.finish(f.StreamID, fmt.Errorf("h2raw: stream reset by the server: %v", f.ErrCode))
		return nil
	case *http2.GoAwayFrame:
		return fmt.Errorf("h2raw: GOAWAY from the server (%v, last stream %d): %s", f.ErrCode, f.LastStreamID, f.DebugData())
	}
	return nil
}

// finish answers stream id once.
func (c *Conn) finish(id uint32, err error) {
	c.wmu.Lock()
	s := c.streams[id]
	if s != nil {
		delete(c.streams, id)
		c.active--
		c.cond.Broadcast()
	}
	c.wmu.Unlock()
	if s == nil {
		return
	}
	if err == nil && s.status == 0 {
		err = errors.New("h2raw: stream ended without a status")
	}
	c.opt.OnResponse(Response{Tag: s.tag, Status: s.status, Body: s.body, Err: err, At: time.Now()})
}
