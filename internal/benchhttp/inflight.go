package benchhttp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/loadgen"
	"github.com/hetsched/hetsched/internal/loadgen/h2raw"
)

// InflightOptions configures Inflight.
type InflightOptions struct {
	Bin      string
	Nodes    int
	Requests int
	// Conns is the number of h2c connections the requests are spread
	// over; each carries up to the server's stream limit (100,000).
	Conns int
	Mix   [4]int
	// ServerArgs are extra flags for `hetsched server`.
	ServerArgs []string
	// Hold is how long the requests are held, once all are in flight,
	// before the server's memory is read and the capacity released.
	Hold time.Duration
	// Timeout bounds the whole run.
	Timeout time.Duration
	Log     io.Writer
}

// InflightResult is what holding Requests waiting schedule requests in
// one server, then draining them, measured.
type InflightResult struct {
	Nodes    int `json:"nodes"`
	Requests int `json:"requests"`
	Conns    int `json:"connections"`
	// SendSeconds is from the first request sent until the server holds
	// every request as a committed task waiting for capacity.
	SendSeconds float64 `json:"send_seconds"`
	// Held is the number of requests in flight at the server when the
	// capacity was released (tasks it reported minus the blockers).
	Held         int              `json:"held"`
	ServerMemory childproc.Memory `json:"server_memory"`
	// ServerPeak is the server's peak RSS over the whole run, drain
	// included, read when the last request was answered.
	ServerPeak       int64 `json:"server_peak_rss_bytes"`
	ServerGoroutines int   `json:"server_goroutines"`
	// ServerStack and ServerHeap are the Go runtime's stack and heap bytes
	// in use at the hold (go_memstats_stack_inuse_bytes, _heap_inuse_).
	ServerStack  int64            `json:"server_stack_bytes"`
	ServerHeap   int64            `json:"server_heap_bytes"`
	ClientMemory childproc.Memory `json:"client_memory"`
	// DrainSeconds is from the release of capacity until the last answer.
	DrainSeconds float64 `json:"drain_seconds"`
	Answered     int64   `json:"answered"`
	Placed       int64   `json:"placed"`
	// Duplicates counts requests answered more than once; Lost those never
	// answered within the timeout.
	Duplicates int64            `json:"duplicates"`
	Lost       int64            `json:"lost"`
	ErrorsBy   map[string]int64 `json:"errors_by,omitempty"`
	// Inversions counts placements out of tier order: a task placed
	// strictly after (by the server's placement time) some task of a less
	// important tier.
	Inversions int64 `json:"inversions"`
	// Drain is the latency per tier from the release to each answer.
	Drain [4]loadgen.Latency `json:"drain"`
	// FirstPlaced and LastPlaced are per tier, in seconds after the
	// release, by the server's placement times.
	FirstPlaced [4]float64 `json:"first_placed_s"`
	LastPlaced  [4]float64 `json:"last_placed_s"`
}

// inflightSlot is one request's outcome, written once by its connection's
// reader.
type inflightSlot struct {
	answers   atomic.Int32
	tier      int8
	status    int32
	scheduled int64 // unix ns of the server's placement; 0 when not placed
	at        int64 // unix ns of the answer
	err       string
}

// Inflight starts a server with opt.Nodes 64-CPU nodes, fills every node
// with one whole-node lease (a full cluster), puts opt.Requests single-task
// POST /api/v1/schedule?wait=10m requests in flight over h2c, waits until
// the server holds them all as committed tasks, reads the server's memory,
// then completes the blocking leases and waits for every request's answer.
// Each waiting task asks for 100m CPU, so the released cluster fits 640 a
// node.
func Inflight(ctx context.Context, opt InflightOptions) (*InflightResult, error) {
	if opt.Nodes <= 0 || opt.Requests <= 0 || opt.Conns <= 0 {
		return nil, fmt.Errorf("nodes, requests and connections must be positive")
	}
	if opt.Requests > opt.Nodes*640 {
		return nil, fmt.Errorf("requests: %d do not fit on %d nodes (640 a node)", opt.Requests, opt.Nodes)
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
	hc := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}

	// Fill: one whole-node lease per node.
	t0 := time.Now()
	for first := 0; first < opt.Nodes; first += 1000 {
		var buf bytes.Buffer
		buf.WriteString(`{"tasks":[`)
		for k := first; k < min(first+1000, opt.Nodes); k++ {
			if k > first {
				buf.WriteByte(',')
			}
			fmt.Fprintf(&buf, `{"id":"b%d","priority":0,"preemptible":false,"resources":{"cpu":"64","memory":"1Gi"},"lease":"1h"}`, k)
		}
		buf.WriteString(`]}`)
		if err := postExpect(ctx, hc, srv.URL+"/api/v1/schedule?wait=1m", buf.Bytes(), http.StatusOK); err != nil {
			return nil, fmt.Errorf("filling the cluster: %w", err)
		}
	}
	logf("cluster full: %d nodes, one whole-node lease each, in %.1fs\n", opt.Nodes, time.Since(t0).Seconds())

	res := &InflightResult{Nodes: opt.Nodes, Requests: opt.Requests, Conns: opt.Conns, ErrorsBy: map[string]int64{}}
	slots := make([]inflightSlot, opt.Requests)
	var answered atomic.Int64
	allAnswered := make(chan struct{})
	onResponse := func(r h2raw.Response) {
		s := &slots[r.Tag]
		if s.answers.Add(1) > 1 {
			return
		}
		s.at = r.At.UnixNano()
		s.status = int32(r.Status)
		switch {
		case r.Err != nil:
			s.err = "transport: " + r.Err.Error()
		case r.Status != http.StatusOK:
			s.err = strconv.Itoa(r.Status)
		default:
			var v struct {
				State     string     `json:"state"`
				Scheduled *time.Time `json:"scheduled"`
			}
			if err := json.Unmarshal(r.Body, &v); err != nil {
				s.err = "body: " + err.Error()
			} else if v.State != "scheduled" || v.Scheduled == nil {
				s.err = "state " + v.State
			} else {
				s.scheduled = v.Scheduled.UnixNano()
			}
		}
		if answered.Add(1) == int64(opt.Requests) {
			close(allAnswered)
		}
	}
	u, err := url.Parse(srv.URL)
	if err != nil {
		return nil, err
	}
	conns := make([]*h2raw.Conn, opt.Conns)
	for i := range conns {
		if conns[i], err = h2raw.Dial(u.Host, h2raw.Options{OnResponse: onResponse, IdleTimeout: opt.Timeout}); err != nil {
			return nil, err
		}
		defer conns[i].Close()
	}
	if lim := conns[0].MaxStreams(); lim*opt.Conns < opt.Requests {
		return nil, fmt.Errorf("connections: %d × the server's %d streams cannot carry %d requests", opt.Conns, lim, opt.Requests)
	}

	// Send: one goroutine per connection, tiers dealt by the mix.
	total := opt.Mix[0] + opt.Mix[1] + opt.Mix[2] + opt.Mix[3]
	if total <= 0 {
		return nil, fmt.Errorf("mix: no tier has weight")
	}
	tierOf := func(i int) int8 { return int8(dealTier(i, opt.Mix, total)) }
	t1 := time.Now()
	var wg sync.WaitGroup
	sendErr := make(chan error, opt.Conns)
	const path = "/api/v1/schedule?wait=10m"
	for c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body []byte
			for i := c; i < opt.Requests; i += opt.Conns {
				t := tierOf(i)
				slots[i].tier = t
				body = fmt.Appendf(body[:0], `{"id":"w%d","priority":%d,"resources":{"cpu":"100m","memory":"64Mi"},"lease":"10m"}`, i, t)
				if err := conns[c].Post(path, nil, body, uint64(i)); err != nil {
					sendErr <- err
					return
				}
				if i%(64*opt.Conns) == c {
					if err := conns[c].Flush(); err != nil {
						sendErr <- err
						return
					}
				}
			}
			if err := conns[c].Flush(); err != nil {
				sendErr <- err
			}
		}()
	}
	wg.Wait()
	close(sendErr)
	if err := <-sendErr; err != nil {
		return nil, fmt.Errorf("sending: %w", err)
	}
	logf("%d requests sent over %d h2c connections in %.1fs; waiting for the server to hold them\n",
		opt.Requests, opt.Conns, time.Since(t1).Seconds())
	// Held: every request committed as a task (the server counts tasks).
	for {
		n, err := countTasks(ctx, srv.URL)
		if err != nil {
			return nil, err
		}
		res.Held = n - opt.Nodes
		if res.Held >= opt.Requests {
			break
		}
		if a := answered.Load(); a > 0 {
			return nil, fmt.Errorf("%d requests answered before the release (first: %s)", a, firstErr(slots))
		}
		logf("  server holds %d\n", res.Held)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the server holds %d of %d: %w", res.Held, opt.Requests, ctx.Err())
		case <-time.After(500 * time.Millisecond):
		}
	}
	res.SendSeconds = time.Since(t1).Seconds()
	if opt.Hold > 0 {
		logf("holding for %v\n", opt.Hold)
		select {
		case <-time.After(opt.Hold):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	runtime.GC()
	if res.ServerMemory, err = childproc.ReadMemory(srv.Pid()); err != nil {
		return nil, err
	}
	if res.ClientMemory, err = childproc.ReadMemory(os.Getpid()); err != nil {
		return nil, err
	}
	if m, err := scrape(ctx, hc, srv.URL, "go_goroutines", "go_memstats_stack_inuse_bytes", "go_memstats_heap_inuse_bytes"); err == nil {
		res.ServerGoroutines, res.ServerStack, res.ServerHeap = int(m[0]), int64(m[1]), int64(m[2])
	}
	logf("held %d requests after %.1fs: server RSS %.0f MiB (peak %.0f; Go stacks %.0f MiB, heap %.0f MiB), %d goroutines; client RSS %.0f MiB\n",
		res.Held, res.SendSeconds, mib(res.ServerMemory.RSS), mib(res.ServerMemory.Peak), mib(res.ServerStack), mib(res.ServerHeap),
		res.ServerGoroutines, mib(res.ClientMemory.RSS))
	if a := answered.Load(); a > 0 {
		return nil, fmt.Errorf("%d requests answered before the release (first: %s)", a, firstErr(slots))
	}

	// Release: complete every blocking lease.
	release := time.Now()
	ids := make(chan int)
	relErr := make(chan error, 16)
	for w := 0; w < 16; w++ {
		go func() {
			for k := range ids {
				if err := postExpect(ctx, hc, fmt.Sprintf("%s/api/v1/tasks/b%d/complete", srv.URL, k), []byte(`{"exitCode":0}`), http.StatusOK); err != nil {
					relErr <- err
					return
				}
			}
			relErr <- nil
		}()
	}
	for k := 0; k < opt.Nodes; k++ {
		ids <- k
	}
	close(ids)
	for w := 0; w < 16; w++ {
		if err := <-relErr; err != nil {
			return nil, fmt.Errorf("releasing: %w", err)
		}
	}
	logf("capacity released (%d leases completed) in %.1fs\n", opt.Nodes, time.Since(release).Seconds())
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case <-allAnswered:
			break wait
		case <-tick.C:
			logf("  %d of %d answered after %.0fs\n", answered.Load(), opt.Requests, time.Since(release).Seconds())
		case <-ctx.Done():
			break wait
		}
	}
	res.Answered = answered.Load()
	if m, err := childproc.ReadMemory(srv.Pid()); err == nil {
		res.ServerPeak = m.Peak
	}
	summarizeInflight(res, slots, release)
	return res, nil
}

func summarizeInflight(res *InflightResult, slots []inflightSlot, release time.Time) {
	var hist [4]*hdrhistogram.Histogram
	first, last := [4]int64{}, [4]int64{}
	for t := range hist {
		hist[t] = hdrhistogram.New(1, 3_600_000_000, 3)
	}
	var lastAt int64
	for i := range slots {
		s := &slots[i]
		n := s.answers.Load()
		switch {
		case n == 0:
			res.Lost++
			continue
		case n > 1:
			res.Duplicates += int64(n - 1)
		}
		lastAt = max(lastAt, s.at)
		if s.err != "" {
			k := s.err
			if i := strings.IndexByte(k, ':'); i > 0 {
				k = k[:i]
			}
			res.ErrorsBy[k]++
			continue
		}
		res.Placed++
		t := s.tier
		_ = hist[t].RecordValue(max(1, (s.at-release.UnixNano())/1000))
		if first[t] == 0 || s.scheduled < first[t] {
			first[t] = s.scheduled
		}
		last[t] = max(last[t], s.scheduled)
	}
	if lastAt > 0 {
		res.DrainSeconds = float64(lastAt-release.UnixNano()) / 1e9
	}
	for t := range hist {
		h := hist[t]
		res.Drain[t] = loadgen.Latency{Count: h.TotalCount(), P50: float64(h.ValueAtQuantile(50)), P99: float64(h.ValueAtQuantile(99)),
			P999: float64(h.ValueAtQuantile(99.9)), Max: float64(h.Max()), Mean: h.Mean()}
		if first[t] > 0 {
			res.FirstPlaced[t] = float64(first[t]-release.UnixNano()) / 1e9
			res.LastPlaced[t] = float64(last[t]-release.UnixNano()) / 1e9
		}
	}
	// minAfter[t]: the earliest placement of any tier less important than t.
	var minAfter [4]int64
	minAfter[3] = 1<<63 - 1
	for t := 2; t >= 0; t-- {
		minAfter[t] = minAfter[t+1]
		if first[t+1] > 0 {
			minAfter[t] = min(minAfter[t], first[t+1])
		}
	}
	for i := range slots {
		s := &slots[i]
		if s.scheduled > 0 && s.scheduled > minAfter[s.tier] {
			res.Inversions++
		}
	}
}

func firstErr(slots []inflightSlot) string {
	for i := range slots {
		if slots[i].answers.Load() > 0 {
			return fmt.Sprintf("request %d: status %d %s", i, slots[i].status, slots[i].err)
		}
	}
	return "none"
}

func postExpect(ctx context.Context, hc *http.Client, u string, body []byte, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("POST %s: status %d (want %d): %s", u, resp.StatusCode, want, b)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<20))
	return nil
}

// scrape reads the named unlabelled samples from the server's /metrics.
func scrape(ctx context.Context, hc *http.Client, base string, names ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, found := make([]float64, len(names)), 0
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 64<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		for i, n := range names {
			if n == name {
				if out[i], err = strconv.ParseFloat(v, 64); err != nil {
					return nil, fmt.Errorf("%s: %w", n, err)
				}
				found++
			}
		}
	}
	if found < len(names) {
		return out, fmt.Errorf("%s/metrics lacks some of %v", base, names)
	}
	return out, nil
}

func secs(us float64) string { return strconv.FormatFloat(us/1e6, 'f', 3, 64) + "s" }

// InflightTable prints r for a terminal.
func InflightTable(w io.Writer, r *InflightResult) {
	fmt.Fprintf(w, "held %d schedule requests on %d full nodes over %d h2c connections (sent and committed in %.1fs)\n",
		r.Held, r.Nodes, r.Conns, r.SendSeconds)
	fmt.Fprintf(w, "server RSS %.0f MiB (peak %.0f MiB, %.1f KiB a request; Go stacks %.0f MiB, heap in use %.0f MiB), %d goroutines; client RSS %.0f MiB\n",
		mib(r.ServerMemory.RSS), mib(r.ServerMemory.Peak), float64(r.ServerMemory.RSS)/1024/float64(max(1, r.Held)),
		mib(r.ServerStack), mib(r.ServerHeap), r.ServerGoroutines, mib(r.ClientMemory.RSS))
	fmt.Fprintf(w, "server peak RSS over the run %.0f MiB\n", mib(r.ServerPeak))
	fmt.Fprintf(w, "drained in %.1fs: %d answered, %d placed, %d lost, %d answered twice, %d placed out of tier order, errors %v\n",
		r.DrainSeconds, r.Answered, r.Placed, r.Lost, r.Duplicates, r.Inversions, r.ErrorsBy)
	fmt.Fprintf(w, "%-8s %9s %12s %12s %10s %10s %10s\n", "tier", "placed", "first (s)", "last (s)", "p50", "p99", "max")
	for t, d := range r.Drain {
		fmt.Fprintf(w, "%-8s %9d %12.3f %12.3f %10s %10s %10s\n", api.TierNames[t], d.Count, r.FirstPlaced[t], r.LastPlaced[t],
			secs(d.P50), secs(d.P99), secs(d.Max))
	}
}

// dealTier deals request i a tier by the mix's weights (total is their
// sum), spread evenly over the sequence.
func dealTier(i int, mix [4]int, total int) int {
	k, acc := (i*7919)%total, 0
	for t := 0; t < 4; t++ {
		if acc += mix[t]; k < acc {
			return t
		}
	}
	return 3
}
