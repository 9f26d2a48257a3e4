package benchhttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
)

// FleetOptions configures Fleet.
type FleetOptions struct {
	Bin   string
	Nodes int
	// Settle is how long to wait after every node is ready before
	// measuring; Duration how long to measure.
	Settle, Duration time.Duration
	Log              io.Writer
}

// FleetResult is the cost of holding a fake fleet at idle.
type FleetResult struct {
	Nodes int `json:"nodes"`
	// ReadySeconds is from the agent's start to every node ready.
	ReadySeconds float64 `json:"readySeconds"`
	// ServerCores and AgentCores are CPU seconds per second at idle
	// (heartbeats every 2s, no tasks).
	ServerCores float64          `json:"serverCores"`
	AgentCores  float64          `json:"agentCores"`
	ServerRSS   childproc.Memory `json:"serverMemory"`
	AgentRSS    childproc.Memory `json:"agentMemory"`
}

// Fleet starts a server and `hetsched agent --fake-fleet N`, waits for
// every node to be ready, then measures both processes' CPU use over
// opt.Duration.
func Fleet(ctx context.Context, opt FleetOptions) (*FleetResult, error) {
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	var r *FleetResult
	err := withFleet(ctx, opt.Bin, opt.Nodes, nil, func(srv, ag *childproc.Child, hc *http.Client, ready time.Duration) error {
		r = &FleetResult{Nodes: opt.Nodes, ReadySeconds: ready.Seconds()}
		fmt.Fprintf(opt.Log, "fleet: %d nodes ready in %.1fs; settling %v, measuring %v\n", opt.Nodes, r.ReadySeconds, opt.Settle, opt.Duration)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(opt.Settle):
		}
		s0, err1 := childproc.ReadCPU(srv.Pid())
		a0, err2 := childproc.ReadCPU(ag.Pid())
		t0 := time.Now()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(opt.Duration):
		}
		s1, err3 := childproc.ReadCPU(srv.Pid())
		a1, err4 := childproc.ReadCPU(ag.Pid())
		for _, err := range []error{err1, err2, err3, err4} {
			if err != nil {
				return err
			}
		}
		wall := time.Since(t0).Seconds()
		// Every node must still be ready: heartbeats kept up.
		if states, err := nodeStates(ctx, srv.URL); err != nil || states["ready"] != opt.Nodes {
			return fmt.Errorf("after the measurement %v of %d nodes are ready (err %v): %s", states, opt.Nodes, err, ag.Stderr())
		}
		r.ServerCores = (s1 - s0).Seconds() / wall
		r.AgentCores = (a1 - a0).Seconds() / wall
		var err error
		if r.ServerRSS, err = childproc.ReadMemory(srv.Pid()); err != nil {
			return err
		}
		r.AgentRSS, err = childproc.ReadMemory(ag.Pid())
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}
