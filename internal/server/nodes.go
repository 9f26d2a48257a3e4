package server

import (
	"net/http"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
)

// listNodes is GET /api/v1/nodes?selector=&state=&limit=&cursor=: the
// nodes in name order whose labels (their own and the derived ones) match
// the selector and whose state is state. Without limit every such node
// comes at once; with it a page, and "cursor" continues after it while
// there are more. "total" counts every node that matches, on all pages.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sel, err := selectorOf(q)
	if err != nil {
		writeError(w, err)
		return
	}
	query := engine.NodeQuery{State: q.Get("state"), After: q.Get("cursor")}
	switch query.State {
	case "", api.NodeReady, api.NodeNotReady, api.NodeCordoned, api.NodeDraining:
	default:
		writeError(w, errs.Invalid("state", "must be ready, notready, cordoned or draining, got %q", errs.Clip(query.State)))
		return
	}
	if len(query.After) > 253 {
		writeError(w, errs.Invalid("cursor", "not a cursor from a previous page (a node name, at most 253 bytes)"))
		return
	}
	if q.Get("limit") != "" {
		if query.Limit, err = pageLimit(q); err != nil {
			writeError(w, err)
			return
		}
	}
	if !sel.Empty() {
		query.Match = func(v *engine.NodeView) bool { return sel.Matches(v.Label) }
	}
	nodes, next, total, err := s.eng.NodePage(r.Context(), query)
	if err != nil {
		writeError(w, err)
		return
	}
	body := map[string]any{"nodes": nodes, "total": total}
	if next != "" {
		body["cursor"] = next
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) getNode(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	v, ok, err := s.eng.NodeViewOf(r.Context(), name)
	if err != nil {
		writeError(w, err)
		return
	}
	if !ok {
		writeError(w, errs.New(errs.NotFound, "name", "no node %q", errs.Clip(name)))
		return
	}
	writeJSON(w, http.StatusOK, v)
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
	v, ok, err := s.eng.NodeViewOf(r.Context(), name)
	if err != nil || !ok {
		return nil, err
	}
	return &v, nil
}
