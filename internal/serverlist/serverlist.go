// Package serverlist is the client side of a control plane of one or
// several servers (the CLI's and the agents'): any server of a replicated
// control plane answers, a standby passing the request on to the leader,
// so a client tries them in turn. A server that cannot be reached (its
// connection is refused or times out: the request never left) is skipped
// for the next one; after a request that may have reached a server and
// got no answer, the next request starts with the next server; the one
// that answered is asked first next time.
package serverlist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// List is a client's servers and the one it asks first. Safe for
// concurrent use; copies of a client share it by pointer.
type List struct {
	bases []string
	cur   atomic.Int32
}

// New is a list of bases (at least one).
func New(bases []string) *List { return &List{bases: bases} }

// Split reads a --server flag: one URL or several, comma-separated; each
// is trimmed of spaces and a trailing "/", and empty ones are left out.
func Split(servers string) []string {
	var bases []string
	for _, s := range strings.Split(servers, ",") {
		if s = strings.TrimRight(strings.TrimSpace(s), "/"); s != "" {
			bases = append(bases, s)
		}
	}
	return bases
}

// Bases are the servers' base URLs.
func (l *List) Bases() []string { return l.bases }

// Order is the servers from the current one on, each once.
func (l *List) Order() []string {
	n, first := len(l.bases), int(l.cur.Load())
	out := make([]string, n)
	for i := range n {
		out[i] = l.bases[(first+i)%n]
	}
	return out
}

// Answered makes base, which answered a request sent to it alone, the
// server asked first.
func (l *List) Answered(base string) {
	for i, b := range l.bases {
		if b == base {
			l.cur.Store(int32(i))
			return
		}
	}
}

// Current is the server asked first.
func (l *List) Current() string { return l.bases[int(l.cur.Load())%len(l.bases)] }

// Send sends the request newReq makes for a server's base URL with hc,
// trying each server in turn from the current one while the one tried
// cannot be reached; explain words a server's failure.
func (l *List) Send(hc *http.Client, newReq func(base string) (*http.Request, error), explain func(base string, err error) error) (*http.Response, error) {
	n, first := len(l.bases), int(l.cur.Load())
	var msgs []string
	for i := range n {
		k := (first + i) % n
		req, err := newReq(l.bases[k])
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err == nil {
			l.cur.Store(int32(k))
			return resp, nil
		}
		if n == 1 || !neverSent(err) || req.Context().Err() != nil {
			// The request may have reached it: not tried again here, but
			// the next request starts with the next server.
			l.cur.CompareAndSwap(int32(first), int32((k+1)%n))
			return nil, explain(l.bases[k], err)
		}
		msgs = append(msgs, explain(l.bases[k], err).Error())
	}
	return nil, fmt.Errorf("no server answered: %s", strings.Join(msgs, "; "))
}

// neverSent reports whether err is a failure to connect: the request did
// not reach the server, and another may take it.
func neverSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// NewRequest is the request every client of the API sends: method to url
// with the bearer token (none when empty) and, unless body is nil, body as
// JSON.
func NewRequest(ctx context.Context, method, url string, body []byte, token string) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req, nil
}

// Sleep waits d, or until ctx ends (false): the pause of every client's
// retry loop.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
