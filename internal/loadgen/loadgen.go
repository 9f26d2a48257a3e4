// Package loadgen drives HTTP load at a hetsched server (or at the echo
// floor) from many keep-alive connections and reports throughput and
// latency per priority tier.
//
// Contracts:
//   - Closed loop: each connection has one request outstanding; latency is
//     measured from the send of the schedule request to the end of its
//     response. (Open-loop arrival rates come with the load-generator
//     issue.)
//   - Every connection is its own http.Transport limited to one
//     connection, so Connections is exactly the number of TCP connections;
//     with SourceAddrs > 1 they are spread over 127.0.0.1..N source
//     addresses so that large counts do not exhaust one address's ports.
//   - Every request has a timeout; Run returns when Duration has passed and
//     every connection has finished its last request.
package loadgen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Options configures a run.
type Options struct {
	// Target is the base URL ("http://127.0.0.1:7070").
	Target string
	// Token is sent as a bearer token when set.
	Token       string
	Connections int
	Duration    time.Duration
	// Mix weighs the four tiers (urgent, high, medium, low).
	Mix [4]int
	// Echo sends each task body to "/" (the echo floor) instead of
	// scheduling it.
	Echo bool
	// Complete releases each placed lease at once with a second request,
	// so that capacity never runs out.
	Complete bool
	// Wait is the schedule request's ?wait= (default 2s).
	Wait time.Duration
	// SourceAddrs spreads connections over this many loopback source
	// addresses (1 = the default address).
	SourceAddrs int
	// Timeout bounds each request (default 30s).
	Timeout time.Duration
	// Progress, when set, gets a line each second.
	Progress io.Writer
	// Resources is the task's resources object (default {"cpu":"10m"}).
	Resources string
	// Lease is each task's lease (default 5m): without Complete, placed
	// tasks hold their resources until it runs out.
	Lease time.Duration
	// RunID makes task ids unique across runs against one server.
	RunID string
	// Rate, when positive, makes the load open-loop: requests are sent at
	// this many per second in all (spread evenly over the senders), each
	// at its scheduled time whether or not earlier ones were answered, and
	// latency is measured from the scheduled time (no coordinated
	// omission). Zero: closed loop, one request in flight per sender.
	Rate float64
	// H2C speaks HTTP/2 without TLS (prior knowledge) and runs Streams
	// concurrent senders over each of the Connections connections.
	H2C     bool
	Streams int
}

// Latency is a latency distribution in microseconds.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50_us"`
	P99   float64 `json:"p99_us"`
	P999  float64 `json:"p999_us"`
	Max   float64 `json:"max_us"`
	Mean  float64 `json:"mean_us"`
}

// Result is what a run measured.
type Result struct {
	Target      string           `json:"target"`
	Connections int              `json:"connections"`
	Seconds     float64          `json:"seconds"`
	Requests    int64            `json:"requests"`  // every successful HTTP request
	Scheduled   int64            `json:"scheduled"` // successful schedule (or echo) requests
	RequestRate float64          `json:"requests_per_s"`
	Rate        float64          `json:"scheduled_per_s"`
	Errors      int64            `json:"errors"`
	ErrorsBy    map[string]int64 `json:"errors_by,omitempty"` // HTTP status or "transport"
	Pending     int64            `json:"answered_pending"`    // 202: not placed within wait
	All         Latency          `json:"all"`
	Tiers       [4]Latency       `json:"tiers"` // urgent, high, medium, low
}

type worker struct {
	hist    [4]*hdrhistogram.Histogram
	errs    map[string]int64
	pending int64
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 120_000_000, 3) }

// Run drives the load described by opt.
func Run(ctx context.Context, opt Options) (*Result, error) {
	if opt.Connections <= 0 {
		return nil, fmt.Errorf("connections: must be positive, got %d", opt.Connections)
	}
	if opt.Duration <= 0 {
		return nil, fmt.Errorf("duration: must be positive, got %v", opt.Duration)
	}
	if opt.Rate < 0 || opt.Rate > 1e8 {
		return nil, fmt.Errorf("rate: must be 0 (closed loop) up to 1e8 requests/s, got %v", opt.Rate)
	}
	if opt.Streams < 0 || opt.Streams > 1_000_000 || (opt.Streams > 0 && !opt.H2C) {
		return nil, fmt.Errorf("streams: must be 0..1000000, and only with h2c, got %d", opt.Streams)
	}
	total := 0
	for i, w := range opt.Mix {
		if w < 0 {
			return nil, fmt.Errorf("mix: tier %d has a negative weight", i)
		}
		total += w
	}
	if total == 0 {
		opt.Mix = [4]int{1, 0, 0, 0}
		total = 1
	}
	if opt.Wait == 0 {
		opt.Wait = 2 * time.Second
	}
	if opt.Timeout == 0 {
		opt.Timeout = 30 * time.Second
	}
	if opt.SourceAddrs <= 0 {
		opt.SourceAddrs = 1
	}
	if opt.Lease < 0 || (opt.Lease > 0 && opt.Lease < time.Millisecond) {
		return nil, fmt.Errorf("lease: must be at least 1ms, got %v", opt.Lease)
	}
	if opt.Lease == 0 {
		opt.Lease = 5 * time.Minute
	}
	lease := opt.Lease.String()
	if opt.Resources == "" {
		opt.Resources = `{"cpu":"10m"}`
	}
	if opt.RunID == "" {
		opt.RunID = strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	}
	target := strings.TrimRight(opt.Target, "/")
	schedPath := target + "/api/v1/schedule?wait=" + opt.Wait.String()
	if opt.Echo {
		schedPath = target + "/"
	}

	ctx, cancel := context.WithTimeout(ctx, opt.Duration)
	defer cancel()
	var ok, okSched atomic.Int64
	var workers []*worker
	var wg sync.WaitGroup
	start := time.Now()
	stopProgress := make(chan struct{})
	if opt.Progress != nil {
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			last := int64(0)
			for {
				select {
				case <-stopProgress:
					return
				case <-t.C:
					n := okSched.Load()
					fmt.Fprintf(opt.Progress, "%6.1fs  %8d done  %7d/s\n", time.Since(start).Seconds(), n, n-last)
					last = n
				}
			}
		}()
	}
	streams := 1
	if opt.H2C {
		streams = max(1, opt.Streams)
	}
	senders := opt.Connections * streams
	workers = make([]*worker, senders)
	var interval time.Duration // between one sender's sends (open loop)
	if opt.Rate > 0 {
		interval = time.Duration(float64(senders) / opt.Rate * float64(time.Second))
	}
	for c := 0; c < opt.Connections; c++ {
		dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		if opt.SourceAddrs > 1 {
			dialer.LocalAddr = &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(1+c%opt.SourceAddrs))}
		}
		tr := &http.Transport{DialContext: dialer.DialContext, MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1,
			IdleConnTimeout: time.Minute, DisableCompression: true}
		if opt.H2C {
			var p http.Protocols
			p.SetUnencryptedHTTP2(true)
			tr.Protocols = &p
			tr.HTTP2 = &http.HTTP2Config{StrictMaxConcurrentRequests: true}
		}
		hc := &http.Client{Transport: tr, Timeout: opt.Timeout}
		defer tr.CloseIdleConnections()
		for k := 0; k < streams; k++ {
			sid := c*streams + k
			w := &worker{errs: map[string]int64{}}
			for i := range w.hist {
				w.hist[i] = newHist()
			}
			workers[sid] = w
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(c), 7))
				// Open loop: sender c's i-th send is due at start +
				// offset + i·interval (offsets spread the senders).
				offset := time.Duration(0)
				if interval > 0 {
					offset = time.Duration(rng.Int64N(int64(interval)))
				}
				for i := 0; ctx.Err() == nil; i++ {
					tier := pick(rng, opt.Mix, total)
					id := fmt.Sprintf("lg%s-%d-%d", opt.RunID, c, i)
					body := `{"id":"` + id + `","priority":` + strconv.Itoa(tier) + `,"resources":` + opt.Resources + `,"lease":"` + lease + `"}`
					t0 := time.Now()
					if interval > 0 {
						due := start.Add(offset + time.Duration(i)*interval)
						if d := time.Until(due); d > 0 {
							select {
							case <-ctx.Done():
								return
							case <-time.After(d):
							}
						}
						t0 = due // latency from the scheduled send time
					}
					status, err := post(hc, schedPath, opt.Token, body)
					if !w.record(status, err) {
						continue
					}
					w.hist[tier].RecordValue(max(1, time.Since(t0).Microseconds()))
					if status == http.StatusAccepted {
						w.pending++
					}
					ok.Add(1)
					okSched.Add(1)
					if opt.Complete && !opt.Echo {
						status, err := post(hc, target+"/api/v1/tasks/"+id+"/complete", opt.Token, `{"exitCode":0}`)
						if w.record(status, err) {
							ok.Add(1)
						}
					}
				}
			}(sid)
		}
	}
	wg.Wait()
	close(stopProgress)
	el := time.Since(start).Seconds()
	res := &Result{Target: opt.Target, Connections: opt.Connections, Seconds: el, Requests: ok.Load(),
		Scheduled: okSched.Load(), ErrorsBy: map[string]int64{}}
	res.RequestRate = float64(res.Requests) / el
	res.Rate = float64(res.Scheduled) / el
	all := newHist()
	var tiers [4]*hdrhistogram.Histogram
	for i := range tiers {
		tiers[i] = newHist()
	}
	for _, w := range workers {
		for i, h := range w.hist {
			tiers[i].Merge(h)
			all.Merge(h)
		}
		for k, v := range w.errs {
			res.ErrorsBy[k] += v
			res.Errors += v
		}
		res.Pending += w.pending
	}
	res.All = summarize(all)
	for i, h := range tiers {
		res.Tiers[i] = summarize(h)
	}
	return res, nil
}

// record counts an outcome and reports whether it was a success.
func (w *worker) record(status int, err error) bool {
	switch {
	case err != nil:
		w.errs["transport"]++
		return false
	case status >= 300:
		w.errs[strconv.Itoa(status)]++
		return false
	}
	return true
}

func post(hc *http.Client, url, token, body string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 16<<20))
	resp.Body.Close()
	return resp.StatusCode, err
}

func pick(rng *rand.Rand, mix [4]int, total int) int {
	n := rng.IntN(total)
	for i, w := range mix {
		if n < w {
			return i
		}
		n -= w
	}
	return 3
}

func summarize(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{Count: h.TotalCount(), P50: float64(h.ValueAtQuantile(50)), P99: float64(h.ValueAtQuantile(99)),
		P999: float64(h.ValueAtQuantile(99.9)), Max: float64(h.Max()), Mean: h.Mean()}
}

// ParseMix reads "urgent=1,high=4,medium=30,low=65" (tiers may be named or
// numbered 0-3; missing tiers weigh 0).
func ParseMix(s string) ([4]int, error) {
	var mix [4]int
	if strings.TrimSpace(s) == "" {
		return mix, fmt.Errorf("mix: empty")
	}
	names := map[string]int{"urgent": 0, "high": 1, "medium": 2, "low": 3, "0": 0, "1": 1, "2": 2, "3": 3}
	parts := strings.Split(s, ",")
	if len(parts) > 4 {
		return mix, fmt.Errorf("mix: at most 4 tiers, got %d", len(parts))
	}
	for _, p := range parts {
		k, v, found := strings.Cut(strings.TrimSpace(p), "=")
		tier, known := names[k]
		if !found || !known {
			return mix, fmt.Errorf("mix: %q is not tier=weight (tiers urgent, high, medium, low)", p)
		}
		w, err := strconv.Atoi(v)
		if err != nil || w < 0 || w > 1_000_000 {
			return mix, fmt.Errorf("mix: weight of %s must be an integer 0-1000000, got %q", k, v)
		}
		mix[tier] = w
	}
	return mix, nil
}

// EchoHandler is the floor: the minimal Go net/http JSON echo that a
// schedule request is compared with (decode the body, encode it back).
func EchoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&v); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
}

// EchoServer serves h (EchoHandler, or a wrapper of it) as the floor is
// served: HTTP/1.1 and h2c with up to 100,000 streams a connection, as
// hetsched's server speaks both.
func EchoServer(h http.Handler) *http.Server {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	var protos http.Protocols
	protos.SetHTTP1(true)
	protos.SetUnencryptedHTTP2(true)
	srv.Protocols = &protos
	srv.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: 100_000}
	return srv
}

// TierNames label Result.Tiers.
var TierNames = [4]string{"urgent", "high", "medium", "low"}

// Table writes results side by side, one line per result.
func Table(w io.Writer, rs []*Result, labels []string) {
	fmt.Fprintf(w, "%-10s %6s %10s %10s %8s %9s %9s %9s   %s\n", "target", "conns", "req/s", "sched/s", "errors", "p50", "p99", "p999", "per tier p50/p99/p999 (µs)")
	for i, r := range rs {
		var tiers []string
		for k, t := range r.Tiers {
			if t.Count > 0 {
				tiers = append(tiers, fmt.Sprintf("%s %.0f/%.0f/%.0f", TierNames[k], t.P50, t.P99, t.P999))
			}
		}
		fmt.Fprintf(w, "%-10s %6d %10.0f %10.0f %8d %8.0fµs %8.0fµs %8.0fµs   %s\n", labels[i], r.Connections, r.RequestRate, r.Rate,
			r.Errors, r.All.P50, r.All.P99, r.All.P999, strings.Join(tiers, ", "))
	}
}
