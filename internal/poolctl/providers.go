package poolctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

// DefaultProviderTimeout bounds a provider's call.
const DefaultProviderTimeout = 5 * time.Minute

// maxProviderOutput bounds the output of a command kept for the log.
const maxProviderOutput = 4096

// Request is what a provider is told (the webhook's body; the command's
// environment says the same).
type Request struct {
	Pool     string   `json:"pool"`
	Action   string   `json:"action"` // add or remove
	Nodes    []string `json:"nodes"`
	Request  string   `json:"requestId"`
	Template api.Node `json:"template"`
}

// ExecProvider runs a command per request.
type ExecProvider struct {
	Spec   api.ExecPoolProvider
	Logger *slog.Logger
}

// Add runs the command with HETSCHED_ACTION=add.
func (e *ExecProvider) Add(ctx context.Context, p *api.NodePool, nodes []string, req string) error {
	return e.run(ctx, p, "add", nodes, req)
}

// Remove runs the command with HETSCHED_ACTION=remove.
func (e *ExecProvider) Remove(ctx context.Context, p *api.NodePool, nodes []string, req string) error {
	return e.run(ctx, p, "remove", nodes, req)
}

func (e *ExecProvider) run(ctx context.Context, p *api.NodePool, action string, nodes []string, req string) error {
	timeout := time.Duration(e.Spec.Timeout)
	if timeout <= 0 {
		timeout = DefaultProviderTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tmpl, err := json.Marshal(p.Template)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, e.Spec.Command[0], e.Spec.Command[1:]...)
	cmd.Env = append(os.Environ(), "HETSCHED_POOL="+p.Name, "HETSCHED_ACTION="+action,
		"HETSCHED_NODES="+strings.Join(nodes, " "), "HETSCHED_REQUEST_ID="+req, "HETSCHED_NODE_TEMPLATE="+string(tmpl))
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limited{&out, maxProviderOutput}, &limited{&out, maxProviderOutput}
	err = cmd.Run()
	if e.Logger != nil && out.Len() > 0 {
		e.Logger.Info("node pools: provider output", "pool", p.Name, "action", action, "output", out.String())
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w (%s)", e.Spec.Command[0], action, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// limited writes up to n bytes to w and drops the rest.
type limited struct {
	w *bytes.Buffer
	n int
}

func (l *limited) Write(b []byte) (int, error) {
	if room := l.n - l.w.Len(); room > 0 {
		l.w.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

// WebhookProvider POSTs each request as JSON; a 2xx answer is success.
type WebhookProvider struct {
	spec   api.WebhookPoolProvider
	client *http.Client
}

// NewWebhookProvider makes a provider for spec.
func NewWebhookProvider(spec api.WebhookPoolProvider) *WebhookProvider {
	timeout := time.Duration(spec.Timeout)
	if timeout <= 0 {
		timeout = DefaultProviderTimeout
	}
	return &WebhookProvider{spec: spec, client: &http.Client{Timeout: timeout}}
}

// Add POSTs an add request.
func (w *WebhookProvider) Add(ctx context.Context, p *api.NodePool, nodes []string, req string) error {
	return w.post(ctx, Request{Pool: p.Name, Action: "add", Nodes: nodes, Request: req, Template: p.Template})
}

// Remove POSTs a remove request.
func (w *WebhookProvider) Remove(ctx context.Context, p *api.NodePool, nodes []string, req string) error {
	return w.post(ctx, Request{Pool: p.Name, Action: "remove", Nodes: nodes, Request: req, Template: p.Template})
}

func (w *WebhookProvider) post(ctx context.Context, r Request) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.spec.URL, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProviderOutput))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: HTTP %d: %s", w.spec.URL, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
