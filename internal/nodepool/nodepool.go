// Package nodepool decides how node pools grow and shrink (issue 44 §3),
// as the Cluster Autoscaler and Karpenter do: a pure type, the pools'
// nodes, the waiting tasks and the time in, what to add, drain and remove
// out. Package poolctl carries the decisions out.
//
// Glossary:
//
//	pool        a group of like nodes from one template (api.NodePool)
//	launching   nodes asked of the provider whose agents have not
//	            registered yet: counted as the pool's, so a slow
//	            provider is not asked twice
//	candidate   a task that has waited its pool's scaleOutAfter
//	what-if     a scratch core (the server's own configuration, so the
//	            same filters, with the binpack policy, so the fewest
//	            nodes) holding only template nodes and the candidates: a
//	            pool grows only by the nodes the what-if placed
//	            candidates on, never for tasks its nodes would not take
//	idle        a pool node with no task placed on it
//	drain       the first step of a scale-in: no new placements; once
//	            empty, the node is removed (the provider stops it and
//	            the server forgets it)
package nodepool

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
)

// MaxCandidates bounds the waiting tasks one plan looks at (the oldest).
const MaxCandidates = 2000

// Node is one node of a pool as the planner sees it.
type Node struct {
	Name  string
	State string // api.NodeReady, cordoned, draining, notready
	Tasks int
	// Idle is when the node last had no task placed on it (zero: it has
	// some now).
	Idle time.Time
}

// Pool is a pool and its nodes.
type Pool struct {
	Spec      api.NodePool
	Nodes     []Node
	Launching int
}

// size is the nodes the pool holds or asked for, draining ones aside.
func (p *Pool) size() int {
	n := p.Launching
	for _, x := range p.Nodes {
		if x.State != api.NodeDraining {
			n++
		}
	}
	return n
}

// Waiting is a task that waits, and since when.
type Waiting struct {
	Task  api.Task
	Since time.Time
}

// Decision is a plan.
//
// Obligations: the caller asks each pool's provider for Add[pool] nodes
// (and counts them as launching until their agents register), drains the
// Drain nodes, and has the provider stop the Remove nodes and the server
// forget them. Reasons say why, one line per change (events).
type Decision struct {
	Add     map[string]int
	Drain   []string
	Remove  []string
	Reasons []string
}

// Planner plans with the server's scheduler configuration.
type Planner struct {
	cfg core.Config
}

// New makes a Planner whose what-ifs use cfg (the server's).
func New(cfg core.Config) *Planner { return &Planner{cfg: cfg} }

// Plan decides at now for pools and the waiting tasks (oldest first).
func (p *Planner) Plan(now time.Time, pools []Pool, waiting []Waiting) Decision {
	d := Decision{Add: map[string]int{}}
	grow := p.scaleOut(now, pools, waiting, &d)
	for i := range pools {
		pl := &pools[i]
		if short := pl.Spec.Min - pl.size() - d.Add[pl.Spec.Name]; short > 0 {
			d.Add[pl.Spec.Name] += short
			d.Reasons = append(d.Reasons, fmt.Sprintf("pool %s: %d nodes to reach its min %d", pl.Spec.Name, short, pl.Spec.Min))
		}
		if grow[pl.Spec.Name] {
			continue // never shrink a pool this plan grows
		}
		p.scaleIn(now, pl, &d)
	}
	return d
}

// scaleIn drains the pool's nodes idle for scaleInAfter, down to min, and
// removes the drained ones that are empty.
func (p *Planner) scaleIn(now time.Time, pl *Pool, d *Decision) {
	size := pl.size()
	for _, n := range pl.Nodes {
		switch {
		case n.State == api.NodeDraining && n.Tasks == 0:
			d.Remove = append(d.Remove, n.Name)
			d.Reasons = append(d.Reasons, fmt.Sprintf("pool %s: node %s drained; removing it", pl.Spec.Name, n.Name))
		case n.State != api.NodeDraining && n.Tasks == 0 && !n.Idle.IsZero() && now.Sub(n.Idle) >= pl.Spec.ScaleIn() && size > pl.Spec.Min:
			size--
			d.Drain = append(d.Drain, n.Name)
			d.Reasons = append(d.Reasons, fmt.Sprintf("pool %s: node %s idle for %s; draining it", pl.Spec.Name, n.Name, now.Sub(n.Idle).Round(time.Second)))
		}
	}
}

// scaleOut grows the pools whose nodes would place candidates, cheapest
// per task placed first, and returns the pools it grew.
func (p *Planner) scaleOut(now time.Time, pools []Pool, waiting []Waiting, d *Decision) map[string]bool {
	grown := map[string]bool{}
	left := waiting[:min(len(waiting), MaxCandidates)]
	for {
		best, bestNodes, bestPlaced := -1, 0, []int(nil)
		bestCost := 0.0
		for i := range pools {
			pl := &pools[i]
			room := pl.Spec.Max - pl.size() - d.Add[pl.Spec.Name]
			if room <= 0 || grown[pl.Spec.Name] {
				continue
			}
			cands := candidates(now, left, pl.Spec.ScaleOut())
			if len(cands) == 0 {
				continue
			}
			nodes, placed := p.whatIf(&pl.Spec, min(room, len(cands)), left, cands)
			if len(placed) == 0 {
				continue
			}
			cost := pl.Spec.CostPerHour * float64(nodes) / float64(len(placed))
			if best < 0 || cost < bestCost || cost == bestCost && len(placed) > len(bestPlaced) {
				best, bestNodes, bestPlaced, bestCost = i, nodes, placed, cost
			}
		}
		if best < 0 {
			return grown
		}
		name := pools[best].Spec.Name
		d.Add[name] += bestNodes
		grown[name] = true
		d.Reasons = append(d.Reasons, fmt.Sprintf("pool %s: %d nodes for %d waiting tasks (the oldest %s, waiting %s)",
			name, bestNodes, len(bestPlaced), left[bestPlaced[0]].Task.ID, now.Sub(left[bestPlaced[0]].Since).Round(time.Second)))
		next := make([]Waiting, 0, len(left)-len(bestPlaced))
		placed := map[int]bool{}
		for _, i := range bestPlaced {
			placed[i] = true
		}
		for i, w := range left {
			if !placed[i] {
				next = append(next, w)
			}
		}
		left = next
	}
}

// candidates are the indexes of the tasks that waited at least after.
func candidates(now time.Time, waiting []Waiting, after time.Duration) []int {
	var out []int
	for i, w := range waiting {
		if now.Sub(w.Since) >= after {
			out = append(out, i)
		}
	}
	return out
}

// whatIf places the candidates on k template nodes of pool in a scratch
// core and returns how many of the nodes got a task and which candidates
// were placed (indexes into waiting). A task's inter-task affinity and
// dependencies are left out: the scratch core holds none of the tasks
// they name.
func (p *Planner) whatIf(pool *api.NodePool, k int, waiting []Waiting, cands []int) (nodes int, placed []int) {
	cfg := p.cfg
	// The server's filters, but packed: the fewest nodes that hold the
	// candidates (the Cluster Autoscaler's binpacking estimate).
	cfg.Policy = "binpack"
	c, err := core.New(cfg)
	if err != nil {
		return 0, nil
	}
	t0 := time.Unix(0, 0)
	for i := range k {
		n := Template(pool, pool.Name+"-whatif-"+strconv.Itoa(i))
		if err := c.UpsertNode(t0, &n); err != nil {
			return 0, nil
		}
	}
	byID := map[string]int{}
	for _, i := range cands {
		t := waiting[i].Task
		t.ID = "c" + strconv.Itoa(i)
		t.Queue, t.Depends, t.Affinity = "", nil, nil
		if c.Submit(t0, &t) == nil {
			byID[t.ID] = i
		}
	}
	// Past every tier's batch window: each class is tried.
	c.Tick(t0.Add(time.Minute))
	used := map[string]bool{}
	for _, pl := range c.TakeOutput().Placements {
		if i, ok := byID[pl.Task]; ok {
			placed = append(placed, i)
			used[pl.Node] = true
		}
	}
	slices.SortFunc(placed, func(a, b int) int { return cmp.Compare(a, b) })
	return len(used), placed
}

// Template is the pool's node named name: the template with the pool's
// label.
func Template(pool *api.NodePool, name string) api.Node {
	n := pool.Template
	n.Name = name
	n.Labels = make(map[string]string, len(pool.Template.Labels)+1)
	for k, v := range pool.Template.Labels {
		n.Labels[k] = v
	}
	n.Labels[api.PoolLabel] = pool.Name
	n.Devices = slices.Clone(pool.Template.Devices)
	return n
}
