package benchhttp

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
)

// BulkOptions configures Bulk.
type BulkOptions struct {
	Bin string
	// ServerBin, when set, is the hetsched binary the server and the fleet
	// run (a baseline build, side by side); Bin otherwise.
	ServerBin string
	// Nodes is the fake fleet's size (its agent heartbeats them all every
	// 2 s); Tasks go in Batch-task requests, one after another, from one
	// client.
	Nodes, Tasks, Batch int
	// Probe is how often the probe heartbeats its own agent node, reads
	// GET /api/v1/cluster and submits one urgent task.
	Probe   time.Duration
	Timeout time.Duration
	Log     io.Writer
}

// Latencies summarises one probe's round trips, in milliseconds.
type Latencies struct {
	N        int     `json:"n"`
	Failures int     `json:"failures"`
	P50      float64 `json:"p50_ms"`
	P99      float64 `json:"p99_ms"`
	Max      float64 `json:"max_ms"`
}

// BulkResult is what one tenant's bulk submission did to everyone else
// (issue 41 §3): the heartbeats, reads and urgent submissions of a probe
// while it ran, the fleet's nodes that went notready, and the urgent
// tier's scheduling attempts as the server measured them.
type BulkResult struct {
	Nodes         int       `json:"nodes"`
	Tasks         int       `json:"tasks"`
	Batch         int       `json:"batch"`
	SubmitSeconds float64   `json:"submit_seconds"`
	Heartbeat     Latencies `json:"heartbeat"`
	Cluster       Latencies `json:"cluster_read"`
	StaleReads    int       `json:"stale_reads"`
	Urgent        Latencies `json:"urgent_submit"`
	// NotReady is the most fleet nodes seen notready at once.
	NotReady int `json:"not_ready_max"`
	// UrgentAttemptP99 is the p99 of hetsched_scheduling_attempt_duration_seconds
	// {tier="urgent",result="scheduled"} over the run, in ms: the upper
	// bound of the histogram bucket it falls in (-1: past 10 s).
	UrgentAttemptP99 float64 `json:"urgent_attempt_p99_ms"`
	UrgentAttempts   int     `json:"urgent_attempts"`
	// UrgentDecisionP99 is the same of hetsched_scheduling_decision_seconds
	// {tier="urgent"}: the core's part, without the step's commit (0 on a
	// server without that histogram).
	UrgentDecisionP99 float64 `json:"urgent_decision_p99_ms"`
}

// Bulk starts a server on Pebble and a fake fleet of opt.Nodes nodes,
// then submits opt.Tasks one-CPU lease tasks (most of them wait: the
// fleet is 8 CPUs a node) in opt.Batch-task requests while a probe agent
// heartbeats, reads the cluster summary and submits an urgent task every
// opt.Probe.
func Bulk(ctx context.Context, opt BulkOptions) (*BulkResult, error) {
	if opt.Nodes <= 0 || opt.Tasks <= 0 || opt.Batch <= 0 || opt.Probe <= 0 {
		return nil, fmt.Errorf("nodes, tasks, batch and probe must be positive")
	}
	if opt.Timeout <= 0 {
		opt.Timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opt.Timeout)
	defer cancel()
	logf := logTo(opt.Log)
	var res *BulkResult
	bin := opt.Bin
	if opt.ServerBin != "" {
		bin = opt.ServerBin
	}
	err := withFleet(ctx, bin, opt.Nodes, nil, func(srv, _ *childproc.Child, hc *http.Client, ready time.Duration) error {
		logf("bulk: %d fleet nodes ready in %.1fs\n", opt.Nodes, ready.Seconds())
		p := &bulkProbe{base: srv.URL, hc: &http.Client{Timeout: time.Minute}}
		if err := p.register(ctx); err != nil {
			return err
		}
		before, beforeCore, err := urgentAttempts(ctx, srv.URL)
		if err != nil {
			return err
		}
		pctx, stopProbe := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(4)
		go func() { defer wg.Done(); p.every(pctx, opt.Probe, p.heartbeat, &p.beats) }()
		go func() { defer wg.Done(); p.every(pctx, opt.Probe, p.readCluster, &p.reads) }()
		go func() { defer wg.Done(); p.every(pctx, opt.Probe, p.urgent, &p.urgents) }()
		go func() { defer wg.Done(); p.watchNotReady(pctx, opt.Probe) }()
		t0 := time.Now()
		err = submitBatches(ctx, srv.URL, opt.Tasks, opt.Batch, 1, func(buf *bytes.Buffer, k int) {
			fmt.Fprintf(buf, `{"id":"bulk%d","priority":3,"resources":{"cpu":"1"},"lease":"10m"}`, k)
		})
		took := time.Since(t0)
		stopProbe()
		wg.Wait()
		if err != nil {
			return fmt.Errorf("%w; the server said: %s", err, tailOf(srv.Stderr(), 4000))
		}
		after, afterCore, err := urgentAttempts(ctx, srv.URL)
		if err != nil {
			return err
		}
		res = &BulkResult{Nodes: opt.Nodes, Tasks: opt.Tasks, Batch: opt.Batch, SubmitSeconds: took.Seconds(),
			Heartbeat: p.beats.summary(), Cluster: p.reads.summary(), StaleReads: p.stale, Urgent: p.urgents.summary(), NotReady: p.notReady}
		res.UrgentAttemptP99, res.UrgentAttempts = after.minus(before).quantile(0.99)
		res.UrgentDecisionP99, _ = afterCore.minus(beforeCore).quantile(0.99)
		logf("bulk: %d tasks in %.1fs; heartbeat p99 %.1f ms (max %.1f, %d failed); /cluster p99 %.1f ms (%d stale); urgent submit p99 %.1f ms; urgent attempt p99 ≤ %.3f ms (%d), its decision in the core ≤ %.3f ms; notready at most %d\n",
			opt.Tasks, res.SubmitSeconds, res.Heartbeat.P99, res.Heartbeat.Max, res.Heartbeat.Failures, res.Cluster.P99, res.StaleReads,
			res.Urgent.P99, res.UrgentAttemptP99, res.UrgentAttempts, res.UrgentDecisionP99, res.NotReady)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// bulkProbe is the bench's own agent and client while the bulk runs.
type bulkProbe struct {
	base                  string
	hc                    *http.Client
	mu                    sync.Mutex
	beats, reads, urgents samples
	stale, notReady, seq  int
}

// samples are one probe's round trips.
type samples struct {
	took     []time.Duration
	failures int
}

func (s *samples) summary() Latencies {
	l := Latencies{N: len(s.took), Failures: s.failures}
	if len(s.took) == 0 {
		return l
	}
	slices.Sort(s.took)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	l.P50 = ms(s.took[len(s.took)/2])
	l.P99 = ms(s.took[min(len(s.took)-1, len(s.took)*99/100)])
	l.Max = ms(s.took[len(s.took)-1])
	return l
}

const probeAgent = "bench-probe"

func (p *bulkProbe) register(ctx context.Context) error {
	body := `{"agent":"` + probeAgent + `","nodes":[{"name":"` + probeAgent + `","capacity":{"cpu":"1"}}]}`
	return postExpect(ctx, p.hc, p.base+"/api/v1/agents/register", []byte(body), http.StatusOK)
}

// every runs fn every period until ctx ends, recording its round trips.
func (p *bulkProbe) every(ctx context.Context, period time.Duration, fn func(context.Context) error, into *samples) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		t0 := time.Now()
		err := fn(ctx)
		took := time.Since(t0)
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		if err != nil {
			into.failures++
		} else {
			into.took = append(into.took, took)
		}
		p.mu.Unlock()
	}
}

func (p *bulkProbe) heartbeat(ctx context.Context) error {
	body := `{"nodes":[{"node":"` + probeAgent + `","cpu":0.1}]}`
	return postExpect(ctx, p.hc, p.base+"/api/v1/agents/"+probeAgent+"/heartbeat", []byte(body), http.StatusOK)
}

func (p *bulkProbe) readCluster(ctx context.Context) error {
	var s struct {
		Stale bool `json:"stale"`
	}
	if err := getJSON(ctx, p.base+"/api/v1/cluster", &s); err != nil {
		return err
	}
	if s.Stale {
		p.mu.Lock()
		p.stale++
		p.mu.Unlock()
	}
	return nil
}

func (p *bulkProbe) urgent(ctx context.Context) error {
	p.mu.Lock()
	p.seq++
	id := "urgent" + strconv.Itoa(p.seq)
	p.mu.Unlock()
	body := `{"tasks":[{"id":"` + id + `","priority":0,"resources":{"cpu":"100m"},"lease":"1s"}]}`
	return postExpect(ctx, p.hc, p.base+"/api/v1/tasks", []byte(body), http.StatusCreated)
}

// watchNotReady records the most fleet nodes notready at once.
func (p *bulkProbe) watchNotReady(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		states, err := nodeStates(ctx, p.base)
		if err != nil {
			continue
		}
		p.mu.Lock()
		p.notReady = max(p.notReady, states["notready"])
		p.mu.Unlock()
	}
}

// histogram is one histogram's cumulative bucket counts by upper bound.
type histogram map[float64]float64

// urgentAttempts reads the urgent tier's histograms of scheduled
// attempts and of their decisions in the core.
func urgentAttempts(ctx context.Context, base string) (attempt, decision histogram, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	attempt, decision = histogram{}, histogram{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 256<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var h histogram
		switch {
		case !strings.Contains(line, `tier="urgent"`):
			continue
		case strings.HasPrefix(line, `hetsched_scheduling_attempt_duration_seconds_bucket{`) && strings.Contains(line, `result="scheduled"`):
			h = attempt
		case strings.HasPrefix(line, `hetsched_scheduling_decision_seconds_bucket{`):
			h = decision
		default:
			continue
		}
		i := strings.Index(line, `le="`)
		j := strings.LastIndexByte(line, ' ')
		if i < 0 || j < 0 {
			continue
		}
		le := line[i+4:]
		le = le[:strings.IndexByte(le, '"')]
		ub, err1 := strconv.ParseFloat(le, 64)
		n, err2 := strconv.ParseFloat(line[j+1:], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		h[ub] = n
	}
	return attempt, decision, sc.Err()
}

func (h histogram) minus(o histogram) histogram {
	out := histogram{}
	for ub, n := range h {
		out[ub] = n - o[ub]
	}
	return out
}

// quantile is the upper bound (ms) of the bucket holding quantile q, and
// the count of observations; -1 when it is past the largest finite bound
// (JSON has no infinity).
func (h histogram) quantile(q float64) (float64, int) {
	bounds := make([]float64, 0, len(h))
	for ub := range h {
		bounds = append(bounds, ub)
	}
	slices.Sort(bounds)
	if len(bounds) == 0 {
		return 0, 0
	}
	total := h[bounds[len(bounds)-1]] // +Inf
	if total <= 0 {
		return 0, 0
	}
	for _, ub := range bounds {
		if h[ub] >= q*total {
			if math.IsInf(ub, 1) {
				return -1, int(total)
			}
			return ub * 1000, int(total)
		}
	}
	return -1, int(total)
}

// tailOf is the last n bytes of s.
func tailOf(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
