// Package benchhttp runs whole-server benchmarks: it starts `hetsched
// server` (and the echo floor) as child processes of the given binary,
// drives them over loopback and measures from outside, as a user would.
//
// Contracts:
//   - Children are killed when the run ends, whatever happened; their data
//     lives in a temporary directory that is removed afterwards.
//   - Every wait on a child has a deadline.
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

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/benchcore"
	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/loadgen"
)

// WriteNodesFile writes n fleet nodes (benchcore's 10k-node mix) as a
// --nodes file.
func WriteNodesFile(path string, n int) error {
	b, err := json.Marshal(api.NodesFile{Nodes: benchcore.FleetNodes(n)})
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// CompareOptions configures Compare.
type CompareOptions struct {
	Bin         string // the hetsched binary
	BenchBin    string // the hetsched-bench binary (its echo command is the floor)
	Nodes       int
	Connections []int
	// H2C lists h2c loads, each {connections, streams a connection}, run
	// after the HTTP/1.1 counts.
	H2C      [][2]int
	Duration time.Duration
	Mix      [4]int
	Log      io.Writer
}

// CompareResult is one connection count: hetsched and the echo floor.
type CompareResult struct {
	Connections int `json:"connections"`
	// Streams is the h2c streams a connection (0: HTTP/1.1).
	Streams  int             `json:"streams,omitempty"`
	Hetsched *loadgen.Result `json:"hetsched"`
	Echo     *loadgen.Result `json:"echo"`
	// Ratio is hetsched's HTTP requests/s (schedule + complete) over the
	// echo floor's.
	Ratio float64 `json:"ratio"`
}

// Compare starts a server with opt.Nodes static nodes and an echo server,
// then for each connection count drives single-task schedule requests
// (leases completed at once) at the server and the same bodies at the
// echo, one after the other in the same run.
func Compare(ctx context.Context, opt CompareOptions) ([]CompareResult, error) {
	dir, err := os.MkdirTemp("", "hetsched-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	nodes := dir + "/nodes.json"
	if err := WriteNodesFile(nodes, opt.Nodes); err != nil {
		return nil, err
	}
	// The load comes from one address with up to 10,000 connections: the
	// per-address cap (a defence against one client) is lifted.
	srv, err := childproc.Start(opt.Bin, 2*time.Minute, "server", "--listen", "127.0.0.1:0", "--data-dir", dir+"/data", "--nodes", nodes, "--max-conns-per-ip", "-1")
	if err != nil {
		return nil, err
	}
	defer srv.Kill()
	echo, err := childproc.Start(opt.BenchBin, time.Minute, "echo", "--listen", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer echo.Kill()
	var out []CompareResult
	loads := make([][2]int, 0, len(opt.Connections)+len(opt.H2C))
	for _, n := range opt.Connections {
		loads = append(loads, [2]int{n, 0})
	}
	loads = append(loads, opt.H2C...)
	for _, l := range loads {
		n, streams := l[0], l[1]
		lo := loadgen.Options{Connections: n, Duration: opt.Duration, Mix: opt.Mix, Complete: true,
			SourceAddrs: max(1, n/2000), RunID: "c" + strconv.Itoa(n) + "s" + strconv.Itoa(streams),
			H2C: streams > 0, Streams: streams}
		lo.Target = srv.URL
		hs, err := loadgen.Run(ctx, lo)
		if err != nil {
			return out, err
		}
		lo.Target, lo.Echo = echo.URL, true
		ec, err := loadgen.Run(ctx, lo)
		if err != nil {
			return out, err
		}
		r := CompareResult{Connections: n, Streams: streams, Hetsched: hs, Echo: ec}
		if ec.RequestRate > 0 {
			r.Ratio = hs.RequestRate / ec.RequestRate
		}
		if opt.Log != nil {
			loadgen.Table(opt.Log, []*loadgen.Result{hs, ec}, []string{"hetsched", "echo"})
			fmt.Fprintf(opt.Log, "ratio %.2f\n", r.Ratio)
		}
		out = append(out, r)
	}
	return out, nil
}

// PendingOptions configures Pending.
type PendingOptions struct {
	Bin     string
	Tasks   int
	Batch   int
	Clients int
	Log     io.Writer
}

// PendingResult is what holding Tasks pending in one server costs.
type PendingResult struct {
	Tasks         int              `json:"tasks"`
	SubmitSeconds float64          `json:"submit_seconds"`
	SubmitRate    float64          `json:"submit_tasks_per_s"`
	Memory        childproc.Memory `json:"memory"`
	// RestartSeconds is from starting the server on the data directory of
	// the killed one until it answers /readyz with every task restored.
	RestartSeconds float64          `json:"restart_seconds"`
	RestartLine    string           `json:"restart_line"`
	MemoryAfter    childproc.Memory `json:"memory_after_restart"`
	Restored       int              `json:"restored_tasks"`
}

// Pending starts a server without nodes, submits opt.Tasks tasks through
// the batch API (all stay pending), reads the process's memory, kills it
// with SIGKILL, restarts it on the same data and times the recovery.
func Pending(ctx context.Context, opt PendingOptions) (*PendingResult, error) {
	if opt.Batch <= 0 || opt.Clients <= 0 || opt.Tasks <= 0 {
		return nil, fmt.Errorf("tasks, batch and clients must be positive")
	}
	dir, err := os.MkdirTemp("", "hetsched-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	data := dir + "/data"
	srv, err := childproc.Start(opt.Bin, time.Minute, "server", "--listen", "127.0.0.1:0", "--data-dir", data)
	if err != nil {
		return nil, err
	}
	defer func() { srv.Kill() }()
	res := &PendingResult{Tasks: opt.Tasks}
	t0 := time.Now()
	err = submitBatches(ctx, srv.URL, opt.Tasks, opt.Batch, opt.Clients, func(buf *bytes.Buffer, k int) {
		fmt.Fprintf(buf, `{"id":"p%d","priority":%d,"resources":{"cpu":"100m","memory":"64Mi"}}`, k, k%4)
	})
	if err != nil {
		return nil, err
	}
	res.SubmitSeconds = time.Since(t0).Seconds()
	res.SubmitRate = float64(opt.Tasks) / res.SubmitSeconds
	if res.Memory, err = childproc.ReadMemory(srv.Pid()); err != nil {
		return nil, err
	}
	if opt.Log != nil {
		fmt.Fprintf(opt.Log, "%d tasks pending: RSS %.0f MiB (peak %.0f MiB), submitted in %.1fs (%.0f tasks/s)\n",
			opt.Tasks, mib(res.Memory.RSS), mib(res.Memory.Peak), res.SubmitSeconds, res.SubmitRate)
	}
	srv.Kill()
	t1 := time.Now()
	srv, err = childproc.Start(opt.Bin, 10*time.Minute, "server", "--listen", "127.0.0.1:0", "--data-dir", data)
	if err != nil {
		return nil, err
	}
	if err := waitReady(ctx, srv.URL, time.Minute); err != nil {
		return nil, err
	}
	res.RestartSeconds = time.Since(t1).Seconds()
	res.RestartLine = srv.Line
	if res.Restored, err = countTasks(ctx, srv.URL); err != nil {
		return nil, err
	}
	if res.MemoryAfter, err = childproc.ReadMemory(srv.Pid()); err != nil {
		return nil, err
	}
	if opt.Log != nil {
		fmt.Fprintf(opt.Log, "restart: %.1fs to ready with %d tasks; RSS %.0f MiB (peak %.0f MiB)\n  %s\n",
			res.RestartSeconds, res.Restored, mib(res.MemoryAfter.RSS), mib(res.MemoryAfter.Peak), res.RestartLine)
	}
	if res.Restored != opt.Tasks {
		return res, fmt.Errorf("restored %d tasks, submitted %d", res.Restored, opt.Tasks)
	}
	return res, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func waitReady(ctx context.Context, base string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	hc := &http.Client{Timeout: 5 * time.Second}
	for time.Now().Before(deadline) {
		resp, err := hc.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready within %v", base, timeout)
}

func countTasks(ctx context.Context, base string) (int, error) {
	s, err := summary(ctx, base)
	if err != nil {
		return 0, err
	}
	return s.Tasks, nil
}
