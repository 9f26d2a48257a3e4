package core

import (
	"cmp"
	"slices"

	"github.com/hetsched/hetsched/internal/api"
)

// Re-classing. A class holds tasks that are interchangeable for
// placement; the labels that placement constraints read are part of it
// (labelSignature). When a required anti-affinity term first reads a
// label key of a scope (constraintIndex.addAntiKeys), the classes of that
// scope made before may hold tasks that it treats apart: they are stale.
// Before the next pass (schedule) they are retired (no task is given them
// again) and their pending tasks move to the classes their labels give
// now; a task that was placed in one and comes back to pending moves when
// it is enqueued. Moving restarts a task's aging, as the end of a
// locality wait does (fireLocality). The keys of a scope only grow and
// each makes its classes stale once: the walk over the classes and their
// queued tasks is paid once per new key, never per placement.

// protoOf is spec as its class keeps it, to make the same class for
// other labels: everything but its id, name, dependencies and labels.
func protoOf(spec *api.Task) *api.Task {
	p := *spec
	p.ID, p.Depends, p.Metadata, p.Name = "", nil, nil, ""
	return &p
}

// stale reports whether cl's signature misses label keys its scope's
// terms read now.
func (cl *class) stale() bool { return cl.sigEpoch != *cl.scopeEpoch }

// classNow is the class t would get now, from cl's prototype and t's
// labels.
func (ci *constraintIndex) classNow(cl *class, t *Task) *class {
	if !cl.stale() {
		return cl
	}
	spec := *cl.proto
	spec.Metadata = t.labels
	nc, err := ci.c.ct.classFor(&spec, t.leaf)
	if err != nil {
		return cl // the prototype made a class once: it does again
	}
	return nc
}

// refreshClass gives t (in no class queue) the classes its labels give
// now, when its class is stale.
func (ci *constraintIndex) refreshClass(t *Task) {
	if !t.cls.stale() {
		return
	}
	if t.locCls != nil {
		wasLoc := t.cls == t.locCls
		t.locCls, t.baseCls = ci.classNow(t.locCls, t), ci.classNow(t.baseCls, t)
		t.cls = t.baseCls
		if wasLoc {
			t.cls = t.locCls
		}
		return
	}
	t.cls = ci.classNow(t.cls, t)
}

// reclassStale retires the stale classes and moves their pending tasks
// (reclass.go's doc); schedule calls it first.
func (ci *constraintIndex) reclassStale() {
	c := ci.c
	if !ci.stale {
		return
	}
	ci.stale = false
	var stale []*class
	for h, list := range c.ct.byHash {
		keep := list[:0]
		for _, cl := range list {
			if cl.stale() {
				stale = append(stale, cl)
			} else {
				keep = append(keep, cl)
			}
		}
		clear(list[len(keep):])
		if len(keep) == 0 {
			delete(c.ct.byHash, h)
		} else {
			c.ct.byHash[h] = keep
		}
	}
	var moving []*Task
	for _, cl := range stale {
		for _, q := range cl.classQueues() {
			if q != nil {
				moving = append(moving, slices.DeleteFunc(slices.Clone(q.tasks), func(t *Task) bool { return t == nil })...)
			}
		}
	}
	// The stale classes came out of a map: the tasks move in the order
	// they came, so that they queue again in one order (determinism).
	slices.SortFunc(moving, func(a, b *Task) int { return cmp.Compare(a.seq, b.seq) })
	for _, j := range c.jb.jobs {
		if g := j.gang; g != nil {
			for _, t := range g.ready {
				ci.refreshClass(t) // gang members wait in no class queue
			}
		}
	}
	for _, t := range moving {
		was := t.cls
		if ci.refreshClass(t); t.cls == was {
			continue
		}
		nc := t.cls
		t.cls = was
		c.unqueue(t)
		t.cls = nc
		t.levelSince = c.now
		c.lv.pushLevel(t)
	}
}
