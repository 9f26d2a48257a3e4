package cli

import (
	"fmt"

	"github.com/hetsched/hetsched/internal/api"
)

// ParseSelector checks a label selector (--selector, -l) with the
// server's parser (api.ParseSelector: k=v, k!=v, k, !k, k in (a,b),
// k notin (a,b)) before anything is sent; the error names --selector and
// shows the syntax.
func ParseSelector(s string) (api.Selector, error) {
	sel, err := api.ParseSelector(s)
	if err != nil {
		return api.Selector{}, fmt.Errorf("--selector %q: %w (the syntax: k=v,k!=v,k,!k,k in (a,b),k notin (a,b))", s, err)
	}
	return sel, nil
}

// label is the node's label k, its own or one the scheduler derives
// (the view's derivedLabels: <type>.model, hetsched.io/node).
func (n nodeView) label(k string) (string, bool) {
	if v, ok := n.Labels[k]; ok {
		return v, true
	}
	v, ok := n.DerivedLabels[k]
	return v, ok
}
