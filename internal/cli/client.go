// Package cli is the command-line client of the HTTP API (API.md "The CLI
// mirrors the API"): submit, get, describe, cancel, cordon, uncordon,
// drain. Every call has a timeout; server errors are printed with their
// code and field.
package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/serverlist"
)

// Client talks to the control plane: one server, or several, tried in
// turn as package serverlist says.
type Client struct {
	// Server names the servers as given ("URL" or "URL1,URL2,...").
	Server string
	Token  string
	HTTP   *http.Client
	tls    *tls.Config      // NewTLSClient's, to explain TLS failures
	list   *serverlist.List // shared by copies
}

// NewClient returns a client with a request timeout; server is one URL
// or several, comma-separated.
func NewClient(server, token string, timeout time.Duration) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	// A server that is cut off fails its dial in seconds, not in the
	// default 30, so that the next server is tried within the request's
	// timeout.
	tr.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
	bases := serverlist.Split(server)
	if len(bases) == 0 {
		bases = []string{""}
	}
	return &Client{Server: strings.Join(bases, ","), Token: token, HTTP: &http.Client{Timeout: timeout, Transport: tr},
		list: serverlist.New(bases)}
}

// dialTimeout bounds a connection attempt to one server.
const dialTimeout = 3 * time.Second

// Servers are the client's server URLs.
func (c *Client) Servers() []string { return c.list.Bases() }

// current is the server asked first.
func (c *Client) current() string { return c.list.Current() }

// roundTrip sends the request newReq makes with hc to the servers in turn
// (serverlist.List.Send).
func (c *Client) roundTrip(hc *http.Client, newReq func(base string) (*http.Request, error)) (*http.Response, error) {
	return c.list.Send(hc, newReq, c.unreachableAt)
}

// NewTLSClient is NewClient for an https:// server with tc (the CA to
// trust, the client's certificate: certs.ClientTLSConfig); HTTP/2 is
// negotiated by ALPN.
func NewTLSClient(server, token string, timeout time.Duration, tc *tls.Config) *Client {
	c := NewClient(server, token, timeout)
	tr := c.HTTP.Transport.(*http.Transport)
	tr.TLSClientConfig = tc
	tr.ForceAttemptHTTP2 = true
	c.tls = tc
	return c
}

// unreachableAt is the error of a request to server that got no answer, with the
// cause of a TLS failure spelled out.
func (c *Client) unreachableAt(server string, err error) error {
	if h := certs.Explain(err, server, c.tls); h != "" {
		return fmt.Errorf("cannot reach %s: %s: %w", server, h, err)
	}
	return fmt.Errorf("cannot reach %s: %w", server, err)
}

// APIError is an error answered by the server.
type APIError struct {
	Status  int
	Code    string
	Field   string
	Message string
}

// Error says each thing once: "field: message (400 invalid_argument)".
// The server's message often starts with its code and field already
// ("invalid_argument: priority: must be 0..3"); those are not repeated.
func (e *APIError) Error() string {
	msg := e.Message
	if e.Code != "" {
		msg = strings.TrimPrefix(msg, e.Code+": ")
	}
	if e.Field != "" && msg != e.Field && !strings.HasPrefix(msg, e.Field+": ") {
		msg = e.Field + ": " + msg
	}
	if e.Code == "http" || e.Code == "" { // not the API's error object
		return fmt.Sprintf("%s (HTTP %d)", msg, e.Status)
	}
	return fmt.Sprintf("%s (%d %s)", msg, e.Status, e.Code)
}

// maxResponse bounds what the client reads of one answer.
const maxResponse = 256 << 20

// Stream copies a GET answer's body to w as it arrives (no size limit:
// logs are long). With follow the client's timeout does not apply: the
// answer lasts as long as the task, and ends when the server closes it or
// ctx is done. Errors come back as *APIError like Do's.
func (c *Client) Stream(ctx context.Context, path string, w io.Writer, follow bool) error {
	hc := *c.HTTP
	if follow {
		hc.Timeout = 0
	}
	resp, err := c.roundTrip(&hc, func(base string) (*http.Request, error) {
		return serverlist.NewRequest(ctx, http.MethodGet, base+path, nil, c.Token)
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return apiError(resp.StatusCode, resp.Body)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// apiError reads an error answer.
func apiError(status int, body io.Reader) error {
	b, _ := io.ReadAll(io.LimitReader(body, 1<<20))
	var e struct {
		Error struct {
			Code, Message, Field string
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
		return &APIError{Status: status, Code: e.Error.Code, Field: e.Error.Field, Message: e.Error.Message}
	}
	msg := strings.TrimSpace(string(b))
	if status == http.StatusBadRequest && strings.Contains(msg, "HTTP request to an HTTPS server") {
		msg += " (use an https:// --server URL)"
	}
	return &APIError{Status: status, Code: "http", Message: msg}
}

// Do sends a request and decodes a JSON answer into out (when non-nil).
func (c *Client) Do(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	resp, err := c.roundTrip(c.HTTP, func(base string) (*http.Request, error) {
		return serverlist.NewRequest(ctx, method, base+path, body, c.Token)
	})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return resp.StatusCode, err
	}
	if resp.StatusCode >= 400 {
		return resp.StatusCode, apiError(resp.StatusCode, bytes.NewReader(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
		}
	}
	return resp.StatusCode, nil
}
