package server

import (
	"context"
	"net/http"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/poolctl"
)

// NodePoolsFile is the --node-pools file format (issue 44 §3):
//
//	nodePools:
//	  - name: gpu-burst
//	    template: {capacity: {cpu: "64", memory: 512Gi}, devices: [...], labels: {...}, taints: [...]}
//	    min: 0
//	    max: 8
//	    provider: {exec: {command: [/usr/local/bin/gpu-pool]}}   # or {webhook: {url: https://...}}
//	    scaleOutAfter: 30s
//	    scaleInAfter: 10m
//	    costPerHour: 32
type NodePoolsFile struct {
	NodePools []api.NodePool `json:"nodePools"`
}

// LoadNodePoolsFile reads and validates a --node-pools file (YAML or
// JSON; unknown fields are errors).
func LoadNodePoolsFile(path string) ([]api.NodePool, error) {
	var f NodePoolsFile
	if err := readConfigFile("node-pools", path, &f); err != nil {
		return nil, err
	}
	if err := api.ValidatePools(f.NodePools); err != nil {
		return nil, err
	}
	return f.NodePools, nil
}

// listNodePools is GET /api/v1/nodepools (admin: a pool's provider is
// the operator's).
func (s *Server) listNodePools(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"nodePools": s.eng.NodePools()})
}

// putNodePool is PUT /api/v1/nodepools/NAME: create (201) or replace
// (200) a pool.
func (s *Server) putNodePool(w http.ResponseWriter, r *http.Request) {
	b, err := readBody(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	var p api.NodePool
	if err := decodeStrict(b, &p); err != nil {
		writeError(w, err)
		return
	}
	name := r.PathValue("name")
	if p.Name == "" {
		p.Name = name
	}
	if p.Name != name {
		writeError(w, errs.Invalid("name", "must be the path's %q, got %q", name, p.Name))
		return
	}
	created, err := s.eng.PutNodePool(r.Context(), p)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, p)
}

// deleteNodePool is DELETE /api/v1/nodepools/NAME: the pool's nodes stay.
func (s *Server) deleteNodePool(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.DeleteNodePool(r.Context(), r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("name")})
}

// StartPools runs the node pools on the server's engine until Close.
func (s *Server) StartPools(cfg poolctl.Config) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Engine = s.eng
	m := poolctl.New(cfg)
	s.stopPools, s.poolsDone = cancel, make(chan struct{})
	go func() {
		defer close(s.poolsDone)
		m.Run(ctx)
	}()
}
