package benchhttp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
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
	dir, err := os.MkdirTemp("", "hetsched-bench-fleet-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	srv, err := childproc.Start(opt.Bin, 2*time.Minute, "server", "--listen", "127.0.0.1:0", "--data-dir", dir+"/data")
	if err != nil {
		return nil, err
	}
	defer srv.Kill()
	start := time.Now()
	ag, err := childproc.Start(opt.Bin, 2*time.Minute, "agent", "--fake-fleet", fmt.Sprint(opt.Nodes), "--server", srv.URL)
	if err != nil {
		return nil, err
	}
	defer ag.Kill()
	hc := &http.Client{Timeout: 30 * time.Second}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var sum struct {
			Nodes map[string]int `json:"nodes"`
		}
		resp, err := hc.Get(srv.URL + "/api/v1/cluster")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&sum)
			resp.Body.Close()
		}
		if err == nil && sum.Nodes["ready"] == opt.Nodes {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d nodes not ready within 5 minutes (last %v, err %v): %s", opt.Nodes, sum.Nodes, err, ag.Stderr())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	r := &FleetResult{Nodes: opt.Nodes, ReadySeconds: time.Since(start).Seconds()}
	fmt.Fprintf(opt.Log, "fleet: %d nodes ready in %.1fs; settling %v, measuring %v\n", opt.Nodes, r.ReadySeconds, opt.Settle, opt.Duration)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(opt.Settle):
	}
	s0, err1 := childproc.ReadCPU(srv.Pid())
	a0, err2 := childproc.ReadCPU(ag.Pid())
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(opt.Duration):
	}
	s1, err3 := childproc.ReadCPU(srv.Pid())
	a1, err4 := childproc.ReadCPU(ag.Pid())
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return nil, err
		}
	}
	wall := time.Since(t0).Seconds()
	// Every node must still be ready: heartbeats kept up.
	var sum struct {
		Nodes map[string]int `json:"nodes"`
	}
	resp, err := hc.Get(srv.URL + "/api/v1/cluster")
	if err == nil {
		err = json.NewDecoder(resp.Body).Decode(&sum)
		resp.Body.Close()
	}
	if err != nil || sum.Nodes["ready"] != opt.Nodes {
		return nil, fmt.Errorf("after the measurement %v of %d nodes are ready (err %v): %s", sum.Nodes, opt.Nodes, err, ag.Stderr())
	}
	r.ServerCores = (s1 - s0).Seconds() / wall
	r.AgentCores = (a1 - a0).Seconds() / wall
	if r.ServerRSS, err = childproc.ReadMemory(srv.Pid()); err != nil {
		return nil, err
	}
	if r.AgentRSS, err = childproc.ReadMemory(ag.Pid()); err != nil {
		return nil, err
	}
	return r, nil
}
