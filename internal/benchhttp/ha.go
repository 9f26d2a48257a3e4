package benchhttp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/loadgen"
)

// The store setups HA compares.
const (
	SetupPebble = "pebble" // one server, the embedded Pebble store
	SetupEtcd1  = "etcd1"  // one server with a one-member embedded etcd (--ha, no peers)
	SetupHA3    = "ha3"    // three --ha servers, a three-member etcd, on loopback
)

// HAOptions configures HA.
type HAOptions struct {
	Bin    string
	Setups []string
	// Tasks are submitted in batches of Batch from Clients clients
	// (pending tasks: they ask more CPU than any node has).
	Tasks, Batch, Clients int
	// Nodes are the static nodes the single-task schedule load (for
	// Duration, on each of Connections) is placed on.
	Nodes       int
	Connections []int
	Duration    time.Duration
	Log         io.Writer
}

// HAResult is one setup's figures.
type HAResult struct {
	Setup string `json:"setup"`
	// SubmitRate is the batch submission's acknowledged tasks/s.
	SubmitRate    float64 `json:"submit_tasks_per_s"`
	SubmitSeconds float64 `json:"submit_seconds"`
	// Schedule is the single-task POST /schedule load per connection
	// count (scheduled/s and latency).
	Schedule []*loadgen.Result `json:"schedule"`
	// Takeover is from SIGKILL of the (leading) server with every task
	// stored until a server acknowledges a write again: a restart of the
	// one server, a standby's takeover for ha3.
	TakeoverSeconds float64 `json:"takeover_seconds"`
	Tasks           int     `json:"tasks"`
}

// haCluster is the server processes of one setup.
type haCluster struct {
	bin   string
	setup string
	args  [][]string // each server's command line (without the binary)
	urls  []string
	procs []*childproc.Child
	dir   string
}

func newHACluster(bin, setup, nodes string) (*haCluster, error) {
	dir, err := os.MkdirTemp("", "hetsched-bench-ha-")
	if err != nil {
		return nil, err
	}
	c := &haCluster{bin: bin, setup: setup, dir: dir}
	common := []string{"--nodes", nodes, "--max-inflight", "-1", "--max-conns-per-ip", "-1", "--memory-limit", "off"}
	n := 1
	if setup == SetupHA3 {
		n = 3
	}
	ports, err := childproc.FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var peers []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("s%d=http://127.0.0.1:%d", i+1, ports[n+i]))
	}
	for i := range n {
		addr := "127.0.0.1:" + strconv.Itoa(ports[i])
		args := []string{"server", "--listen", addr, "--data-dir", filepath.Join(dir, "s"+strconv.Itoa(i+1))}
		switch setup {
		case SetupPebble:
		case SetupEtcd1:
			args = append(args, "--ha", "--name", "s1")
		case SetupHA3:
			args = append(args, "--ha", "--name", fmt.Sprintf("s%d", i+1), "--peers", strings.Join(peers, ","))
		default:
			return nil, fmt.Errorf("setup: want pebble, etcd1 or ha3, got %q", setup)
		}
		c.args = append(c.args, append(args, common...))
		c.urls = append(c.urls, "http://"+addr)
	}
	c.procs = make([]*childproc.Child, n)
	errc := make(chan error, n)
	for i := range n {
		go func() { errc <- c.start(i) }()
	}
	for range n {
		if err := <-errc; err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

func (c *haCluster) start(i int) error {
	p, err := childproc.Start(c.bin, 5*time.Minute, c.args[i]...)
	if err != nil {
		return err
	}
	c.procs[i] = p
	return nil
}

func (c *haCluster) stop() {
	for _, p := range c.procs {
		if p != nil {
			p.Kill()
		}
	}
	os.RemoveAll(c.dir)
}

// leader waits until one server is ready and leads (GET /readyz 200 and
// not "standby"), up to d.
func (c *haCluster) leader(ctx context.Context, d time.Duration) (int, error) {
	deadline := time.Now().Add(d)
	hc := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) && ctx.Err() == nil {
		for i, u := range c.urls {
			if c.procs[i] == nil {
				continue
			}
			resp, err := hc.Get(u + "/readyz")
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && !bytes.Contains(b, []byte("standby")) {
				return i, nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return -1, fmt.Errorf("%s: no leader within %s", c.setup, d)
}

// HA runs each setup in turn, in one run: the single-task schedule load,
// the batch submission of Tasks pending tasks, then the takeover (or
// restart) with them all stored.
func HA(ctx context.Context, opt HAOptions) ([]HAResult, error) {
	if opt.Tasks <= 0 || opt.Batch <= 0 || opt.Clients <= 0 || opt.Nodes <= 0 || opt.Duration <= 0 {
		return nil, fmt.Errorf("tasks, batch, clients, nodes and duration must be positive")
	}
	logf := logTo(opt.Log)
	dir, err := os.MkdirTemp("", "hetsched-bench-ha-nodes-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	nodes := filepath.Join(dir, "nodes.json")
	if err := WriteNodesFile(nodes, opt.Nodes); err != nil {
		return nil, err
	}
	var out []HAResult
	for _, setup := range opt.Setups {
		r, err := haSetup(ctx, opt, setup, nodes, logf)
		if err != nil {
			return out, fmt.Errorf("%s: %w", setup, err)
		}
		out = append(out, *r)
	}
	return out, nil
}

func haSetup(ctx context.Context, opt HAOptions, setup, nodes string, logf func(string, ...any)) (*HAResult, error) {
	c, err := newHACluster(opt.Bin, setup, nodes)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	l, err := c.leader(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
	res := &HAResult{Setup: setup, Tasks: opt.Tasks}
	for _, n := range opt.Connections {
		lo := loadgen.Options{Target: c.urls[l], Connections: n, Duration: opt.Duration, Mix: [4]int{0, 1, 0, 0},
			Complete: true, RunID: setup + "c" + strconv.Itoa(n)}
		r, err := loadgen.Run(ctx, lo)
		if err != nil {
			return nil, err
		}
		res.Schedule = append(res.Schedule, r)
		logf("%s: schedule, %d connections: %.0f scheduled/s, p50 %.2f ms, p99 %.2f ms, %d errors\n",
			setup, n, r.Rate, r.All.P50/1000, r.All.P99/1000, r.Errors)
	}
	t0 := time.Now()
	err = submitBatches(ctx, c.urls[l], opt.Tasks, opt.Batch, opt.Clients, func(buf *bytes.Buffer, k int) {
		fmt.Fprintf(buf, `{"id":"p%d","priority":3,"resources":{"cpu":"100000"}}`, k)
	})
	if err != nil {
		return nil, err
	}
	res.SubmitSeconds = time.Since(t0).Seconds()
	res.SubmitRate = float64(opt.Tasks) / res.SubmitSeconds
	logf("%s: %d tasks acknowledged in %.1fs (%.0f tasks/s)\n", setup, opt.Tasks, res.SubmitSeconds, res.SubmitRate)
	took, err := c.takeover(ctx, l)
	if err != nil {
		return nil, err
	}
	res.TakeoverSeconds = took.Seconds()
	logf("%s: with %d tasks stored, a write acknowledged %.2fs after SIGKILL of the leader\n", setup, opt.Tasks, res.TakeoverSeconds)
	for _, p := range c.procs {
		if p == nil {
			continue
		}
		for _, line := range strings.Split(p.Stderr(), "\n") {
			if strings.Contains(line, "msg=leading") || strings.Contains(line, "revoked its leadership grant") || strings.Contains(line, "engine recovered") {
				logf("  %s\n", line)
			}
		}
	}
	return res, nil
}

// takeover kills server l and times until a write is acknowledged again:
// by a standby, or by the one server restarted on its data dir.
func (c *haCluster) takeover(ctx context.Context, l int) (time.Duration, error) {
	killed := time.Now()
	c.procs[l].Kill()
	c.procs[l] = nil
	if len(c.urls) == 1 {
		if err := c.start(l); err != nil {
			return 0, err
		}
	}
	hc := &http.Client{Timeout: 3 * time.Second}
	deadline := time.Now().Add(10 * time.Minute)
	for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
		for k, u := range c.urls {
			if c.procs[k] == nil {
				continue
			}
			body := fmt.Sprintf(`{"id":"takeover-%d","resources":{"cpu":"100000"}}`, i)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u+"/api/v1/tasks", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				continue
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusCreated {
				return time.Since(killed), nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("no write acknowledged within 10 minutes of the kill")
}

// HATable prints the setups side by side with ratios to the first.
func HATable(w io.Writer, rs []HAResult) {
	if len(rs) == 0 {
		return
	}
	base := rs[0]
	fmt.Fprintf(w, "%-7s %14s %7s", "setup", "batch tasks/s", "ratio")
	for _, s := range base.Schedule {
		fmt.Fprintf(w, " %10s %9s %9s", fmt.Sprintf("sched/s@%d", s.Connections), "p50 ms", "p99 ms")
	}
	fmt.Fprintf(w, " %11s\n", "takeover s")
	for _, r := range rs {
		fmt.Fprintf(w, "%-7s %14.0f %7.2f", r.Setup, r.SubmitRate, r.SubmitRate/base.SubmitRate)
		for _, s := range r.Schedule {
			fmt.Fprintf(w, " %10.0f %9.2f %9.2f", s.Rate, s.All.P50/1000, s.All.P99/1000)
		}
		fmt.Fprintf(w, " %11.2f\n", r.TakeoverSeconds)
	}
}
