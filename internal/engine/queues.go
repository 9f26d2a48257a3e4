package engine

import (
	"context"
	"sort"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
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
	case strings.Contains(reason, "nodes fit") || strings.Contains(reason, "insufficient") ||
		strings.Contains(reason, "too small") || strings.Contains(reason, "no node"):
		return WaitResources
	case strings.HasPrefix(reason, "preempted by "):
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
	e.mu.RLock()
	for q, n := range e.blockedQ {
		add(q, WaitDependencies, n)
	}
	e.mu.RUnlock()
	return out
}

// queueViews runs on the loop: the queues tenant may see ("" or default:
// all), by name.
func (e *Engine) queueViews(tenant string) []QueueView {
	all := e.queueView()
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

// QueueViews returns the queues tenant may see with their usage, fair
// share and waiting tasks, computed by the loop.
func (e *Engine) QueueViews(ctx context.Context, tenant string) ([]QueueView, error) {
	cmd := &command{kind: cmdQueueViews, tenant: tenant}
	if err := e.do(ctx, cmd); err != nil {
		return nil, err
	}
	return cmd.queueViews, nil
}
