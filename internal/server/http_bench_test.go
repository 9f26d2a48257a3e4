package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// echoServer is the floor: a minimal net/http JSON echo on loopback.
func echoServer(b *testing.B) (string, func()) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var v map[string]any
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&v); err != nil {
			w.WriteHeader(400)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return "http://" + ln.Addr().String(), func() { srv.Close() }
}

// load runs conns keep-alive clients for dur, each looping one request
// built by req (returning its URL path and body); it returns requests/s
// and latency quantiles.
func load(b *testing.B, base string, conns int, dur time.Duration, req func(c, i int) (string, string)) (float64, [3]time.Duration, int64) {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Timeout: 30 * time.Second, Transport: tr}
	var n, errors atomic.Int64
	lat := make([][]time.Duration, conns)
	stop := time.Now().Add(dur)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < conns; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := 0; time.Now().Before(stop); i++ {
				path, body := req(c, i)
				t0 := time.Now()
				resp, err := hc.Post(base+path, "application/json", strings.NewReader(body))
				if err != nil {
					errors.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					errors.Add(1)
					continue
				}
				lat[c] = append(lat[c], time.Since(t0))
				n.Add(1)
			}
		}(c)
	}
	wg.Wait()
	el := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	var q [3]time.Duration
	if len(all) > 0 {
		for k, p := range []float64{0.5, 0.99, 0.999} {
			q[k] = all[int(p*float64(len(all)-1))]
		}
	}
	return float64(n.Load()) / el.Seconds(), q, errors.Load()
}

// BenchmarkScheduleVsEcho measures single-task POST /api/v1/schedule
// (urgent leases, completed right away by a second request) against a
// minimal Go JSON echo server in the same run, at 64 and 1,000 keep-alive
// connections. Client and servers share the machine's cores. 10,000
// connections need the client in another process (the fd limit is
// 20,000): see the load-generator issue.
func BenchmarkScheduleVsEcho(b *testing.B) {
	for _, conns := range []int{64, 1000} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			t := &testing.T{}
			s := start(t, b.TempDir())
			defer s.stop(t)
			echo, stopEcho := echoServer(b)
			defer stopEcho()
			dur := 3 * time.Second
			task := func(c, i int) string {
				return fmt.Sprintf(`{"id":"c%d-%d-%d","priority":0,"resources":{"cpu":"10m"},"lease":"30s"}`, conns, c, i)
			}
			b.ResetTimer()
			for k := 0; k < b.N; k++ {
				// Each schedule is followed by its complete, so capacity never runs out.
				hsRate, hsQ, hsErr := load(b, s.base, conns, dur, func(c, i int) (string, string) {
					if i%2 == 0 {
						return "/api/v1/schedule?wait=2s", task(c, i/2)
					}
					return fmt.Sprintf("/api/v1/tasks/c%d-%d-%d/complete", conns, c, i/2), `{"exitCode":0}`
				})
				echoRate, echoQ, echoErr := load(b, echo, conns, dur, func(c, i int) (string, string) { return "/", task(c, i) })
				b.ReportMetric(hsRate, "hetsched-req/s")
				b.ReportMetric(echoRate, "echo-req/s")
				b.ReportMetric(hsRate/echoRate, "ratio")
				b.Logf("conns=%d hetsched %.0f req/s p50 %v p99 %v p999 %v errors %d | echo %.0f req/s p50 %v p99 %v p999 %v errors %d | ratio %.2f",
					conns, hsRate, hsQ[0], hsQ[1], hsQ[2], hsErr, echoRate, echoQ[0], echoQ[1], echoQ[2], echoErr, hsRate/echoRate)
			}
		})
	}
}
