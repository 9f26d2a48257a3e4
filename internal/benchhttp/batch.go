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
	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/resource"
)

// BatchOptions configures Batch.
type BatchOptions struct {
	Bin   string
	Nodes int
	Tasks int
	// Batch is tasks per POST /api/v1/tasks; Clients the requests in
	// flight.
	Batch   int
	Clients int
	// Mix weighs the tasks' tiers (urgent, high, medium, low).
	Mix [4]int
	// Lease is every task's lease; leases run out and free their
	// capacity, so the pending tasks are placed in turn.
	Lease time.Duration
	// ServerArgs are extra flags for `hetsched server`.
	ServerArgs []string
	Timeout    time.Duration
	Log        io.Writer
}

// BatchResult is what holding Tasks in flight (leased and pending) in one
// server, then draining them by lease expiry, measured.
type BatchResult struct {
	Nodes         int     `json:"nodes"`
	Tasks         int     `json:"tasks"`
	SubmitSeconds float64 `json:"submit_seconds"`
	SubmitRate    float64 `json:"submit_tasks_per_s"`
	// Leased and Pending split the tasks in flight when every submission
	// was acknowledged.
	Leased  int              `json:"leased"`
	Pending int              `json:"pending"`
	Memory  childproc.Memory `json:"memory"`
	// DrainSeconds is from the last acknowledgement until no task is
	// pending or placed; Expired counts the tasks that ended by lease
	// expiry (every task must).
	DrainSeconds float64 `json:"drain_seconds"`
	Expired      int     `json:"expired"`
	// ServerCPUSeconds and WriteBytes are the server's CPU time and bytes
	// written to storage over the whole run (submission and drain).
	ServerCPUSeconds float64 `json:"server_cpu_seconds"`
	WriteBytes       int64   `json:"write_bytes"`
}

// Batch starts a server with opt.Nodes 64-CPU nodes, submits opt.Tasks
// one-CPU lease tasks through the batch API (at most 64 a node are placed,
// the rest wait), reads the server's memory with them all in flight, then
// waits until every lease has run out and every task ended, and counts
// the ended tasks.
func Batch(ctx context.Context, opt BatchOptions) (*BatchResult, error) {
	if opt.Nodes <= 0 || opt.Tasks <= 0 || opt.Batch <= 0 || opt.Clients <= 0 || opt.Lease <= 0 {
		return nil, fmt.Errorf("nodes, tasks, batch, clients and lease must be positive")
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	logf := logTo(opt.Log)
	srv, stop, err := startOn64CPUNodes(opt.Bin, opt.Nodes, opt.ServerArgs)
	if err != nil {
		return nil, err
	}
	defer stop()
	lease := opt.Lease.String()
	total := opt.Mix[0] + opt.Mix[1] + opt.Mix[2] + opt.Mix[3]
	if total <= 0 {
		return nil, fmt.Errorf("mix: no tier has weight")
	}
	t0 := time.Now()
	err = submitBatches(ctx, srv.URL, opt.Tasks, opt.Batch, opt.Clients, func(buf *bytes.Buffer, k int) {
		fmt.Fprintf(buf, `{"id":"t%d","priority":%d,"resources":{"cpu":"1","memory":"256Mi"},"lease":%q}`, k, dealTier(k, opt.Mix, total), lease)
	})
	if err != nil {
		return nil, err
	}
	res := &BatchResult{Nodes: opt.Nodes, Tasks: opt.Tasks}
	res.SubmitSeconds = time.Since(t0).Seconds()
	res.SubmitRate = float64(opt.Tasks) / res.SubmitSeconds
	acked := time.Now()
	sum, err := summary(ctx, srv.URL)
	if err != nil {
		return nil, err
	}
	for _, n := range sum.Pending {
		res.Pending += n
	}
	res.Leased = int(sum.Resources["cpu"].Allocated / 1000)
	if res.Memory, err = childproc.ReadMemory(srv.Pid()); err != nil {
		return nil, err
	}
	logf("%d tasks acknowledged in %.1fs (%.0f tasks/s): %d leased, %d pending; server RSS %.0f MiB (peak %.0f MiB)\n",
		opt.Tasks, res.SubmitSeconds, res.SubmitRate, res.Leased, res.Pending, mib(res.Memory.RSS), mib(res.Memory.Peak))
	for {
		sum, err := summary(ctx, srv.URL)
		if err != nil {
			return nil, err
		}
		pending := 0
		for _, n := range sum.Pending {
			pending += n
		}
		if pending == 0 && sum.Resources["cpu"].Allocated == 0 {
			break
		}
		logf("  %.0fs: %d pending, %d leased\n", time.Since(acked).Seconds(), pending, sum.Resources["cpu"].Allocated/1000)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("draining: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
	res.DrainSeconds = time.Since(acked).Seconds()
	if cpu, err := childproc.ReadCPU(srv.Pid()); err == nil {
		res.ServerCPUSeconds = cpu.Seconds()
	}
	if res.WriteBytes, err = childproc.ReadWriteBytes(srv.Pid()); err != nil {
		return nil, err
	}
	if res.Expired, err = countState(ctx, srv.URL, "expired"); err != nil {
		return nil, err
	}
	logf("drained in %.1fs: %d tasks expired; server CPU %.1fs, %.0f MiB written to storage (%.0f bytes a task)\n",
		res.DrainSeconds, res.Expired, res.ServerCPUSeconds, mib(res.WriteBytes), float64(res.WriteBytes)/float64(opt.Tasks))
	if res.Expired != opt.Tasks {
		return res, fmt.Errorf("%d of %d tasks ended by lease expiry", res.Expired, opt.Tasks)
	}
	return res, nil
}

// submitBatches posts tasks 0..n-1, written by task, in batches over
// clients concurrent requests; every batch must be acknowledged (201).
func submitBatches(ctx context.Context, base string, n, batch, clients int, task func(*bytes.Buffer, int)) error {
	firsts := make(chan int, clients)
	errc := make(chan error, clients)
	hc := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	for c := 0; c < clients; c++ {
		go func() {
			var buf bytes.Buffer
			for first := range firsts {
				buf.Reset()
				buf.WriteString(`{"tasks":[`)
				for k := first; k < min(first+batch, n); k++ {
					if k > first {
						buf.WriteByte(',')
					}
					task(&buf, k)
				}
				buf.WriteString(`]}`)
				if err := postExpect(ctx, hc, base+"/api/v1/tasks", buf.Bytes(), http.StatusCreated); err != nil {
					errc <- fmt.Errorf("batch at %d: %w", first, err)
					return
				}
			}
			errc <- nil
		}()
	}
	go func() {
		defer close(firsts)
		for k := 0; k < n; k += batch {
			select {
			case firsts <- k:
			case <-ctx.Done():
				return
			}
		}
	}()
	var first error
	for c := 0; c < clients; c++ {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// clusterSummary is the part of GET /api/v1/cluster the benches read.
type clusterSummary struct {
	Nodes     map[string]int `json:"nodes"`
	Pending   map[string]int `json:"pending"`
	Resources map[string]struct {
		Allocated int64 `json:"allocated"`
	} `json:"resources"`
	Tasks int `json:"tasks"`
}

// summary reads GET /api/v1/cluster.
func summary(ctx context.Context, base string) (*clusterSummary, error) {
	var s clusterSummary
	return &s, getJSON(ctx, base+"/api/v1/cluster", &s)
}

// countState pages through GET /api/v1/tasks?state=S.
func countState(ctx context.Context, base, state string) (int, error) {
	n, cursor := 0, ""
	for page := 0; page < 10_000; page++ {
		var body struct {
			Tasks  []json.RawMessage `json:"tasks"`
			Cursor string            `json:"cursor"`
		}
		u := base + "/api/v1/tasks?limit=10000&state=" + state
		if cursor != "" {
			u += "&cursor=" + cursor
		}
		if err := getJSON(ctx, u, &body); err != nil {
			return n, err
		}
		n += len(body.Tasks)
		if body.Cursor == "" {
			return n, nil
		}
		cursor = body.Cursor
	}
	return n, fmt.Errorf("more than 10,000 pages of %s tasks", state)
}

func getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("GET %s: status %d: %s", u, resp.StatusCode, b)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<30)).Decode(v)
}

// startOn64CPUNodes starts `hetsched server` (admission unlimited, extra
// flags appended) on n fake 64-CPU, 256 GiB nodes in a temporary
// directory; stop kills it and removes the directory.
func startOn64CPUNodes(bin string, n int, extra []string) (srv *childproc.Child, stop func(), err error) {
	dir, err := os.MkdirTemp("", "hetsched-bench-")
	if err != nil {
		return nil, nil, err
	}
	nodes := make([]api.Node, n)
	for i := range nodes {
		nodes[i] = api.Node{Name: "node-" + strconv.Itoa(i), Capacity: resource.List{resource.CPU: 64000, resource.Memory: 256 << 30}}
	}
	b, err := json.Marshal(api.NodesFile{Nodes: nodes})
	if err == nil {
		err = os.WriteFile(dir+"/nodes.json", b, 0o644)
	}
	if err == nil {
		args := append([]string{"server", "--listen", "127.0.0.1:0", "--data-dir", dir + "/data",
			"--nodes", dir + "/nodes.json", "--max-inflight", "-1"}, extra...)
		srv, err = childproc.Start(bin, 2*time.Minute, args...)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	return srv, func() { srv.Kill(); os.RemoveAll(dir) }, nil
}

// logTo is a printf to w, or nothing when w is nil.
func logTo(w io.Writer) func(format string, a ...any) {
	return func(format string, a ...any) {
		if w != nil {
			fmt.Fprintf(w, format, a...)
		}
	}
}
