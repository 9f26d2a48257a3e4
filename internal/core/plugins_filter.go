package core

import (
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// ResourceTypes is static: the group must have every requested resource
// type at all (whether one node is big enough is checked per node).
type ResourceTypes struct{ dims *resource.Dims }

// Name implements Plugin.
func (ResourceTypes) Name() string { return "ResourceTypes" }

// Filter implements FilterPlugin.
func (p ResourceTypes) Filter(_ *CycleState, _ *Task, o *Option, n *Node) *Status {
	if len(o.unknown) > 0 {
		return NewUnschedulable("no " + string(o.unknown[0].name))
	}
	for i := range o.req {
		if o.req[i] > 0 && n.capacity[i] == 0 {
			return NewUnschedulable("no " + string(p.dims.Name(i)))
		}
	}
	return nil
}

// NodeSelector is static: every selector label must match (a value may
// list alternatives "a|b"). Identity labels (hostnames) are not part of a
// group: the core checks them per node (see Core.identityMatch).
type NodeSelector struct{ identity map[string]bool }

// Name implements Plugin.
func (NodeSelector) Name() string { return "NodeSelector" }

var selectorMismatch = NewUnschedulable("nodeSelector mismatch")

// Filter implements FilterPlugin.
func (p NodeSelector) Filter(_ *CycleState, t *Task, _ *Option, n *Node) *Status {
	if !termsMatch(t.cls.selector, n.labels, p.identity) {
		return selectorMismatch
	}
	return nil
}

// TaintToleration is static: every NoSchedule/NoExecute taint must be
// tolerated.
type TaintToleration struct{}

// Name implements Plugin.
func (TaintToleration) Name() string { return "TaintToleration" }

// Filter implements FilterPlugin.
func (TaintToleration) Filter(_ *CycleState, t *Task, _ *Option, n *Node) *Status {
	for _, taint := range n.taints {
		if taint.Effect == "PreferNoSchedule" {
			continue
		}
		if !tolerates(t.cls.tolerations, taint) {
			return NewUnschedulable("untolerated taint " + taint.String())
		}
	}
	return nil
}

// tolerates reports whether any toleration matches the taint.
func tolerates(tols []api.Toleration, taint api.Taint) bool {
	for _, tol := range tols {
		if tol.Tolerates(taint) {
			return true
		}
	}
	return false
}
