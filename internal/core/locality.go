package core

import (
	"maps"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
)

// Locality (delay scheduling, as in Spark and Hadoop): a task naming where
// its data is waits in a class restricted to those nodes (its selector
// plus the locality's node names or labels) for up to its locality wait;
// then it moves to its own class and any node will do. The preference
// applies once per task: after its first placement (or when the wait
// ends) it is spent, so a re-queued task takes any node at once. Waiting
// costs no scan: nodes named by name are found through the node-name
// index, and the move is one heap entry per task.

// locality holds the deadlines of the tasks waiting for their data's
// nodes. The core calls it at named points: setLocality when a task is
// admitted, enterLocality when it becomes pending, fireLocality at each
// Tick, heap.next for NextWakeup.
type locality struct {
	c    *Core
	heap locHeap
}

// setLocality gives t its locality class (called by admit).
func (lo *locality) setLocality(t *Task, spec *api.Task) error {
	c := lo.c
	loc := *spec
	sel := maps.Clone(spec.NodeSelector)
	if sel == nil {
		sel = map[string]string{}
	}
	l := spec.Locality
	if len(l.Nodes) > 0 {
		if _, own := sel[NodeNameLabel]; !own {
			sel[NodeNameLabel] = strings.Join(l.Nodes, "|")
		}
	}
	for k, v := range l.Labels {
		if _, own := sel[k]; !own {
			sel[k] = v
		}
	}
	loc.NodeSelector = sel
	lc, err := c.ct.classFor(&loc, t.leaf)
	if err != nil {
		return err
	}
	if lc == t.cls {
		return nil // the task's own selector already says as much
	}
	t.locCls, t.baseCls = lc, t.cls
	t.locWait = int64(spec.LocalityWait)
	if t.locWait == 0 {
		t.locWait = api.DefaultLocalityWait
	}
	return nil
}

// enterLocality puts a task being enqueued into its locality class while
// the preference is not spent, else into its own class (enqueue calls it).
func (lo *locality) enterLocality(t *Task) {
	c := lo.c
	if t.locDone {
		t.cls = t.baseCls
		return
	}
	t.cls = t.locCls
	lo.heap.push(locEntry{at: c.now + t.locWait, t: t, attempt: t.attempt})
}

// fireLocality moves the tasks whose locality wait ended to their own
// class, keeping their place in time (aging and batching count from their
// enqueue).
func (lo *locality) fireLocality() {
	c := lo.c
	for {
		e, ok := lo.heap.popDue(c.now)
		if !ok {
			return
		}
		t := e.t
		t.locDone = true
		if t.state != Pending || t.attempt != e.attempt || t.cls != t.locCls || t.backoff {
			continue // placed, finished or re-queued since: nothing to move
		}
		if t.gready {
			t.cls = t.baseCls // its gang places it; no class queue to move
			t.gang.dirty = true
			continue
		}
		c.unqueue(t)
		t.cls = t.baseCls
		// It joins the tail of its level's aging list, so its aging
		// restarts now (the list is ordered by levelSince).
		t.levelSince = c.now
		c.lv.pushLevel(t)
	}
}

// locEntry is a task's locality deadline.
type locEntry struct {
	at      int64
	t       *Task
	attempt int32
}

// locHeap is a min-heap of locality deadlines.
type locHeap struct{ h []locEntry }

func (h *locHeap) push(e locEntry) {
	h.h = append(h.h, e)
	for i := len(h.h) - 1; i > 0; {
		p := (i - 1) / 2
		if h.h[p].at <= h.h[i].at {
			break
		}
		h.h[p], h.h[i] = h.h[i], h.h[p]
		i = p
	}
}

func (h *locHeap) next() (int64, bool) {
	if len(h.h) == 0 {
		return 0, false
	}
	return h.h[0].at, true
}

func (h *locHeap) popDue(now int64) (locEntry, bool) {
	if len(h.h) == 0 || h.h[0].at > now {
		return locEntry{}, false
	}
	e := h.h[0]
	last := len(h.h) - 1
	h.h[0] = h.h[last]
	h.h[last] = locEntry{}
	h.h = h.h[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h.h) && h.h[l].at < h.h[m].at {
			m = l
		}
		if r < len(h.h) && h.h[r].at < h.h[m].at {
			m = r
		}
		if m == i {
			break
		}
		h.h[i], h.h[m] = h.h[m], h.h[i]
		i = m
	}
	return e, true
}
