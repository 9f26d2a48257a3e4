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
	"net/http"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/certs"
)

// Client talks to one server.
type Client struct {
	Server string
	Token  string
	HTTP   *http.Client
	tls    *tls.Config // NewTLSClient's, to explain TLS failures
}

// NewClient returns a client with a request timeout.
func NewClient(server, token string, timeout time.Duration) *Client {
	return &Client{Server: strings.TrimRight(server, "/"), Token: token, HTTP: &http.Client{Timeout: timeout}}
}

// NewTLSClient is NewClient for an https:// server with tc (the CA to
// trust, the client's certificate: certs.ClientTLSConfig); HTTP/2 is
// negotiated by ALPN.
func NewTLSClient(server, token string, timeout time.Duration, tc *tls.Config) *Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	tr.ForceAttemptHTTP2 = true
	c := NewClient(server, token, timeout)
	c.HTTP.Transport, c.tls = tr, tc
	return c
}

// unreachable is the error of a request that got no answer, with the
// cause of a TLS failure spelled out.
func (c *Client) unreachable(err error) error {
	if h := certs.Explain(err, c.Server, c.tls); h != "" {
		return fmt.Errorf("cannot reach %s: %s: %w", c.Server, h, err)
	}
	return fmt.Errorf("cannot reach %s: %w", c.Server, err)
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Server+path, nil)
	if err != nil {
		return err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := *c.HTTP
	if follow {
		hc.Timeout = 0
	}
	resp, err := hc.Do(req)
	if err != nil {
		return c.unreachable(err)
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
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, c.unreachable(err)
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
