package engine

import (
	"context"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// Node holders (issue 15 §3).
//
// Every node has one holder: the static inventory (--nodes, or an admin's
// upsert; NodeRecord.Agent empty) or the agent that registered it. Its
// holder alone may change it. Contracts:
//   - An agent may register a node that no one holds, that it holds
//     already, or whose holding agent's heartbeats have expired (missed ×
//     interval without one). Any other registration is refused whole with
//     a Conflict naming the holder; nothing of it is applied.
//   - A static upsert of a node an agent holds is refused the same way.
//   - ReleaseNode (admin) frees a node from its holder: the node leaves the
//     cluster (its tasks are re-queued, as for a lost node) and its record
//     is deleted, so the next registration of the name holds it. An agent
//     still running for it will register it again: stop it first.

// holderOf is the agent holding node ("" for the static inventory) and
// whether the node exists. Runs on the loop.
func (e *Engine) holderOf(node string) (agent string, exists bool) {
	if e.staged.currentNode(node) == nil {
		return "", false
	}
	if a, ok := e.staged.holders[node]; ok {
		return a, true
	}
	return e.owner[node], true
}

// mayTake says whether agent may register node now, and if not, who holds
// it. Runs on the loop.
func (e *Engine) mayTake(agent, node string, now time.Time) error {
	holder, exists := e.holderOf(node)
	switch {
	case !exists || holder == agent:
		return nil
	case holder == "":
		return errs.New(errs.Conflict, "name", "node %q is held by the static inventory; an admin frees it with `hetsched node release %s`", node, node)
	}
	deadline := e.sessions.deadline()
	if last, ok := e.live.lastOf(node); ok && now.Sub(last) <= deadline {
		return errs.New(errs.Conflict, "name", "node %q is held by agent %q, whose heartbeats are live (the last %s ago); it moves once they have stopped for %s, or when an admin frees it with `hetsched node release %s`",
			node, holder, now.Sub(last).Round(time.Millisecond), deadline, node)
	}
	e.log.Warn("node moves to another agent: its holder's heartbeats expired", "node", node, "from", holder, "to", agent)
	return nil
}

// mayUpsertStatic refuses a static upsert of a node an agent holds.
func (e *Engine) mayUpsertStatic(node string) error {
	if holder, exists := e.holderOf(node); exists && holder != "" {
		return errs.New(errs.Conflict, "name", "node %q is held by agent %q; an admin frees it first with `hetsched node release %s`", node, holder, node)
	}
	return nil
}

// ReleaseNode frees a node from its holder (see the contracts above) and
// returns who held it ("" for the static inventory).
func (e *Engine) ReleaseNode(ctx context.Context, name string) (string, error) {
	if err := api.ValidateID("name", name); err != nil {
		return "", err
	}
	cmd := &releaseNodeCmd{name: name}
	if err := e.do(ctx, cmd); err != nil {
		return "", err
	}
	return cmd.holder, nil
}

// releaseNodeCmd frees a node from its holder.
type releaseNodeCmd struct {
	answer
	name   string
	holder string // who held it, "" for the static inventory (result)
}

func (c *releaseNodeCmd) run(e *Engine, now time.Time) { c.holder, c.err = e.releaseNode(c.name, now) }

// releaseNode runs on the loop: the node leaves the core and its record
// and holder are dropped (staged as a nil node).
func (e *Engine) releaseNode(name string, now time.Time) (string, error) {
	holder, exists := e.holderOf(name)
	if !exists {
		return "", errs.New(errs.NotFound, "name", "no node %q", name)
	}
	if err := e.c.RemoveNode(now, name); err != nil {
		return "", err
	}
	e.staged.nodes[name] = nil
	e.staged.holders[name] = ""
	e.staged.admin[name] = ""
	e.sessions.release(name)
	e.live.forget(name)
	e.log.Warn("node released by an admin", "node", name, "holder", holder)
	return holder, nil
}

// AgentNodes lists the nodes agent serves now (nil when it is not
// registered).
func (e *Engine) AgentNodes(agent string) []string { return e.sessions.nodesOf(agent) }
