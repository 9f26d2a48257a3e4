package server

import (
	"net/http"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
)

// listNodes is GET /api/v1/nodes?selector=: every node, or those whose
// labels (their own and the derived ones) match the selector.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	sel, err := selectorOf(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	nodes, err := s.eng.NodeViews(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	if !sel.Empty() {
		kept := nodes[:0]
		for _, n := range nodes {
			if sel.Matches(n.Label) {
				kept = append(kept, n)
			}
		}
		nodes = kept
	}
	writeJSON(w, http.StatusOK, map[string]any{"nodes": nodes})
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	nodes, err := s.eng.NodeViews(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	for i := range nodes {
		if nodes[i].Name == name {
			writeJSON(w, http.StatusOK, nodes[i])
			return
		}
	}
	writeError(w, errs.New(errs.NotFound, "name", "no node %q", name))
}

func (s *Server) nodeState(state string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := s.eng.SetNodeState(r.Context(), name, state); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"name": name, "state": state})
	}
}

// putNode is PUT /api/v1/nodes/{name} (admin): create or replace a node of
// the static inventory, as the --nodes file does at start. The body is an
// api.Node whose name is the path's or empty, validated like the
// inventory. A node an agent holds is refused (409 naming the agent: the
// engine's static-upsert rule, holders.go); a state the body leaves out
// keeps the node's current one, so applying a file does not undo a cordon.
// It answers 201 for a new node, 200 for a replaced one, with the node as
// GET /nodes/{name} shows it.
func (s *Server) putNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := api.ValidateID("name", name); err != nil {
		writeError(w, err)
		return
	}
	b, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	var n api.Node
	if err := decodeStrict(b, &n); err != nil {
		writeError(w, err)
		return
	}
	if n.Name == "" {
		n.Name = name
	}
	if n.Name != name {
		writeError(w, errs.Invalid("name", "the body names %q, the path %q", n.Name, name))
		return
	}
	if err := n.Validate(); err != nil {
		writeError(w, err)
		return
	}
	before, err := s.nodeView(r, name)
	if err != nil {
		writeError(w, err)
		return
	}
	if before != nil && n.State == "" {
		n.State = before.State
	}
	if err := s.eng.UpsertNode(r.Context(), n); err != nil {
		writeError(w, err)
		return
	}
	after, err := s.nodeView(r, name)
	if err != nil {
		writeError(w, err)
		return
	}
	if after == nil { // released meanwhile
		writeError(w, errs.New(errs.Conflict, "name", "node %q was removed while it was being put", name))
		return
	}
	status := http.StatusOK
	if before == nil {
		status = http.StatusCreated
	}
	writeJSON(w, status, after)
}

// nodeView is the node's view (nil when there is no such node).
func (s *Server) nodeView(r *http.Request, name string) (*engine.NodeView, error) {
	nodes, err := s.eng.NodeViews(r.Context())
	if err != nil {
		return nil, err
	}
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i], nil
		}
	}
	return nil, nil
}
