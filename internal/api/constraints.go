package api

import (
	"net/netip"
	"slices"
	"strconv"

	"github.com/hetsched/hetsched/internal/errs"
)

// Placement constraints (API.md "Placement constraints"): the rules a
// Kubernetes pod carries besides its node selector, node affinity and
// tolerations, with the same meaning, for tasks of either front end.
//
// Glossary:
//   - labels: a task's metadata; a selector (TaskSelector) matches other
//     tasks by them, within the task's tenant only (the engine writes the
//     tenant into MetaTenant; a tenant never matches another's tasks).
//   - domain: the nodes that share a value of a topology key (a node
//     label; NodeNameLabel is the node itself). A node without the key is
//     in no domain.

// MetaTenant is the metadata key the engine sets to a task's tenant (for
// every tenant but the default one, whose tasks have none): selectors
// match only tasks with the same value, so no tenant sees another's.
const MetaTenant = "hetsched.io/tenant"

// Bounds of the constraint lists.
const (
	MaxHostPorts        = 128
	MaxAffinityEntries  = 32
	MaxSpread           = 16
	MaxNodePreferences  = 32
	MaxConstraintWeight = 100
)

// HostPort is a port of the node the task holds (Kubernetes' hostPort):
// a node holds each (port, protocol) once per address, an empty HostIP
// (or 0.0.0.0, ::) being every address.
type HostPort struct {
	Port     int32  `json:"port"`
	Protocol string `json:"protocol,omitempty"` // TCP (default), UDP or SCTP
	HostIP   string `json:"hostIP,omitempty"`
}

// ProtocolOrDefault is the port's protocol, TCP when none is given.
func (p HostPort) ProtocolOrDefault() string {
	if p.Protocol == "" {
		return "TCP"
	}
	return p.Protocol
}

// Wildcard reports whether the port is held on every address of the node.
func (p HostPort) Wildcard() bool {
	return p.HostIP == "" || p.HostIP == "0.0.0.0" || p.HostIP == "::"
}

// Conflicts reports whether p and q cannot both be held on one node (as
// kube-scheduler's NodePorts decides).
func (p HostPort) Conflicts(q HostPort) bool {
	if p.Port != q.Port || p.ProtocolOrDefault() != q.ProtocolOrDefault() {
		return false
	}
	return p.Wildcard() || q.Wildcard() || p.HostIP == q.HostIP
}

// TaskSelector selects tasks by their labels: every Selector entry equal,
// and every requirement of Match (selector syntax, ParseSelector) true.
// An empty one selects every task of the tenant.
type TaskSelector struct {
	Selector map[string]string `json:"selector,omitempty"`
	Match    string            `json:"match,omitempty"`
}

// AffinityTerm asks for (affinity) or against (antiAffinity) the tasks
// its selector matches in the domain of TopologyKey of the node: Required
// is a filter, otherwise Weight (1-100) is a preference.
type AffinityTerm struct {
	TaskSelector
	TopologyKey string `json:"topologyKey"`
	Required    bool   `json:"required,omitempty"`
	Weight      int32  `json:"weight,omitempty"`
}

// Spread keeps the tasks its selector matches even across the domains of
// TopologyKey: placing the task must not make the number in the node's
// domain exceed the smallest domain's by more than MaxSkew.
type Spread struct {
	TaskSelector
	TopologyKey string `json:"topologyKey"`
	MaxSkew     int32  `json:"maxSkew"`
	// WhenUnsatisfiable: "wait" (default: a filter) or "place" (a
	// preference for the least crowded domain).
	WhenUnsatisfiable string `json:"whenUnsatisfiable,omitempty"`
	// MinDomains: with fewer eligible domains than this, the smallest
	// counts as empty (only with "wait").
	MinDomains int32 `json:"minDomains,omitempty"`
	// NodeAffinityPolicy: "honor" (default: only the domains of nodes the
	// task's node selector and affinity admit count) or "ignore".
	NodeAffinityPolicy string `json:"nodeAffinityPolicy,omitempty"`
	// NodeTaintsPolicy: "ignore" (default) or "honor" (only the domains of
	// nodes whose taints the task tolerates count).
	NodeTaintsPolicy string `json:"nodeTaintsPolicy,omitempty"`
}

// Spread and policy values.
const (
	SpreadWait   = "wait"
	SpreadPlace  = "place"
	PolicyHonor  = "honor"
	PolicyIgnore = "ignore"
	// PreemptNever is a preemptionPolicy: the task waits rather than
	// evict anything.
	PreemptNever = "never"
)

// NodePreference prefers the nodes a selector matches (Kubernetes'
// preferred node affinity): the weights of the terms a node matches add
// up to its preference.
type NodePreference struct {
	Weight   int32  `json:"weight"`
	Selector string `json:"selector"`
}

// validate checks the selector; field names it.
func (s *TaskSelector) validate(field string) error {
	if len(s.Selector) > MaxSelectorLabels {
		return errs.Invalid(field+".selector", "at most %d labels", MaxSelectorLabels)
	}
	for _, k := range sortedKeys(s.Selector) {
		if err := ValidateLabelKey(k); err != nil {
			return errs.Invalid(field+".selector."+truncate(k), "%v", err)
		}
		if err := ValidateLabelValue(s.Selector[k]); err != nil {
			return errs.Invalid(field+".selector."+k, "%v", err)
		}
	}
	if _, err := ParseSelector(s.Match); err != nil {
		return errs.Invalid(field+".match", "%v", err)
	}
	return nil
}

// Compile is the selector as one Selector: Selector's entries as
// equalities, then Match's requirements.
func (s *TaskSelector) Compile() (Selector, error) {
	sel, err := ParseSelector(s.Match)
	if err != nil {
		return Selector{}, err
	}
	for _, k := range sortedKeys(s.Selector) {
		sel.reqs = append(sel.reqs, requirement{key: k, op: opIn, values: []string{s.Selector[k]}})
	}
	return sel, nil
}

func validateTopologyKey(field, k string) error {
	if k == "" {
		return errs.Invalid(field, "a topology key (a node label, or %s for the node itself) is required", NodeNameLabel)
	}
	if err := ValidateLabelKey(k); err != nil {
		return errs.Invalid(field, "%v", err)
	}
	return nil
}

func validateWeight(field string, required bool, w int32) error {
	switch {
	case required && w != 0:
		return errs.Invalid(field, "a required term has no weight (it is a filter), got %d", w)
	case !required && (w < 1 || w > MaxConstraintWeight):
		return errs.Invalid(field, "a preference's weight is 1 to %d, got %d (or set required)", MaxConstraintWeight, w)
	}
	return nil
}

// validateConstraints checks the placement constraints of t.
func (t *Task) validateConstraints() error {
	if len(t.HostPorts) > MaxHostPorts {
		return errs.Invalid("hostPorts", "at most %d ports", MaxHostPorts)
	}
	for i, p := range t.HostPorts {
		f := "hostPorts[" + strconv.Itoa(i) + "]"
		if p.Port < 1 || p.Port > 65535 {
			return errs.Invalid(f+".port", "must be 1-65535, got %d", p.Port)
		}
		switch p.Protocol {
		case "", "TCP", "UDP", "SCTP":
		default:
			return errs.Invalid(f+".protocol", "must be TCP, UDP or SCTP, got %q", truncate(p.Protocol))
		}
		if p.HostIP != "" {
			if _, err := netip.ParseAddr(p.HostIP); err != nil {
				return errs.Invalid(f+".hostIP", "%q is not an IP address", truncate(p.HostIP))
			}
		}
		if j := slices.IndexFunc(t.HostPorts[:i], func(q HostPort) bool {
			return q.Port == p.Port && q.ProtocolOrDefault() == p.ProtocolOrDefault() && q.HostIP == p.HostIP
		}); j >= 0 {
			return errs.Invalid(f, "repeats hostPorts[%d]", j)
		}
	}
	for _, list := range []struct {
		name  string
		terms []AffinityTerm
	}{{"affinity", t.Affinity}, {"antiAffinity", t.AntiAffinity}} {
		if len(list.terms) > MaxAffinityEntries {
			return errs.Invalid(list.name, "at most %d terms", MaxAffinityEntries)
		}
		for i := range list.terms {
			a := &list.terms[i]
			f := list.name + "[" + strconv.Itoa(i) + "]"
			if err := a.validate(f); err != nil {
				return err
			}
			if err := validateTopologyKey(f+".topologyKey", a.TopologyKey); err != nil {
				return err
			}
			if err := validateWeight(f+".weight", a.Required, a.Weight); err != nil {
				return err
			}
		}
	}
	if err := t.validateSpread(); err != nil {
		return err
	}
	switch t.PreemptionPolicy {
	case "", PreemptNever:
	default:
		return errs.Invalid("preemptionPolicy", "must be %q or left out, got %q", PreemptNever, truncate(t.PreemptionPolicy))
	}
	if len(t.PreferredNodeAffinity) > MaxNodePreferences {
		return errs.Invalid("preferredNodeAffinity", "at most %d terms", MaxNodePreferences)
	}
	for i, p := range t.PreferredNodeAffinity {
		f := "preferredNodeAffinity[" + strconv.Itoa(i) + "]"
		if err := validateWeight(f+".weight", false, p.Weight); err != nil {
			return err
		}
		sel, err := ParseSelector(p.Selector)
		if err != nil {
			return errs.Invalid(f+".selector", "%v", err)
		}
		if sel.Empty() {
			return errs.Invalid(f+".selector", "an empty term matches every node: leave it out")
		}
	}
	return nil
}

func (t *Task) validateSpread() error {
	if len(t.Spread) > MaxSpread {
		return errs.Invalid("spread", "at most %d constraints", MaxSpread)
	}
	for i := range t.Spread {
		s := &t.Spread[i]
		f := "spread[" + strconv.Itoa(i) + "]"
		if err := s.validate(f); err != nil {
			return err
		}
		if err := validateTopologyKey(f+".topologyKey", s.TopologyKey); err != nil {
			return err
		}
		if s.MaxSkew < 1 {
			return errs.Invalid(f+".maxSkew", "must be at least 1, got %d", s.MaxSkew)
		}
		switch s.WhenUnsatisfiable {
		case "", SpreadWait:
		case SpreadPlace:
			if s.MinDomains != 0 {
				return errs.Invalid(f+".minDomains", "only with whenUnsatisfiable %q", SpreadWait)
			}
		default:
			return errs.Invalid(f+".whenUnsatisfiable", "must be %q or %q, got %q", SpreadWait, SpreadPlace, truncate(s.WhenUnsatisfiable))
		}
		if s.MinDomains < 0 {
			return errs.Invalid(f+".minDomains", "must not be negative, got %d", s.MinDomains)
		}
		for _, p := range []struct{ name, v string }{{"nodeAffinityPolicy", s.NodeAffinityPolicy}, {"nodeTaintsPolicy", s.NodeTaintsPolicy}} {
			if p.v != "" && p.v != PolicyHonor && p.v != PolicyIgnore {
				return errs.Invalid(f+"."+p.name, "must be %q or %q, got %q", PolicyHonor, PolicyIgnore, truncate(p.v))
			}
		}
		for j := range i {
			if o := &t.Spread[j]; o.TopologyKey == s.TopologyKey && o.WhenUnsatisfiable == s.WhenUnsatisfiable {
				return errs.Invalid(f, "repeats spread[%d]'s topologyKey and whenUnsatisfiable", j)
			}
		}
	}
	return nil
}

// HasConstraints reports whether t carries any placement constraint
// beyond its node selector, node affinity and tolerations.
func (t *Task) HasConstraints() bool {
	return len(t.HostPorts) > 0 || len(t.Affinity) > 0 || len(t.AntiAffinity) > 0 || len(t.Spread) > 0 ||
		len(t.PreferredNodeAffinity) > 0
}
