package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store"
)

// Node pools (issue 44 §3): the engine keeps their specs durable (put by
// --node-pools at start, or by an admin: PUT /api/v1/nodepools/NAME,
// hetsched apply); package poolctl reads them each pass and runs them.

// KindNodePool is the store kind of node pool specs.
const KindNodePool = "nodepool"

// poolState is the pools: published under published.mu, staged by the loop
// (nil: deleted).
type poolState struct {
	recs   map[string]*api.NodePool
	staged map[string]*api.NodePool
}

func newPoolState() poolState {
	return poolState{recs: map[string]*api.NodePool{}, staged: map[string]*api.NodePool{}}
}

func (s *poolState) pending() bool { return len(s.staged) > 0 }

func (s *poolState) view(name string) *api.NodePool {
	if p, ok := s.staged[name]; ok {
		return p
	}
	return s.recs[name]
}

// poolCommands are the node pools' commands (put, delete) and their part
// of the loop's step (encode, publish, recover). The Engine embeds it;
// its state is the read model's pools.
type poolCommands struct {
	e *Engine
}

func (pc *poolCommands) encodePools(b *commitBatch) error {
	e := pc.e
	for name, p := range e.pools.staged {
		if p == nil {
			b.recs = append(b.recs, store.Record{Kind: KindNodePool, Key: name})
			continue
		}
		v, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("encode node pool %s: %w", name, err)
		}
		b.recs = append(b.recs, store.Record{Kind: KindNodePool, Key: name, Value: v})
	}
	return nil
}

// publishPools publishes the staged pools (under mu) and clears them.
func (pc *poolCommands) publishPools() {
	e := pc.e
	for name, p := range e.pools.staged {
		if p == nil {
			delete(e.pools.recs, name)
		} else {
			e.pools.recs[name] = p
		}
	}
	clear(e.pools.staged)
}

func (pc *poolCommands) recoverPools(ctx context.Context) error {
	e := pc.e
	return loadJSON(ctx, e.st, KindNodePool, func(key string, p *api.NodePool) error {
		e.pools.recs[key] = p
		return nil
	})
}

// PutNodePool creates or replaces a pool (validated); created says which.
func (pc *poolCommands) PutNodePool(ctx context.Context, p api.NodePool) (created bool, err error) {
	e := pc.e
	if err := p.Validate(); err != nil {
		return false, err
	}
	if err := e.roomForWork(recordOverhead); err != nil {
		return false, err
	}
	err = e.do(ctx, &fnCmd{fn: func(e *Engine, _ time.Time) error {
		old := e.pools.view(p.Name)
		created = old == nil
		if old != nil && sameJSON(*old, p) {
			return nil
		}
		cp := p
		e.pools.staged[p.Name] = &cp
		return nil
	}})
	return created, err
}

// DeleteNodePool forgets a pool: its nodes stay (plain nodes now) until an
// admin releases them.
func (pc *poolCommands) DeleteNodePool(ctx context.Context, name string) error {
	e := pc.e
	return e.do(ctx, &fnCmd{fn: func(e *Engine, _ time.Time) error {
		if e.pools.view(name) == nil {
			return errs.New(errs.NotFound, "name", "no node pool %q", name)
		}
		e.pools.staged[name] = nil
		return nil
	}})
}
