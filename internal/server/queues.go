package server

import (
	"net/http"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
)

// queueTenant is the tenant a queue operation acts for ("" for admins).
func queueTenant(p Principal) string {
	if p.Role == RoleAdmin {
		return ""
	}
	return p.Tenant
}

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request) {
	qs, err := s.eng.QueueViews(r.Context(), queueTenant(principalOf(w, r)))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"queues": qs})
}

// putQueue is PUT /api/v1/queues/{name} with the queue as the body.
func (s *Server) putQueue(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	var q api.Queue
	if err := decodeStrict(b, &q); err != nil {
		writeError(w, err)
		return
	}
	name := r.PathValue("name")
	if q.Name == "" {
		q.Name = name
	}
	if q.Name != name {
		writeError(w, errs.Invalid("name", "the body names %q, the path %q", q.Name, name))
		return
	}
	if err := s.eng.PutQueue(r.Context(), queueTenant(principalOf(w, r)), q); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, q)
}
