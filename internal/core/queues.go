package core

import (
	"fmt"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// Queue quotas (first part of the tenants issue): a queue's max caps what
// the placed tasks of the queue and of its descendants hold, per resource.
// A placement that would pass the max of the task's queue or of any
// ancestor does not fit, with the reason "queue team-a max reached:
// nvidia.com/gpu 16/16". Guarantees, borrowing order and fair share come
// later; below its max a queue may use any idle capacity.
//
// Contracts: usage is the sum of the requests of the queue's placed tasks
// (its own and its descendants'), kept by allocate and release; a class
// refused by a max is woken when a task of a queue that hit its max
// releases (wakeAll: rare, only after a refusal).

type queueNode struct {
	name   string
	parent *queueNode
	limits []dimLimit
	used   resource.Vector
	hit    bool // a placement was refused by this queue's max since the last release
}

type dimLimit struct {
	dim int
	max int64
}

// SetQueue adds or updates a queue (its parent first). Unknown resource
// names in the max are interned.
func (c *Core) SetQueue(now time.Time, q *api.Queue) error {
	c.advance(now)
	var parent *queueNode
	if q.Parent != "" && q.Parent != api.RootQueue {
		if parent = c.queueTree[q.Parent]; parent == nil {
			return errs.Invalid("parent", "no queue %q", q.Parent)
		}
	}
	n := c.queueTree[q.Name]
	if n == nil {
		n = &queueNode{name: q.Name}
		c.queueTree[q.Name] = n
	}
	n.parent = parent
	n.limits = n.limits[:0]
	for name, v := range q.Max {
		d, err := c.dims.Intern(name)
		if err != nil {
			return errs.Invalid("max."+string(name), "%v", err)
		}
		n.limits = append(n.limits, dimLimit{d, v})
	}
	// A raised max may let refused classes in.
	c.wakeAll()
	c.schedule()
	return nil
}

// queueCheck reports whether o fits under the max of t's queue and of its
// ancestors.
func (c *Core) queueCheck(t *Task, o *Option) *Status {
	for q := t.queue; q != nil; q = q.parent {
		for _, l := range q.limits {
			if q.used[l.dim]+o.req[l.dim] > l.max {
				q.hit = true
				return NewUnschedulable(fmt.Sprintf("queue %s max reached: %s %s/%s", q.name,
					c.dims.Name(l.dim), c.formatQty(l.dim, q.used[l.dim]), c.formatQty(l.dim, l.max)))
			}
		}
	}
	return nil
}

// overQueueMax reports whether every option of t is over a queue max, so
// that an attempt fails before walking any node.
func (c *Core) overQueueMax(t *Task) bool {
	for oi := range t.cls.opts {
		if c.queueCheck(t, &t.cls.opts[oi]) == nil {
			return false
		}
	}
	return true
}

// queueAdd charges (sign 1) or refunds (sign -1) o's request to t's queue
// and its ancestors; a refund to a queue that refused a placement wakes the
// blocked classes.
func (c *Core) queueAdd(t *Task, o *Option, sign int64) {
	wake := false
	for q := t.queue; q != nil; q = q.parent {
		for i := range o.req {
			q.used[i] += sign * o.req[i]
		}
		if sign < 0 && q.hit {
			q.hit = false
			wake = true
		}
	}
	if wake {
		c.wakeAll()
	}
}

// QueueUsage returns what the placed tasks of a queue (and its
// descendants) hold, by resource.
func (c *Core) QueueUsage(name string) (resource.List, bool) {
	q := c.queueTree[name]
	if q == nil {
		return nil, false
	}
	return c.dims.List(&q.used), true
}
