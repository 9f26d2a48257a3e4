package up

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/agent"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/nodepool"
	"github.com/hetsched/hetsched/internal/resource"
)

// BurstPool is up's node pool (issue 44 §3): nodes of four L4 GPUs
// (declared, simulated), none at first, at most two, added when GPU tasks
// have waited 10 s and removed, drained first, after 30 s idle. Its
// provider is in-process: each node is one more agent in up's process.
func BurstPool() api.NodePool {
	devs := make([]api.Device, 4)
	for i := range devs {
		devs[i] = api.Device{Type: "nvidia.com/gpu", ID: strconv.Itoa(i), Model: "L4", Memory: 24 << 30, Simulated: true}
	}
	return api.NodePool{Name: "gpu-burst", Min: 0, Max: 2, CostPerHour: 4,
		ScaleOutAfter: api.Duration(10 * time.Second), ScaleInAfter: api.Duration(30 * time.Second),
		Template: api.Node{Labels: map[string]string{"gpu.model": "L4"},
			Capacity: resource.List{resource.CPU: 32000, resource.Memory: 128 << 30}, Devices: devs},
		Provider: api.PoolProvider{Exec: &api.ExecPoolProvider{Command: []string{"hetsched-up-in-process-agents"}}}}
}

// inProcessPool starts and stops a pool's nodes as agents in this
// process (the poolctl.Provider of BurstPool).
type inProcessPool struct {
	mu      sync.Mutex
	newOf   func(n api.Node) (*agent.Agent, error) // nil until up's agents run
	ctx     context.Context
	wg      *sync.WaitGroup
	running map[string]func() // node -> stop (returns once its agent has)
	set     *agentSet         // the agents whose metrics up serves
}

func newInProcessPool() *inProcessPool { return &inProcessPool{running: map[string]func(){}} }

// start lets Add start agents: made by newOf, run under ctx, counted in wg.
func (p *inProcessPool) start(ctx context.Context, wg *sync.WaitGroup, newOf func(api.Node) (*agent.Agent, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctx, p.wg, p.newOf = ctx, wg, newOf
}

// Add starts an agent for each node.
func (p *inProcessPool) Add(_ context.Context, pool *api.NodePool, nodes []string, _ string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.newOf == nil {
		return errors.New("up's agents are not running yet")
	}
	for _, name := range nodes {
		if p.running[name] != nil {
			continue
		}
		a, err := p.newOf(nodepool.Template(pool, name))
		if err != nil {
			return fmt.Errorf("agent %s: %w", name, err)
		}
		ctx, cancel := context.WithCancel(p.ctx)
		done := make(chan struct{})
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer close(done)
			_ = a.Run(ctx)
		}()
		p.running[name] = func() { cancel(); <-done }
		if p.set != nil {
			p.set.add(name, a)
		}
	}
	return nil
}

// Remove stops the nodes' agents (a node's tasks were drained first).
func (p *inProcessPool) Remove(_ context.Context, _ *api.NodePool, nodes []string, _ string) error {
	for _, name := range nodes {
		p.mu.Lock()
		stop := p.running[name]
		delete(p.running, name)
		p.mu.Unlock()
		if stop != nil {
			stop()
		}
		if p.set != nil {
			p.set.remove(name)
		}
	}
	return nil
}

// agentWorkDir is where up's agent for node keeps its tasks.
func agentWorkDir(dataDir, node string) string { return filepath.Join(dataDir, "agents", node) }
