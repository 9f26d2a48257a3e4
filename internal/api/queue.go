package api

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// RootQueue is the parent of every tenant queue.
const RootQueue = "root"

// Queue is a node of the queue tree root → tenant → sub-queue (API.md
// "--queues"). Max is enforced (a queue's placed tasks, with its
// descendants', never hold more); guarantees, borrowing order, fair share
// and reclaim come with the rest of the tenants issue.
type Queue struct {
	Name       string        `json:"name"`
	Parent     string        `json:"parent,omitempty"`
	Guaranteed resource.List `json:"guaranteed,omitempty"`
	Max        resource.List `json:"max,omitempty"`
	Weight     float64       `json:"weight,omitempty"`
}

// UnmarshalJSON decodes a queue (unknown fields and members given twice
// are errors); an explicit weight of 0 is refused, where an absent weight
// means 1.
func (q *Queue) UnmarshalJSON(b []byte) error {
	type plain Queue
	var w struct {
		plain
		Weight *float64 `json:"weight"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return err
	}
	if w.Weight != nil && *w.Weight == 0 {
		return errs.Invalid("weight", "a weight of 0 would never be served: give a positive number, or omit it for 1")
	}
	*q = Queue(w.plain)
	if w.Weight != nil {
		q.Weight = *w.Weight
	}
	return CheckDuplicates(b, q)
}

// MaxQueueDepth bounds the tree (root → tenant → sub-queues).
const MaxQueueDepth = 8

// Validate checks one queue on its own; ValidateQueueTree checks it against
// the others.
func (q *Queue) Validate() error {
	if err := ValidateID("name", q.Name); err != nil {
		return err
	}
	if q.Name == RootQueue {
		return errs.Invalid("name", "%q is the implicit root", RootQueue)
	}
	if q.Parent != "" {
		if err := ValidateID("parent", q.Parent); err != nil {
			return err
		}
		if q.Parent == q.Name {
			return errs.Invalid("parent", "a queue cannot be its own parent")
		}
	}
	if q.Weight < 0 || q.Weight > 1e6 || q.Weight != q.Weight {
		return errs.Invalid("weight", "must be a positive number up to 1e6 (0 or absent means 1), got %v", q.Weight)
	}
	for _, n := range sortedNames(q.Guaranteed) {
		if q.Guaranteed[n] < 0 {
			return errs.Invalid("guaranteed."+string(n), "must not be negative")
		}
	}
	for _, n := range sortedNames(q.Max) {
		if q.Max[n] < 0 {
			return errs.Invalid("max."+string(n), "must not be negative")
		}
	}
	for _, n := range sortedNames(q.Guaranteed) {
		if m, ok := q.Max[n]; ok && m < q.Guaranteed[n] {
			return errs.Invalid("max."+string(n), "%s is below the guarantee %s", n.Format(m), n.Format(q.Guaranteed[n]))
		}
	}
	return nil
}

// ParentOrRoot returns the parent, root when unset.
func (q *Queue) ParentOrRoot() string {
	if q.Parent == "" {
		return RootQueue
	}
	return q.Parent
}

// ValidateQueueTree checks q as it would replace (or join) queues: its
// parent exists, there is no cycle, the tree is not too deep, and the
// guarantees of every parent's children fit in the parent's guarantee.
func ValidateQueueTree(q *Queue, queues map[string]*Queue) error {
	all := make(map[string]*Queue, len(queues)+1)
	for k, v := range queues {
		all[k] = v
	}
	all[q.Name] = q
	if p := q.ParentOrRoot(); p != RootQueue && all[p] == nil {
		return errs.Invalid("parent", "no queue %q", p)
	}
	depth := 0
	for cur := q; cur != nil; {
		p := cur.ParentOrRoot()
		if p == RootQueue {
			break
		}
		if depth++; depth > MaxQueueDepth {
			return errs.Invalid("parent", "the queue tree is deeper than %d or has a cycle", MaxQueueDepth)
		}
		cur = all[p]
	}
	// Children's guarantees within each parent's (for the parents touched).
	for _, parent := range []string{q.Name, q.ParentOrRoot()} {
		pq := all[parent]
		if pq == nil || len(pq.Guaranteed) == 0 {
			continue
		}
		sum := resource.List{}
		for _, c := range all {
			if c.ParentOrRoot() == parent {
				for n, v := range c.Guaranteed {
					sum[n] += v
				}
			}
		}
		for _, n := range sortedNames(sum) {
			if g := pq.Guaranteed[n]; sum[n] > g {
				field := "guaranteed." + string(n)
				return errs.Invalid(field, "children of %s are guaranteed %s of %s, more than its %s", parent, n.Format(sum[n]), n, n.Format(g))
			}
		}
	}
	return nil
}

// QueueOwner returns the tenant a queue belongs to: the child of root it
// descends from.
func QueueOwner(name string, queues map[string]*Queue) string {
	cur := name
	for i := 0; i <= MaxQueueDepth; i++ {
		q := queues[cur]
		if q == nil || q.ParentOrRoot() == RootQueue {
			return cur
		}
		cur = q.ParentOrRoot()
	}
	return fmt.Sprint(cur)
}
