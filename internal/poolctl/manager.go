// Package poolctl runs the node pools (issue 44 §3) against an engine:
// each period it gives the planner (package nodepool) the pools' nodes
// and the waiting tasks, asks the providers for the nodes it adds, drains
// the nodes it scales in, and has the providers stop the drained ones,
// which the server then forgets. It keeps no durable state: after a
// restart the pools' nodes are the registered nodes with the pool label,
// and a node asked for before the restart counts again when its agent
// registers.
//
// Glossary:
//
//	provider   what starts and stops a pool's machines: a command
//	           (ExecProvider), an HTTPS endpoint (WebhookProvider), or
//	           one given in code (hetsched up's in-process agents)
//	launching  nodes asked for whose agents have not registered; after
//	           RegisterTimeout they are given up (logged)
package poolctl

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/nodepool"
)

// Engine is what the manager needs of the engine.
type Engine interface {
	NodePools() []api.NodePool
	NodeViews(ctx context.Context) ([]engine.NodeView, error)
	List(f engine.Filter, cursor, limit int) (out []*engine.TaskRecord, next int)
	SetNodeState(ctx context.Context, name, state string) error
	ReleaseNode(ctx context.Context, name string) (string, error)
}

// Provider starts and stops a pool's machines. Add returns once the
// machines are asked for: their agents register the named nodes later.
// Remove returns once they are stopped.
type Provider interface {
	Add(ctx context.Context, pool *api.NodePool, nodes []string, request string) error
	Remove(ctx context.Context, pool *api.NodePool, nodes []string, request string) error
}

// Defaults.
const (
	DefaultPeriod          = 5 * time.Second
	DefaultRegisterTimeout = 10 * time.Minute
)

// Config configures a Manager. The pools are the engine's (NodePools),
// read at each pass.
type Config struct {
	Engine  Engine
	Planner *nodepool.Planner
	// Providers, by pool name, replace the pools' own (tests, hetsched
	// up); the others come from each pool's spec.
	Providers       map[string]Provider
	Logger          *slog.Logger
	Now             func() time.Time
	Period          time.Duration
	RegisterTimeout time.Duration
	Gauges          *Gauges
}

// Manager runs the pools.
type Manager struct {
	cfg       Config
	providers map[string]builtProvider
	pools     []api.NodePool // this pass's
	mu        sync.Mutex
	launching map[string]map[string]time.Time // pool -> node -> deadline
	idle      map[string]time.Time            // node -> idle since
	seq       map[string]int                  // pool -> the last node number used
	requests  int
}

// New makes a manager (pools validated).
func New(cfg Config) *Manager {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.RegisterTimeout <= 0 {
		cfg.RegisterTimeout = DefaultRegisterTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, providers: map[string]builtProvider{}, launching: map[string]map[string]time.Time{},
		idle: map[string]time.Time{}, seq: map[string]int{}}
}

// builtProvider is a pool's provider and the spec it was made from.
type builtProvider struct {
	spec api.PoolProvider
	p    Provider
}

// provider is pool p's provider: Config.Providers' for its name, else
// one made from its spec (again when the spec changed).
func (m *Manager) provider(p *api.NodePool) Provider {
	if pr := m.cfg.Providers[p.Name]; pr != nil {
		return pr
	}
	if b, ok := m.providers[p.Name]; ok && sameProvider(b.spec, p.Provider) {
		return b.p
	}
	var pr Provider
	switch {
	case p.Provider.Exec != nil:
		pr = &ExecProvider{Spec: *p.Provider.Exec, Logger: m.cfg.Logger}
	default:
		pr = NewWebhookProvider(*p.Provider.Webhook)
	}
	m.providers[p.Name] = builtProvider{p.Provider, pr}
	return pr
}

func sameProvider(a, b api.PoolProvider) bool {
	switch {
	case a.Exec != nil && b.Exec != nil:
		return slices.Equal(a.Exec.Command, b.Exec.Command) && a.Exec.Timeout == b.Exec.Timeout
	case a.Webhook != nil && b.Webhook != nil:
		return *a.Webhook == *b.Webhook
	}
	return false
}

// Run passes every period until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Period)
	defer t.Stop()
	for {
		if err := m.Pass(ctx, m.cfg.Now()); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("node pools", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Pass plans once at now and carries the plan out.
func (m *Manager) Pass(ctx context.Context, now time.Time) error {
	m.pools = m.cfg.Engine.NodePools()
	if len(m.pools) == 0 {
		return nil
	}
	views, err := m.cfg.Engine.NodeViews(ctx)
	if err != nil {
		return err
	}
	pools := m.poolStates(now, views)
	waiting := m.waiting()
	d := m.cfg.Planner.Plan(now, pools, waiting)
	for _, r := range d.Reasons {
		m.cfg.Logger.Info("node pools: " + r)
	}
	for i := range m.pools {
		p := &m.pools[i]
		if n := d.Add[p.Name]; n > 0 {
			m.add(ctx, now, p, n)
		}
	}
	for _, name := range d.Drain {
		if err := m.cfg.Engine.SetNodeState(ctx, name, api.NodeDraining); err != nil {
			m.cfg.Logger.Warn("node pools: drain", "node", name, "err", err)
			continue
		}
		m.cfg.Gauges.scaled(poolOf(views, name), "in")
	}
	for _, name := range d.Remove {
		m.remove(ctx, poolOf(views, name), name)
	}
	m.cfg.Gauges.set(pools)
	return nil
}

// poolStates are the pools with their registered nodes and those
// launching; it also keeps the nodes' idle times; views are every node.
func (m *Manager) poolStates(now time.Time, views []engine.NodeView) []nodepool.Pool {
	m.mu.Lock()
	defer m.mu.Unlock()
	byPool := map[string][]nodepool.Node{}
	seen := map[string]bool{}
	for _, v := range views {
		pool := v.Labels[api.PoolLabel]
		if pool == "" {
			continue
		}
		seen[v.Name] = true
		if v.Tasks > 0 {
			delete(m.idle, v.Name)
		} else if _, ok := m.idle[v.Name]; !ok {
			m.idle[v.Name] = now
		}
		state := v.State
		if state == "" {
			state = api.NodeReady
		}
		byPool[pool] = append(byPool[pool], nodepool.Node{Name: v.Name, State: state, Tasks: v.Tasks, Idle: m.idle[v.Name]})
		if n, ok := nodeNumber(pool, v.Name); ok && n > m.seq[pool] {
			m.seq[pool] = n
		}
		delete(m.launching[pool], v.Name) // registered
	}
	for name := range m.idle {
		if !seen[name] {
			delete(m.idle, name)
		}
	}
	out := make([]nodepool.Pool, len(m.pools))
	for i, p := range m.pools {
		if m.launching[p.Name] == nil {
			m.launching[p.Name] = map[string]time.Time{}
		}
		for name, deadline := range m.launching[p.Name] {
			if now.After(deadline) {
				m.cfg.Logger.Warn("node pools: a node asked for never registered; given up", "pool", p.Name, "node", name, "waited", m.cfg.RegisterTimeout)
				delete(m.launching[p.Name], name)
			}
		}
		out[i] = nodepool.Pool{Spec: p, Nodes: byPool[p.Name], Launching: len(m.launching[p.Name])}
	}
	return out
}

// waiting are the pending tasks, oldest first, that more nodes could
// help: not those held back by their queue's max.
func (m *Manager) waiting() []nodepool.Waiting {
	recs, _ := m.cfg.Engine.List(engine.Filter{State: "pending"}, 0, nodepool.MaxCandidates)
	out := make([]nodepool.Waiting, 0, len(recs))
	for _, r := range recs {
		if engine.WaitCategory(r.Reason) == engine.WaitQueueMax {
			continue // its queue is at its max: nodes would not help
		}
		out = append(out, nodepool.Waiting{Task: r.Spec, Since: r.Submitted})
	}
	return out
}

// add asks pool's provider for n nodes.
func (m *Manager) add(ctx context.Context, now time.Time, p *api.NodePool, n int) {
	m.mu.Lock()
	names := make([]string, n)
	for i := range names {
		m.seq[p.Name]++
		names[i] = p.Name + "-" + strconv.Itoa(m.seq[p.Name])
	}
	m.requests++
	req := fmt.Sprintf("%s-%d-%d", p.Name, now.Unix(), m.requests)
	m.mu.Unlock()
	if err := m.provider(p).Add(ctx, p, names, req); err != nil {
		m.cfg.Logger.Warn("node pools: the provider could not add nodes", "pool", p.Name, "nodes", names, "request", req, "err", err)
		m.cfg.Gauges.failed(p.Name, "add")
		return
	}
	m.mu.Lock()
	for _, name := range names {
		m.launching[p.Name][name] = now.Add(m.cfg.RegisterTimeout)
	}
	m.mu.Unlock()
	m.cfg.Gauges.scaled(p.Name, "out")
	m.cfg.Logger.Info("node pools: nodes asked for", "pool", p.Name, "nodes", names, "request", req)
}

// remove has the provider stop a drained node, then the server forgets it.
func (m *Manager) remove(ctx context.Context, pool, name string) {
	var p *api.NodePool
	for i := range m.pools {
		if m.pools[i].Name == pool {
			p = &m.pools[i]
		}
	}
	if p == nil {
		return
	}
	m.mu.Lock()
	m.requests++
	req := fmt.Sprintf("%s-remove-%d", pool, m.requests)
	m.mu.Unlock()
	if err := m.provider(p).Remove(ctx, p, []string{name}, req); err != nil {
		m.cfg.Logger.Warn("node pools: the provider could not remove a node", "pool", pool, "node", name, "err", err)
		m.cfg.Gauges.failed(pool, "remove")
		return
	}
	if _, err := m.cfg.Engine.ReleaseNode(ctx, name); err != nil {
		m.cfg.Logger.Warn("node pools: forget a removed node", "node", name, "err", err)
		return
	}
	m.cfg.Logger.Info("node pools: node removed", "pool", pool, "node", name, "request", req)
}

// poolOf is the pool label of node name.
func poolOf(views []engine.NodeView, name string) string {
	for _, v := range views {
		if v.Name == name {
			return v.Labels[api.PoolLabel]
		}
	}
	return ""
}

// nodeNumber is n of a node named <pool>-<n>.
func nodeNumber(pool, name string) (int, bool) {
	s, ok := strings.CutPrefix(name, pool+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}
