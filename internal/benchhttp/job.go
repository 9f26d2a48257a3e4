package benchhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
)

// JobOptions configures Job.
type JobOptions struct {
	Bin string
	// Layers × Width tasks; task (l, i) depends on (l-1, i) and
	// (l-1, i+1 mod Width).
	Layers, Width int
	Nodes         int           // fake nodes (8 GPUs, 64 CPUs each)
	TaskDuration  time.Duration // how long each task "runs" on the fake fleet
	Timeout       time.Duration
	Log           io.Writer
}

// JobResult is one run of a big DAG job through the whole system.
type JobResult struct {
	Tasks int `json:"tasks"`
	// SubmitSeconds is POST /api/v1/jobs (validated, expanded, durable).
	SubmitSeconds float64 `json:"submitSeconds"`
	// RunSeconds is from the submission's answer to every task succeeded.
	RunSeconds float64 `json:"runSeconds"`
	// TasksPerSecond is Tasks / RunSeconds: placements, assignments, fake
	// runs and status reports, each durable, for a job whose critical path
	// is Layers tasks long.
	TasksPerSecond float64          `json:"tasksPerSecond"`
	ServerMemory   childproc.Memory `json:"serverMemory"`
}

// Job starts a server and a fake fleet, submits one layered job and waits
// until it succeeded.
func Job(ctx context.Context, opt JobOptions) (*JobResult, error) {
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 10 * time.Minute
	}
	var r *JobResult
	err := withFleet(ctx, opt.Bin, opt.Nodes, []string{"--fake-duration", opt.TaskDuration.String()}, func(srv, _ *childproc.Child, hc *http.Client, _ time.Duration) error {
		var b bytes.Buffer
		b.WriteString(`{"id":"dag","tasks":[`)
		for l := 0; l < opt.Layers; l++ {
			for i := 0; i < opt.Width; i++ {
				if l+i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"id":"%d-%d","priority":1,"resources":{"cpu":"1"},"command":["true"]`, l, i)
				if l > 0 {
					fmt.Fprintf(&b, `,"depends":["%d-%d","%d-%d"]`, l-1, i, l-1, (i+1)%opt.Width)
				}
				b.WriteByte('}')
			}
		}
		b.WriteString(`]}`)
		r = &JobResult{Tasks: opt.Layers * opt.Width}
		fmt.Fprintf(opt.Log, "job: submitting %d tasks (%d layers × %d, %.1f MB)\n", r.Tasks, opt.Layers, opt.Width, float64(b.Len())/1e6)
		start := time.Now()
		resp, err := hc.Post(srv.URL+"/api/v1/jobs", "application/json", &b)
		if err != nil {
			return err
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("submit: %d %.500s", resp.StatusCode, body)
		}
		r.SubmitSeconds = time.Since(start).Seconds()
		runStart := time.Now()
		deadline := runStart.Add(opt.Timeout)
		for {
			var v struct {
				State  string         `json:"state"`
				Counts map[string]int `json:"counts"`
			}
			resp, err := hc.Get(srv.URL + "/api/v1/jobs/dag?tasks=false")
			if err == nil {
				err = json.NewDecoder(resp.Body).Decode(&v)
				resp.Body.Close()
			}
			if err != nil {
				return err
			}
			if v.State == "succeeded" {
				break
			}
			if v.State == "failed" || v.State == "cancelled" || time.Now().After(deadline) {
				return fmt.Errorf("job %s after %v: %v", v.State, time.Since(runStart), v.Counts)
			}
			fmt.Fprintf(opt.Log, "job: %v after %.0fs\n", v.Counts, time.Since(runStart).Seconds())
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
		r.RunSeconds = time.Since(runStart).Seconds()
		r.TasksPerSecond = float64(r.Tasks) / r.RunSeconds
		r.ServerMemory, err = childproc.ReadMemory(srv.Pid())
		return err
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// withFleet runs a server and `hetsched agent --fake-fleet nodes` (plus
// extra agent flags) as children in a temporary data directory, waits until
// every node is ready, and calls fn; the children are killed and the
// directory removed afterwards.
func withFleet(ctx context.Context, bin string, nodes int, extra []string, fn func(srv, agent *childproc.Child, hc *http.Client, ready time.Duration) error) error {
	dir, err := os.MkdirTemp("", "hetsched-bench-fleet-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := childproc.Start(bin, 2*time.Minute, "server", "--listen", "127.0.0.1:0", "--data-dir", dir+"/data")
	if err != nil {
		return err
	}
	defer srv.Kill()
	start := time.Now()
	args := append([]string{"agent", "--fake-fleet", strconv.Itoa(nodes), "--server", srv.URL}, extra...)
	ag, err := childproc.Start(bin, 2*time.Minute, args...)
	if err != nil {
		return err
	}
	defer ag.Kill()
	hc := &http.Client{Timeout: 5 * time.Minute}
	if err := waitNodesReady(ctx, srv.URL, nodes); err != nil {
		return fmt.Errorf("%w: %s", err, ag.Stderr())
	}
	return fn(srv, ag, hc, time.Since(start))
}

// nodeStates returns the server's node count by state.
func nodeStates(ctx context.Context, base string) (map[string]int, error) {
	s, err := summary(ctx, base)
	if err != nil {
		return nil, err
	}
	return s.Nodes, nil
}

// waitNodesReady waits until n nodes are ready.
func waitNodesReady(ctx context.Context, base string, n int) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		states, err := nodeStates(ctx, base)
		if err == nil && states["ready"] == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d nodes not ready within 5 minutes (last %v, err %v)", n, states, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
