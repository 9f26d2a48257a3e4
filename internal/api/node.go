package api

import (
	"fmt"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/resource"
)

// Node is a machine in the inventory (API.md "--nodes").
type Node struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels,omitempty"`
	Taints   []string          `json:"taints,omitempty"`
	Capacity resource.List     `json:"capacity,omitempty"`
	Devices  []Device          `json:"devices,omitempty"`
	// State is ready (default), notready, cordoned or draining.
	State string `json:"state,omitempty"`
}

// Device is one accelerator (or other countable device) of a node.
type Device struct {
	Type     string            `json:"type"`
	ID       string            `json:"id"`
	Model    string            `json:"model,omitempty"`
	Memory   Bytes             `json:"memory,omitempty"`
	Topology map[string]string `json:"topology,omitempty"`
	// Classes are the device classes the device belongs to: a request
	// whose deviceClasses name one of them may take it (Kubernetes DRA
	// device selectors, evaluated by the front end, become classes).
	Classes []string `json:"classes,omitempty"`
	// Unhealthy marks a device that must not receive work.
	Unhealthy bool `json:"unhealthy,omitempty"`
	// Simulated marks a declared device that is not real hardware.
	Simulated bool `json:"simulated,omitempty"`
}

// NodesFile is a static node inventory's format (the server's --nodes
// file, the benchmarks' fleets).
type NodesFile struct {
	Nodes []Node `json:"nodes"`
}

// DeviceRef names one concrete device of a placement. Share is the
// fraction of the device in milli-units (1000 = the whole device). The
// core places tasks on DeviceRefs (api.DeviceRef is this type); records,
// task views and agents' assignments carry them.
type DeviceRef struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Model string `json:"model,omitempty"`
	Share int32  `json:"share,omitempty"`
}

// NodeNameLabel is the label hetsched derives from a node's name
// (nodeSelector {hetsched.io/node: NAME} pins a task); nodes may not set it.
const NodeNameLabel = "hetsched.io/node"

// Well-known topology keys of a device.
const (
	TopologyNUMA   = "numa"
	TopologyNVLink = "nvlink"
	TopologyICI    = "ici"
)

// Node states.
const (
	NodeReady    = "ready"
	NodeNotReady = "notready"
	NodeCordoned = "cordoned"
	NodeDraining = "draining"
)

// Limits on a node's lists: far above what real nodes carry (Node
// Feature Discovery and GPU feature discovery give 100-300 labels), so
// that every label and taint of a Kubernetes node is held, yet bounded.
const (
	MaxNodeLabels  = 4096
	MaxNodeTaints  = 1024
	MaxNodeDevices = 256
)

// ValidNodeState reports whether s names a node state ("" means ready).
func ValidNodeState(s string) bool {
	switch s {
	case "", NodeReady, NodeNotReady, NodeCordoned, NodeDraining:
		return true
	}
	return false
}

// ValidateNodes checks a node list (a --nodes file, a simulated cluster):
// each node, and that no name repeats; errors name nodes[i].
func ValidateNodes(nodes []Node) error {
	seen := make(map[string]bool, len(nodes))
	for i := range nodes {
		if err := nodes[i].Validate(); err != nil {
			return errs.Prefix(fmt.Sprintf("nodes[%d]", i), err)
		}
		if seen[nodes[i].Name] {
			return errs.Invalid(fmt.Sprintf("nodes[%d].name", i), "duplicate node %q", nodes[i].Name)
		}
		seen[nodes[i].Name] = true
	}
	return nil
}

// Validate checks a node and returns the first problem, naming its field.
func (n *Node) Validate() error {
	if err := ValidateID("name", n.Name); err != nil {
		return err
	}
	if len(n.Labels) > MaxNodeLabels {
		return errs.Invalid("labels", "at most %d labels", MaxNodeLabels)
	}
	for _, k := range sortedKeys(n.Labels) {
		v := n.Labels[k]
		if k == NodeNameLabel {
			return errs.Invalid("labels."+k, "%s is set by hetsched to the node's name", NodeNameLabel)
		}
		if err := ValidateLabelKey(k); err != nil {
			return errs.Invalid("labels."+truncate(k), "%v", err)
		}
		if err := ValidateLabelValue(v); err != nil {
			return errs.Invalid("labels."+k, "%v", err)
		}
	}
	if len(n.Taints) > MaxNodeTaints {
		return errs.Invalid("taints", "at most %d taints", MaxNodeTaints)
	}
	for i, s := range n.Taints {
		if _, err := ParseTaint(s); err != nil {
			return errs.Invalid(fmt.Sprintf("taints[%d]", i), "%v", err)
		}
	}
	if !ValidNodeState(n.State) {
		return errs.Invalid("state", "must be ready, notready, cordoned or draining, got %q", truncate(n.State))
	}
	if len(n.Devices) > MaxNodeDevices {
		return errs.Invalid("devices", "at most %d devices", MaxNodeDevices)
	}
	counts := map[string]int64{}
	ids := map[string]bool{}
	for i, d := range n.Devices {
		f := fmt.Sprintf("devices[%d]", i)
		if err := resource.ValidateName(d.Type); err != nil || !resource.Name(d.Type).IsExtended() {
			return errs.Invalid(f+".type", "a device type is an extended resource name like nvidia.com/gpu, got %q", truncate(d.Type))
		}
		if err := ValidateID(f+".id", d.ID); err != nil {
			return err
		}
		key := d.Type + "/" + d.ID
		if ids[key] {
			return errs.Invalid(f+".id", "duplicate device %s id %q", d.Type, d.ID)
		}
		ids[key] = true
		if d.Model != "" {
			if err := ValidateLabelValue(d.Model); err != nil {
				return errs.Invalid(f+".model", "%v", err)
			}
		}
		if d.Memory < 0 {
			return errs.Invalid(f+".memory", "must not be negative")
		}
		if len(d.Topology) > 8 {
			return errs.Invalid(f+".topology", "at most 8 topology labels")
		}
		for k, v := range d.Topology {
			if err := ValidateLabelKey(k); err != nil {
				return errs.Invalid(f+".topology."+truncate(k), "%v", err)
			}
			if err := ValidateLabelValue(v); err != nil {
				return errs.Invalid(f+".topology."+k, "%v", err)
			}
		}
		if len(d.Classes) > MaxDeviceClasses {
			return errs.Invalid(f+".classes", "at most %d classes", MaxDeviceClasses)
		}
		for j, c := range d.Classes {
			if err := ValidateDeviceClass(c); err != nil {
				return errs.Invalid(fmt.Sprintf("%s.classes[%d]", f, j), "%v", err)
			}
		}
		// Every listed type gets an entry, so that a type whose devices are
		// all unhealthy counts as zero rather than escaping the check.
		c := counts[d.Type]
		if !d.Unhealthy {
			c += 1000
		}
		counts[d.Type] = c
	}
	for _, name := range sortedNames(n.Capacity) {
		q := n.Capacity[name]
		if q < 0 {
			return errs.Invalid("capacity."+string(name), "must not be negative")
		}
		if c, ok := counts[string(name)]; ok && c != q {
			return errs.Invalid("capacity."+string(name), "%s does not match the %s healthy devices listed; leave it out to count the devices", resource.FormatMilli(q), resource.FormatMilli(c))
		}
	}
	return nil
}

// Taint effects.
const (
	NoSchedule       = "NoSchedule"
	PreferNoSchedule = "PreferNoSchedule"
	NoExecute        = "NoExecute"
)

// Taint repels tasks that do not tolerate it: "key=value:Effect".
type Taint struct {
	Key, Value, Effect string
}

// ParseTaint reads "key=value:Effect", "key:Effect" or "key=value"
// (NoSchedule).
func ParseTaint(s string) (Taint, error) {
	kv, effect, hasEffect := strings.Cut(s, ":")
	if !hasEffect {
		effect = NoSchedule
	}
	switch effect {
	case NoSchedule, PreferNoSchedule, NoExecute:
	default:
		return Taint{}, fmt.Errorf("taint %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", truncate(s))
	}
	k, v, _ := strings.Cut(kv, "=")
	if err := ValidateLabelKey(k); err != nil {
		return Taint{}, fmt.Errorf("taint %q: %v", truncate(s), err)
	}
	if err := ValidateLabelValue(v); err != nil {
		return Taint{}, fmt.Errorf("taint %q: %v", truncate(s), err)
	}
	return Taint{Key: k, Value: v, Effect: effect}, nil
}

func (t Taint) String() string {
	if t.Value == "" {
		return t.Key + ":" + t.Effect
	}
	return t.Key + "=" + t.Value + ":" + t.Effect
}

// Toleration lets a task onto nodes with a matching taint: "key=value"
// (equal), "key" (any value), "*" (any key), each optionally ":Effect"
// (then it tolerates taints of that effect only), as Kubernetes'
// tolerations: "*" is an empty key with operator Exists.
type Toleration struct {
	Key, Value, Effect string
	Exists             bool
	All                bool
}

// ParseToleration reads a toleration string.
func ParseToleration(s string) (Toleration, error) {
	kv, effect, hasEffect := strings.Cut(s, ":")
	if hasEffect {
		switch effect {
		case NoSchedule, PreferNoSchedule, NoExecute:
		default:
			return Toleration{}, fmt.Errorf("toleration %q: effect must be NoSchedule, PreferNoSchedule or NoExecute", truncate(s))
		}
	}
	if kv == "*" {
		return Toleration{All: true, Effect: effect}, nil
	}
	k, v, hasValue := strings.Cut(kv, "=")
	if err := ValidateLabelKey(k); err != nil {
		return Toleration{}, fmt.Errorf("toleration %q: %v", truncate(s), err)
	}
	if err := ValidateLabelValue(v); err != nil {
		return Toleration{}, fmt.Errorf("toleration %q: %v", truncate(s), err)
	}
	return Toleration{Key: k, Value: v, Effect: effect, Exists: !hasValue}, nil
}

// Tolerates reports whether the toleration matches the taint.
func (tol Toleration) Tolerates(t Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.All {
		return true
	}
	if tol.Key != t.Key {
		return false
	}
	return tol.Exists || tol.Value == t.Value
}
