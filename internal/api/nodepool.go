package api

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
)

// PoolLabel is the label a node pool's nodes carry: the pool's name.
const PoolLabel = "hetsched.io/pool"

// MaxPoolNodes bounds a node pool's max.
const MaxPoolNodes = 10_000

// Node pool defaults, the Cluster Autoscaler's: a task that waited 30 s
// may scale a pool out; a node idle for 10 minutes is scaled in.
const (
	DefaultScaleOutAfter = 30 * time.Second
	DefaultScaleInAfter  = 10 * time.Minute
)

// NodePool is a group of like nodes that grows and shrinks with demand
// (issue 44 §3): a node template, bounds, and the provider that starts
// and stops its machines (and their agents).
type NodePool struct {
	Name string `json:"name"`
	// Template is every node of the pool (its Name is ignored: the nodes
	// are named <pool>-<n>); its labels gain hetsched.io/pool.
	Template      Node         `json:"template"`
	Min           int          `json:"min"`
	Max           int          `json:"max"`
	Provider      PoolProvider `json:"provider"`
	ScaleOutAfter Duration     `json:"scaleOutAfter,omitempty"`
	ScaleInAfter  Duration     `json:"scaleInAfter,omitempty"`
	// CostPerHour is one node's cost: of the pools whose nodes would let
	// waiting tasks run, the cheapest per task placed grows first.
	CostPerHour float64 `json:"costPerHour,omitempty"`
}

// PoolProvider starts and stops a pool's machines: exactly one of Exec
// and Webhook.
type PoolProvider struct {
	// Exec runs Command with HETSCHED_POOL, HETSCHED_ACTION (add or
	// remove), HETSCHED_NODES (the node names, space-separated),
	// HETSCHED_REQUEST_ID and HETSCHED_NODE_TEMPLATE (the template as
	// JSON) in its environment; it exits 0 once the machines are asked
	// for (the server then waits for their agents to register).
	Exec *ExecPoolProvider `json:"exec,omitempty"`
	// Webhook POSTs the same as JSON to URL (HTTPS, or HTTP on loopback).
	Webhook *WebhookPoolProvider `json:"webhook,omitempty"`
}

// ExecPoolProvider is a command.
type ExecPoolProvider struct {
	Command []string `json:"command"`
	Timeout Duration `json:"timeout,omitempty"`
}

// WebhookPoolProvider is an HTTPS endpoint.
type WebhookPoolProvider struct {
	URL     string   `json:"url"`
	Timeout Duration `json:"timeout,omitempty"`
}

// ScaleOut is the pool's scaleOutAfter, or the default.
func (p *NodePool) ScaleOut() time.Duration {
	if p.ScaleOutAfter > 0 {
		return time.Duration(p.ScaleOutAfter)
	}
	return DefaultScaleOutAfter
}

// ScaleIn is the pool's scaleInAfter, or the default.
func (p *NodePool) ScaleIn() time.Duration {
	if p.ScaleInAfter > 0 {
		return time.Duration(p.ScaleInAfter)
	}
	return DefaultScaleInAfter
}

// Validate checks p; an error names the field ("provider.exec.command").
func (p *NodePool) Validate() error {
	if err := ValidateID("name", p.Name); err != nil {
		return err
	}
	t := p.Template
	t.Name = p.Name + "-0"
	if err := t.Validate(); err != nil {
		return errs.Prefix("template", err)
	}
	if v, ok := t.Labels[PoolLabel]; ok && v != p.Name {
		return errs.Invalid("template.labels."+PoolLabel, "is the pool's name (%q), set by the server; got %q", p.Name, v)
	}
	if p.Min < 0 || p.Max < p.Min || p.Max > MaxPoolNodes || p.Max == 0 {
		return errs.Invalid("max", "min and max must satisfy 0 <= min <= max, 1 <= max <= %d; got min %d, max %d", MaxPoolNodes, p.Min, p.Max)
	}
	if p.ScaleOutAfter < 0 || p.ScaleInAfter < 0 {
		return errs.Invalid("scaleInAfter", "durations must not be negative")
	}
	if p.CostPerHour < 0 || math.IsNaN(p.CostPerHour) || math.IsInf(p.CostPerHour, 0) {
		return errs.Invalid("costPerHour", "must be a finite number, 0 or more, got %v", p.CostPerHour)
	}
	pr := p.Provider
	switch {
	case (pr.Exec == nil) == (pr.Webhook == nil):
		return errs.Invalid("provider", "give exactly one of exec and webhook")
	case pr.Exec != nil && len(pr.Exec.Command) == 0:
		return errs.Invalid("provider.exec.command", "must name a command")
	case pr.Exec != nil && pr.Exec.Timeout < 0, pr.Webhook != nil && pr.Webhook.Timeout < 0:
		return errs.Invalid("provider", "timeout must not be negative")
	case pr.Webhook != nil && !webhookURL(pr.Webhook.URL):
		return errs.Invalid("provider.webhook.url", "must be an https URL (http only on loopback), got %q", pr.Webhook.URL)
	}
	return nil
}

// webhookURL reports whether u is https://HOST[...], or http:// to a
// loopback host. (No net/url here: the core, which imports this package,
// does no I/O and links none.)
func webhookURL(u string) bool {
	rest, tls := strings.CutPrefix(u, "https://")
	if !tls {
		var ok bool
		if rest, ok = strings.CutPrefix(u, "http://"); !ok {
			return false
		}
	}
	host, _, _ := strings.Cut(rest, "/")
	if host == "" || strings.ContainsAny(host, " \t\r\n@") {
		return false
	}
	if tls {
		return true
	}
	if h, _, ok := strings.Cut(host, "]"); ok { // [::1]:port
		return h == "[::1"
	}
	h, _, _ := strings.Cut(host, ":")
	return h == "localhost" || h == "127.0.0.1"
}

// ValidatePools checks a pool list: each pool, and no name twice.
func ValidatePools(pools []NodePool) error {
	seen := map[string]bool{}
	for i := range pools {
		f := fmt.Sprintf("nodePools[%d]", i)
		if err := pools[i].Validate(); err != nil {
			return errs.Prefix(f, err)
		}
		if seen[pools[i].Name] {
			return errs.Invalid(f+".name", "pool %q is given twice", pools[i].Name)
		}
		seen[pools[i].Name] = true
	}
	return nil
}
