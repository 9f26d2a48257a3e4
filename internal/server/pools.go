package server

import (
	"context"

	"github.com/hetsched/hetsched/internal/api"
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
