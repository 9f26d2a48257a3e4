// Package agent is hetsched's node agent: it registers the devices of its
// node(s), heartbeats their usage and health, follows the server's stream
// of assignments and runs or simulates the assigned tasks, reporting their
// outcome.
//
// Contracts:
//   - Level-triggered: after every (re)connection the agent makes its
//     running set equal to the server's snapshot — it kills attempts the
//     server no longer assigns it and starts the ones it lacks — so a lost
//     message or a restart on either side converges.
//   - Fencing: an agent that has not had a heartbeat acknowledged for the
//     server's notready deadline kills its tasks and reports them lost, so
//     a task re-queued elsewhere by the server is not also still running
//     here (a partitioned node stops its work before the server moves it).
//   - Reports are retried until the server answers them (applied or stale)
//     and only then forgotten; every network call has a timeout.
package agent

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/serverlist"
)

// client speaks the agent protocol to the control plane: one server, or
// the servers of a replicated one, tried in turn as package serverlist
// says.
type client struct {
	list  *serverlist.List
	tls   *tls.Config // to explain TLS failures
	token string
	unary *http.Client // bounded calls
	long  *http.Client // the assignment stream (no overall timeout)
}

// newClient speaks to servers (one http:// or https:// URL, or several
// comma-separated) with token, if any; tc, when set, is the TLS of https://
// servers (the CA to trust, the agent's certificate). Over TLS the calls
// and the stream share HTTP/2 connections.
func newClient(servers, token string, tc *tls.Config) (*client, error) {
	bases := serverlist.Split(servers)
	if len(bases) == 0 {
		return nil, errs.Invalid("server", "must be an http(s) URL (or several, comma-separated), got %q", servers)
	}
	for _, base := range bases {
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, errs.Invalid("server", "must be an http(s) URL (or several, comma-separated), got %q", base)
		}
		if tc != nil && u.Scheme != "https" {
			return nil, errs.Invalid("server", "--ca, --cert and --key need an https:// URL, got %q", base)
		}
	}
	tr := &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       tc,
		TLSHandshakeTimeout:   10 * time.Second,
		ForceAttemptHTTP2:     true,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       time.Minute,
	}
	return &client{list: serverlist.New(bases), tls: tc, token: token,
		unary: &http.Client{Transport: tr, Timeout: 30 * time.Second}, long: &http.Client{Transport: tr}}, nil
}

// send sends the request newReq makes with hc to the servers in turn.
func (c *client) send(hc *http.Client, newReq func(base string) (*http.Request, error)) (*http.Response, error) {
	return c.list.Send(hc, newReq, c.explain)
}

// explain puts a TLS failure's cause and flag in front of it.
func (c *client) explain(base string, err error) error {
	if h := certs.Explain(err, base, c.tls); h != "" {
		return fmt.Errorf("%s: %w", h, err)
	}
	return err
}

// apiError is an error answer of the server.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("server answered %d %s: %s", e.Status, e.Code, e.Message)
}

func isNotFound(err error) bool {
	ae, ok := err.(*apiError)
	return ok && ae.Status == http.StatusNotFound
}

func (c *client) do(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return err
		}
	}
	resp, err := c.send(c.unary, func(base string) (*http.Request, error) {
		return c.newRequest(ctx, base, method, path, body)
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return decodeAnswer(resp, out)
}

// newRequest is a request to base with body (JSON; nil for none) and the
// client's credentials.
func (c *client) newRequest(ctx context.Context, base, method, path string, body []byte) (*http.Request, error) {
	return serverlist.NewRequest(ctx, method, base+path, body, c.token)
}

// doAt is do against base alone, decoding the answer into out (nil: none);
// an answer makes base the server asked first.
func (c *client) doAt(ctx context.Context, base, method, path string, body []byte, out any) error {
	req, err := c.newRequest(ctx, base, method, path, body)
	if err != nil {
		return err
	}
	resp, err := c.unary.Do(req)
	if err != nil {
		return c.explain(base, err)
	}
	defer resp.Body.Close()
	c.list.Answered(base)
	return decodeAnswer(resp, out)
}

func decodeAnswer(resp *http.Response, out any) error {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		return &apiError{Status: resp.StatusCode, Code: e.Error.Code, Message: e.Error.Message}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

func (c *client) register(ctx context.Context, reg agentapi.Registration) (*agentapi.RegisterReply, error) {
	var out agentapi.RegisterReply
	if err := c.do(ctx, http.MethodPost, "/api/v1/agents/register", reg, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// hedgedHeartbeat sends one heartbeat to the servers, from the current
// one on, and returns the send time of the first attempt acknowledged: a
// server that does not answer within hedgeAfter (a leader paused or cut
// off holds the request, and so does a standby passing it on) is not
// waited for alone, and one that fails is not waited for at all: the next
// server is asked too, while the earlier attempts may still answer (a
// slow acknowledgment still counts). A server that failed is asked again
// retryAfter later, once every server was asked (a standby that had no
// leader to pass it to may lead a moment later). An attempt a server
// answers "not found" ends it: the agent must register again; so does an
// answer asking it to register (reply.Register), which acknowledges the
// heartbeat. It ends with ctx, and then says why the last attempt failed.
func (c *client) hedgedHeartbeat(ctx context.Context, hedgeAfter, retryAfter time.Duration, agent string, beats []agentapi.Beat) (time.Time, agentapi.HeartbeatReply, error) {
	body, err := json.Marshal(map[string]any{"nodes": beats})
	if err != nil {
		return time.Time{}, agentapi.HeartbeatReply{}, err
	}
	path := "/api/v1/agents/" + url.PathEscape(agent) + "/heartbeat"
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		base  string
		sent  time.Time
		reply agentapi.HeartbeatReply
		err   error
	}
	// queue: the servers never asked, in order, then those that failed.
	all := c.list.Order()
	queue := slices.Clone(all)
	untried := len(queue)
	results := make(chan result, 4*len(queue)+64)
	send := func(base string) {
		go func() {
			sent := time.Now()
			var reply agentapi.HeartbeatReply
			err := c.doAt(ctx, base, http.MethodPost, path, body, &reply)
			select {
			case results <- result{base, sent, reply, err}:
			case <-ctx.Done():
			}
		}()
	}
	ask := func() {
		base := queue[0]
		queue = queue[1:]
		untried = max(untried-1, 0)
		send(base)
	}
	// Once every server was asked and none answered, the hedge asks them
	// again in turn (a standby passing the request to a leader that froze
	// holds it; the next attempt reaches whoever leads by then).
	again := 0
	ask()
	hedge := time.NewTimer(hedgeAfter)
	defer hedge.Stop()
	retry := time.NewTimer(retryAfter)
	retry.Stop()
	defer retry.Stop()
	last := errors.New("no server answered")
	for {
		select {
		case r := <-results:
			if r.err == nil || isNotFound(r.err) {
				return r.sent, r.reply, r.err
			}
			last = r.err
			queue = append(queue, r.base)
			if untried > 0 {
				ask()
			} else {
				retry.Reset(retryAfter)
			}
		case <-hedge.C:
			if untried > 0 {
				ask()
			} else {
				send(all[again%len(all)])
				again++
			}
			hedge.Reset(hedgeAfter)
		case <-retry.C:
			if len(queue) > 0 {
				ask()
			}
		case <-ctx.Done():
			return time.Time{}, agentapi.HeartbeatReply{}, fmt.Errorf("%w (the last answer: %v)", ctx.Err(), last)
		}
	}
}

func (c *client) status(ctx context.Context, agent string, ups []agentapi.StatusUpdate) ([]agentapi.StatusResult, error) {
	var out struct {
		Results []agentapi.StatusResult `json:"results"`
	}
	err := c.do(ctx, http.MethodPost, "/api/v1/agents/"+url.PathEscape(agent)+"/status",
		map[string]any{"updates": ups}, &out)
	return out.Results, err
}

// stream reads the assignment stream, calling fn for each message, until
// ctx ends, the stream breaks or nothing (not even a ping) arrived for
// idle.
func (c *client) stream(ctx context.Context, agent string, gen uint64, idle time.Duration, fn func(*agentapi.AgentMessage)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	path := "/api/v1/agents/" + url.PathEscape(agent) + "/assignments?generation=" + strconv.FormatUint(gen, 10)
	resp, err := c.send(c.long, func(base string) (*http.Request, error) {
		return c.newRequest(ctx, base, http.MethodGet, path, nil)
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return decodeAnswer(resp, nil)
	}
	watchdog := time.AfterFunc(idle, cancel)
	defer watchdog.Stop()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 256<<20)
	for sc.Scan() {
		watchdog.Reset(idle)
		var m agentapi.AgentMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return fmt.Errorf("assignment stream: bad message: %w", err)
		}
		fn(&m)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if ctx.Err() != nil && ctx.Err() != context.Canceled {
		return ctx.Err()
	}
	return io.ErrUnexpectedEOF
}
