package engine

import (
	"context"
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

// Node commands: upsert (the static inventory's) and state (cordon,
// uncordon, drain). Agents' nodes come and go with their registrations
// (agents.go); any node leaves by release (holders.go).

// upsertNodeCmd adds or replaces a node of the static inventory.
type upsertNodeCmd struct {
	answer
	node *api.Node
}

func (c *upsertNodeCmd) run(e *Engine, now time.Time) {
	if c.err = e.mayUpsertStatic(c.node.Name); c.err != nil {
		return
	}
	if c.err = e.c.UpsertNode(now, c.node); c.err == nil {
		e.staged.nodes[c.node.Name] = c.node
	}
}

// UpsertNode adds or replaces a node.
func (e *Engine) UpsertNode(ctx context.Context, n api.Node) error {
	return e.do(ctx, &upsertNodeCmd{node: &n})
}

// UpsertNodes adds or replaces nodes, applied in their order. They are all
// queued before any answer is awaited, so the loop's group commit writes
// them in as few steps as its step size allows (not one fsync each). Every
// node is tried; it returns the index of the first (by order) that failed
// with its error, or (-1, nil).
func (e *Engine) UpsertNodes(ctx context.Context, nodes []api.Node) (int, error) {
	cmds := make([]*upsertNodeCmd, 0, len(nodes))
	failed, firstErr := -1, error(nil)
	for i := range nodes {
		cmd := &upsertNodeCmd{node: &nodes[i]}
		if err := e.send(ctx, cmd); err != nil {
			failed, firstErr = i, err
			break
		}
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := e.wait(cmd); err != nil && (failed < 0 || i < failed) {
			failed, firstErr = i, err
		}
	}
	return failed, firstErr
}

// nodeStateCmd sets a node's state.
type nodeStateCmd struct {
	answer
	name, state string
}

func (c *nodeStateCmd) run(e *Engine, now time.Time) {
	if c.err = e.c.SetNodeState(now, c.name, c.state); c.err == nil {
		n := *e.staged.currentNode(c.name)
		n.State = c.state
		e.staged.nodes[c.name] = &n
	}
}

// SetNodeState cordons, uncordons, drains or marks a node notready.
func (e *Engine) SetNodeState(ctx context.Context, name, state string) error {
	return e.do(ctx, &nodeStateCmd{name: name, state: state})
}
