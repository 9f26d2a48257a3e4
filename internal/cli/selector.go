package cli

import (
	"fmt"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
)

// MaxSelector bounds a label selector's requirements.
const MaxSelector = 32

// requirement is one term of a label selector.
type requirement struct {
	key   string
	op    string // "=", "!=", "exists", "!exists"
	value string
}

// Selector is a parsed label selector (kubectl's equality syntax):
// k=v (or k==v), k!=v, k (the label is set), !k (it is not), joined by
// commas; every term must hold.
type Selector []requirement

// ParseSelector parses and checks s ("" selects everything); the error
// names --selector and the bad term.
func ParseSelector(s string) (Selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	terms := strings.Split(s, ",")
	if len(terms) > MaxSelector {
		return nil, fmt.Errorf("--selector: at most %d terms, got %d", MaxSelector, len(terms))
	}
	out := make(Selector, 0, len(terms))
	for _, term := range terms {
		r, err := parseTerm(strings.TrimSpace(term))
		if err != nil {
			return nil, fmt.Errorf("--selector %q: %w (the syntax: k=v,k!=v,k,!k)", s, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseTerm(t string) (requirement, error) {
	if t == "" {
		return requirement{}, fmt.Errorf("an empty term")
	}
	var r requirement
	switch {
	case strings.Contains(t, "!="):
		r.key, r.value, _ = strings.Cut(t, "!=")
		r.op = "!="
	case strings.Contains(t, "=="):
		r.key, r.value, _ = strings.Cut(t, "==")
		r.op = "="
	case strings.Contains(t, "="):
		r.key, r.value, _ = strings.Cut(t, "=")
		r.op = "="
	case strings.HasPrefix(t, "!"):
		r.key, r.op = strings.TrimSpace(t[1:]), "!exists"
	default:
		r.key, r.op = t, "exists"
	}
	r.key, r.value = strings.TrimSpace(r.key), strings.TrimSpace(r.value)
	if strings.ContainsAny(r.key, " ()!=<>") {
		return r, fmt.Errorf("%q: not a label key (set-based terms such as \"in (a,b)\" are not supported)", t)
	}
	if err := api.ValidateLabelKey(r.key); err != nil {
		return r, fmt.Errorf("%q: %w", t, err)
	}
	if r.op == "=" || r.op == "!=" {
		if err := api.ValidateLabelValue(r.value); err != nil {
			return r, fmt.Errorf("%q: %w", t, err)
		}
	}
	return r, nil
}

// Matches reports whether labels satisfy every term.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s {
		v, ok := labels[r.key]
		switch r.op {
		case "=":
			if !ok || v != r.value {
				return false
			}
		case "!=":
			if ok && v == r.value {
				return false
			}
		case "exists":
			if !ok {
				return false
			}
		case "!exists":
			if ok {
				return false
			}
		}
	}
	return true
}

// nodeLabels is a node's labels with those hetsched derives: the node's
// name (hetsched.io/node) and "<type>.model" for a device type whose
// devices are all of one model (as the scheduler's core does).
func nodeLabels(n nodeView) map[string]string {
	out := make(map[string]string, len(n.Labels)+2)
	for k, v := range n.Labels {
		out[k] = v
	}
	models := map[string]map[string]bool{}
	for _, d := range n.Devices {
		if models[d.Type] == nil {
			models[d.Type] = map[string]bool{}
		}
		if d.Model != "" {
			models[d.Type][d.Model] = true
		}
	}
	for t, ms := range models {
		if _, set := out[t+".model"]; len(ms) == 1 && !set {
			for m := range ms {
				out[t+".model"] = m
			}
		}
	}
	if api.ValidateLabelValue(n.Name) == nil {
		out[api.NodeNameLabel] = n.Name
	}
	return out
}
