package core

import (
	"maps"
	"slices"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// UpsertNode adds a node or replaces its labels, taints, capacity, devices
// and state (an empty state is ready: a caller re-registering a cordoned
// node passes its state). Tasks on a replaced node stay where their devices
// still exist and are healthy, the new capacity holds them, the node is not
// notready or draining and no NoExecute taint repels them (unless
// Config.KeepOnNoExecute); the rest are re-queued.
func (c *Core) UpsertNode(now time.Time, spec *api.Node) error {
	c.advance(now)
	if err := spec.Validate(); err != nil {
		return err
	}
	nd := c.dims.Len()
	n, err := buildNode(spec, c.dims)
	if err != nil {
		return err
	}
	if c.dims.Len() != nd {
		c.ct.resolveClasses()
	}
	for i := range n.devices {
		c.deviceDims[n.devices[i].dim] = true
	}
	ver := c.idx.version
	old := c.idx.nodes[spec.Name]
	if old == nil {
		c.idx.nodeSeq++
		n.seq = c.idx.nodeSeq
		n.orderPos = len(c.idx.order)
		c.idx.order = append(c.idx.order, n)
		c.idx.nodes[n.name] = n
		c.idx.attach(n, c.dims)
	} else {
		c.replaceNode(old, n)
	}
	if c.idx.version != ver {
		c.wk.wakeAll()
	}
	if n.group != nil {
		c.wk.wake(n)
	}
	c.schedule()
	return nil
}

// replaceNode moves old's tasks onto n where possible.
func (c *Core) replaceNode(old, n *Node) {
	// Tasks whose devices vanish or turn unhealthy leave first, and so do
	// tasks whose request a changed node would hold differently (a pooled
	// resource that now comes as devices, or the reverse).
	for _, t := range append([]*Task(nil), old.tasks...) {
		o := &t.cls.opts[optIndex(t.chosen)]
		reshaped := false
		for _, dr := range o.devs {
			if (len(old.byDim[dr.dim]) == 0) != (len(n.byDim[dr.dim]) == 0) {
				reshaped = true
			}
		}
		if reshaped {
			c.requeue(t, Pending, "node "+old.name+" now offers its resources differently")
			continue
		}
		for _, s := range t.devs {
			od := &old.devices[s.dev]
			if j := findDevice(n, od.Type, od.ID); j < 0 || !n.devices[j].Healthy {
				c.requeue(t, Pending, "device "+od.Type+" "+od.ID+" removed from node "+old.name)
				break
			}
		}
	}
	keep := append([]*Task(nil), old.tasks...)
	for _, t := range keep {
		c.cons.reserve(t, old, -1) // counted again on n, whose labels may differ
	}
	c.idx.detach(old)
	n.seq, n.orderPos, n.load = old.seq, old.orderPos, old.load
	c.idx.order[n.orderPos] = n
	c.idx.nodes[n.name] = n
	for _, t := range keep {
		for i, s := range t.devs {
			od := &old.devices[s.dev]
			t.devs[i].dev = int32(findDevice(n, od.Type, od.ID))
		}
		o := &t.cls.opts[optIndex(t.chosen)]
		rawAdd(n, t, o, t.devs, 1)
		t.node = n
		t.npos = int32(len(n.tasks))
		n.tasks = append(n.tasks, t)
		c.cons.reserve(t, n, 1)
	}
	old.tasks = nil
	c.idx.attach(n, c.dims)
	if !maps.Equal(old.labels, n.labels) || !slices.Equal(old.taints, n.taints) {
		c.cons.domainsChanged(old)
	}
	// The spec's state applies to the tasks too: notready and draining
	// nodes hold none; a NoExecute taint evicts what does not tolerate it.
	if n.state == api.NodeNotReady || n.state == api.NodeDraining {
		c.evictAll(n, "node "+n.name+" "+n.state)
	}
	for _, taint := range n.taints {
		if taint.Effect != api.NoExecute || c.cfg.KeepOnNoExecute {
			continue
		}
		for _, t := range append([]*Task(nil), n.tasks...) {
			if !tolerates(t.cls.tolerations, taint) {
				c.requeue(t, Pending, "untolerated taint "+taint.String()+" on node "+n.name)
			}
		}
	}
	// A smaller capacity may not hold everything: evict the least important,
	// most recently started tasks until it does.
	for !n.alloc.Fits(&n.capacity) && len(n.tasks) > 0 {
		worst := n.tasks[0]
		for _, t := range n.tasks[1:] {
			if victimBefore(t, worst) {
				worst = t
			}
		}
		c.requeue(worst, Pending, "node "+n.name+" capacity reduced")
	}
}

func findDevice(n *Node, typ, id string) int {
	for i := range n.devices {
		if n.devices[i].ID == id && n.devices[i].Type == typ {
			return i
		}
	}
	return -1
}

// RemoveNode deletes a node; its tasks are re-queued.
func (c *Core) RemoveNode(now time.Time, name string) error {
	c.advance(now)
	n, ok := c.idx.nodes[name]
	if !ok {
		return errs.New(errs.NotFound, "name", "no node %q", name)
	}
	c.evictAll(n, "node "+name+" removed")
	c.cons.domainsChanged(n)
	c.idx.detach(n)
	last := len(c.idx.order) - 1
	c.idx.order[n.orderPos] = c.idx.order[last]
	c.idx.order[n.orderPos].orderPos = n.orderPos
	c.idx.order[last] = nil
	c.idx.order = c.idx.order[:last]
	delete(c.idx.nodes, name)
	c.schedule()
	return nil
}

func (c *Core) evictAll(n *Node, reason string) {
	for len(n.tasks) > 0 {
		c.requeue(n.tasks[len(n.tasks)-1], Pending, reason)
	}
}

// SetNodeState changes a node's state. cordoned stops new placements;
// notready and draining also re-queue the node's tasks; ready resumes.
func (c *Core) SetNodeState(now time.Time, name, state string) error {
	c.advance(now)
	n, ok := c.idx.nodes[name]
	if !ok {
		return errs.New(errs.NotFound, "name", "no node %q", name)
	}
	if state == "" || !api.ValidNodeState(state) {
		return errs.Invalid("state", "must be ready, notready, cordoned or draining, got %q", state)
	}
	if n.state == state {
		return nil
	}
	n.state = state
	switch state {
	case api.NodeReady:
		if n.bucket < 0 && n.group != nil {
			n.group.insert(n)
		}
		c.wk.wake(n)
	default:
		if n.group != nil {
			n.group.remove(n)
		}
		if state == api.NodeNotReady || state == api.NodeDraining {
			c.evictAll(n, "node "+name+" "+state)
		}
	}
	c.schedule()
	return nil
}

// SetDeviceHealth marks one device healthy or not. An unhealthy device
// leaves the node's capacity and its tasks are re-queued.
func (c *Core) SetDeviceHealth(now time.Time, node, typ, id string, healthy bool) error {
	c.advance(now)
	n, ok := c.idx.nodes[node]
	if !ok {
		return errs.New(errs.NotFound, "node", "no node %q", node)
	}
	j := findDevice(n, typ, id)
	if j < 0 {
		return errs.New(errs.NotFound, "device", "node %q has no %s device %q", node, typ, id)
	}
	if n.devices[j].Healthy == healthy {
		return nil
	}
	if !healthy {
		for _, t := range append([]*Task(nil), n.tasks...) {
			for _, s := range t.devs {
				if int(s.dev) == j {
					c.requeue(t, Pending, "device "+typ+" "+id+" on "+node+" unhealthy")
					break
				}
			}
		}
	}
	ver := c.idx.version
	c.idx.detach(n)
	n.devices[j].Healthy = healthy
	n.recomputeCapacity()
	c.idx.attach(n, c.dims)
	if c.idx.version != ver {
		c.wk.wakeAll()
	}
	c.wk.wake(n)
	c.schedule()
	return nil
}
