package engine

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

// QueueView is a queue as GET /api/v1/queues shows it: its spec, what its
// placed tasks (and its descendants') hold, its instantaneous fair share of
// the cluster (core.FairShares), and its waiting tasks by reason category
// (WaitCategory; its own tasks only, not its descendants').
type QueueView struct {
	api.Queue
	Usage     resource.List  `json:"usage"`
	FairShare resource.List  `json:"fairShare"`
	Pending   map[string]int `json:"pending"`
}

// Wait categories: why a pending or blocked task waits, for metrics and
// views (the full reason stays on the task).
const (
	WaitScheduling   = "scheduling"   // not tried yet, or between tries
	WaitResources    = "resources"    // no node has room
	WaitQueueMax     = "queue_max"    // its queue (or an ancestor) is at its max
	WaitGang         = "gang"         // waiting for its gang to fit together
	WaitBackoff      = "backoff"      // waiting out a retry's backoff
	WaitPreempted    = "preempted"    // evicted, not tried again yet
	WaitDependencies = "dependencies" // blocked on other tasks
	WaitOther        = "other"
)

// WaitCategory maps a pending task's reason to a category.
func WaitCategory(reason string) string {
	switch {
	case reason == "retry" || strings.HasPrefix(reason, "retry "):
		return WaitBackoff
	case strings.Contains(reason, " max reached: "):
		return WaitQueueMax
	case strings.Contains(reason, "gang"):
		return WaitGang
	case strings.Contains(reason, core.GavelWaitReason):
		return WaitScheduling // placed at the next round, if it fits then
	case strings.Contains(reason, "nodes fit") || strings.Contains(reason, "insufficient") ||
		strings.Contains(reason, "too small") || strings.Contains(reason, "no node"):
		return WaitResources
	case strings.HasPrefix(reason, "preempted by "), strings.HasPrefix(reason, core.SwappedOutPrefix):
		return WaitPreempted
	case reason == "":
		return WaitScheduling
	}
	return WaitOther
}

// waitingByReason counts the waiting tasks per queue ("default" for none)
// and category: the pending from the core, the blocked from the records.
// It runs on the loop.
func (e *Engine) waitingByReason() map[string]map[string]int {
	out := map[string]map[string]int{}
	add := func(q, cat string, n int) {
		if q == "" {
			q = DefaultTenant
		}
		m := out[q]
		if m == nil {
			m = map[string]int{}
			out[q] = m
		}
		m[cat] += n
	}
	e.c.Waiting(func(q, reason string, n int) { add(q, WaitCategory(reason), n) })
	for q, n := range e.waiting.blocked {
		add(q, WaitDependencies, n)
	}
	return out
}

// queueViews runs on the loop: the queues tenant may see ("" or default:
// all), by name.
func (e *Engine) queueViews(tenant string) []QueueView {
	all := e.staged.queueView()
	fair := e.c.FairShares()
	waiting := e.waitingByReason()
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]QueueView, 0, len(all))
	for name, q := range all {
		if tenant != "" && tenant != DefaultTenant && api.QueueOwner(name, all) != tenant {
			continue
		}
		v := QueueView{Queue: *q, Usage: resource.List{}, FairShare: fair[name], Pending: map[string]int{}}
		if u, ok := e.c.QueueUsage(name); ok {
			for r, x := range u {
				if x != 0 {
					v.Usage[r] = x
				}
			}
		}
		if v.FairShare == nil {
			v.FairShare = resource.List{}
		}
		for k, n := range waiting[name] {
			v.Pending[k] = n
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// queueViewsCmd computes the queue views on the loop.
type queueViewsCmd struct {
	answer
	tenant string
	out    []QueueView
}

func (c *queueViewsCmd) run(e *Engine, _ time.Time) { c.out = e.queueViews(c.tenant) }

// QueueViews returns the queues tenant may see with their usage, fair
// share and waiting tasks, computed by the loop.
func (e *Engine) QueueViews(ctx context.Context, tenant string) ([]QueueView, error) {
	cmd := &queueViewsCmd{tenant: tenant}
	if err := e.read(ctx, cmd, viewWait); err != nil {
		return nil, err
	}
	return cmd.out, nil
}

// putQueueCmd creates or replaces a queue on behalf of a tenant.
type putQueueCmd struct {
	answer
	tenant string
	queue  *api.Queue
}

func (c *putQueueCmd) run(e *Engine, now time.Time) { c.err = e.putQueue(c.tenant, c.queue, now) }

// putQueue validates q against the tree and stages it. A tenant other than
// the default may only put queues that descend from its own.
func (e *Engine) putQueue(tenant string, q *api.Queue, now time.Time) error {
	if err := q.Validate(); err != nil {
		return err
	}
	all := e.staged.queueView()
	if err := api.ValidateQueueTree(q, all); err != nil {
		return err
	}
	if scoped(tenant) {
		if err := mayPutQueue(tenant, q, all); err != nil {
			return err
		}
	}
	if err := e.c.SetQueue(now, q); err != nil {
		return err
	}
	e.staged.queues[q.Name] = q
	return nil
}

// PutQueue creates or replaces a queue on behalf of tenant ("" or
// "default": no ownership check).
func (e *Engine) PutQueue(ctx context.Context, tenant string, q api.Queue) error {
	if err := e.roomForWork(0); err != nil {
		return err
	}
	return e.ConfigureQueue(ctx, q, tenant)
}

// ConfigureQueue is PutQueue without the disk's reserve check: for the
// server's own configuration (--queues at start), which must not keep a
// server on a nearly full disk from starting.
func (e *Engine) ConfigureQueue(ctx context.Context, q api.Queue, tenant string) error {
	return e.do(ctx, &putQueueCmd{tenant: tenant, queue: &q})
}
