package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hetsched/hetsched/internal/serverlist"
)

// event is one change of GET /api/v1/events (the server's engine.Event).
type event struct {
	Seq    uint64    `json:"seq"`
	Kind   string    `json:"kind"` // task, job or node; resync (made here: see stream.run)
	ID     string    `json:"id"`
	State  string    `json:"state"`
	Node   string    `json:"node"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// kindResync is the event the stream makes when it could not resume
// (the server no longer has the events after its cursor: a restarted
// server): it follows from now, and what was missed must be listed
// again.
const kindResync = "resync"

// Limits of an event stream.
const (
	// maxReconnects is how many connections in a row may fail (or drop
	// before delivering an event) before a watch gives up.
	maxReconnects = 10
	// streamIdle is how long a stream may go without a byte before it is
	// taken for dead (the server writes a keep-alive every 15 s).
	streamIdle = 45 * time.Second
	// maxEventBytes bounds one line, and one event's data, of a stream.
	maxEventBytes = 1 << 20
	// Reconnection delays: the server's retry hint (its default when it
	// sends none), doubled after each failure in a row, within these.
	defaultRetry = 2 * time.Second
	minRetry     = 100 * time.Millisecond
	maxRetry     = 30 * time.Second
)

// stream follows GET /api/v1/events, reconnecting after the last event
// seen when the connection drops.
type stream struct {
	c      *Client
	since  uint64 // the last event seen
	resume bool   // since is set: reconnect with ?since=
	retry  time.Duration
	idle   time.Duration
}

func newStream(c *Client) *stream {
	return &stream{c: c, retry: defaultRetry, idle: streamIdle}
}

// conn is one open stream: its body, and the timer that cancels it when
// it goes idle.
type conn struct {
	resp     *http.Response
	timer    *time.Timer
	cancel   context.CancelFunc
	timedOut atomic.Bool // the timer ended it
}

func (cn *conn) close() {
	cn.timer.Stop()
	cn.cancel()
	cn.resp.Body.Close()
}

// connect opens the stream (from since when resuming, else from now). The
// answer's headers must come within the client's timeout; after them only
// ctx and the idle check end it.
func (s *stream) connect(ctx context.Context) (*conn, error) {
	cctx, cancel := context.WithCancel(ctx)
	path := "/api/v1/events"
	if s.resume {
		path += "?since=" + strconv.FormatUint(s.since, 10)
	}
	headers := s.c.HTTP.Timeout
	if headers <= 0 {
		headers = 30 * time.Second
	}
	cn := &conn{cancel: cancel}
	cn.timer = time.AfterFunc(headers, func() { cn.timedOut.Store(true); cancel() })
	timer := cn.timer
	hc := *s.c.HTTP
	hc.Timeout = 0 // the stream lasts as long as the watch
	resp, err := s.c.roundTrip(&hc, func(base string) (*http.Request, error) {
		req, err := serverlist.NewRequest(cctx, http.MethodGet, base+path, nil, s.c.Token)
		if err == nil {
			req.Header.Set("Accept", "text/event-stream")
		}
		return req, err
	})
	if err != nil {
		timer.Stop()
		cancel()
		if cn.timedOut.Load() {
			return nil, fmt.Errorf("%s: no answer to GET %s within %v", s.c.current(), path, headers)
		}
		return nil, err
	}
	if resp.StatusCode >= 400 {
		timer.Stop()
		defer cancel()
		defer resp.Body.Close()
		return nil, apiError(resp.StatusCode, resp.Body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		timer.Stop()
		cancel()
		resp.Body.Close()
		return nil, fmt.Errorf("unexpected answer from %s: GET %s is %q, not an event stream", s.c.Server, path, ct)
	}
	timer.Reset(s.idle)
	cn.resp = resp
	return cn, nil
}

// run reads first, then reconnects (after the server's retry delay,
// doubled per failure in a row) until ctx ends or maxReconnects
// connections in a row fail; it sends each event to out. A cursor the
// server no longer has (it restarted) is dropped: the stream goes on from
// now after a kindResync event.
func (s *stream) run(ctx context.Context, first *conn, out chan<- event) error {
	cn, failures := first, 0
	var last error
	for {
		if cn != nil {
			start := time.Now()
			got, err := s.read(ctx, cn, out)
			cn.close()
			if ctx.Err() != nil {
				return nil
			}
			if got > 0 || time.Since(start) > time.Minute {
				failures = 0
			}
			switch {
			case cn.timedOut.Load():
				last = fmt.Errorf("nothing came for %v", s.idle)
			case err == nil:
				last = errors.New("the server closed the stream")
			default:
				last = err
			}
		}
		failures++
		if failures > maxReconnects {
			return fmt.Errorf("the event stream of %s failed %d times in a row; the last: %w", s.c.Server, maxReconnects, last)
		}
		if !serverlist.Sleep(ctx, min(s.retry<<min(failures-1, 8), maxRetry)) {
			return nil
		}
		var err error
		cn, err = s.connect(ctx)
		if err != nil && s.resume && refusedSince(err) {
			s.resume = false
			if cn, err = s.connect(ctx); err == nil && !sendEvent(ctx, out, event{Kind: kindResync}) {
				cn.close()
				return nil
			}
		}
		if err != nil {
			cn, last = nil, err
		}
	}
}

// refusedSince reports whether err is the server's refusal of a since
// (400 on field since: events before it are no longer kept).
func refusedSince(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == http.StatusBadRequest && ae.Field == "since"
}

func sendEvent(ctx context.Context, out chan<- event, ev event) bool {
	select {
	case out <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

// read parses Server-Sent Events from cn until it ends, sending each to
// out; it returns how many it sent. Lines and events are bounded by
// maxEventBytes.
func (s *stream) read(ctx context.Context, cn *conn, out chan<- event) (int, error) {
	sc := bufio.NewScanner(cn.resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxEventBytes)
	var id string
	var data strings.Builder
	got := 0
	for sc.Scan() {
		cn.timer.Reset(s.idle)
		line := sc.Text()
		if line == "" { // the end of an event
			if data.Len() > 0 {
				ev, ok := s.parse(id, data.String())
				if ok && !sendEvent(ctx, out, ev) {
					return got, nil
				}
				if ok {
					got++
				}
			}
			id = ""
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") { // a comment: the keep-alive
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "id":
			id = value
		case "data":
			if data.Len()+len(value) > maxEventBytes {
				return got, fmt.Errorf("an event of more than %d bytes", maxEventBytes)
			}
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(value)
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil {
				s.retry = min(max(time.Duration(ms)*time.Millisecond, minRetry), maxRetry)
			}
		}
	}
	return got, sc.Err()
}

// parse decodes one event's data; the id line, when a number, is its
// place in the stream (where a reconnection resumes).
func (s *stream) parse(id, data string) (event, bool) {
	var ev event
	if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.ID == "" {
		return ev, false
	}
	if n, err := strconv.ParseUint(id, 10, 64); err == nil {
		ev.Seq = n
	}
	if ev.Seq > 0 {
		s.since, s.resume = ev.Seq, true
	}
	return ev, true
}
