package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/loadgen"
)

// BenchmarkScheduleVsEcho measures single-task POST /api/v1/schedule
// (leases of all tiers, completed right away by a second request) against
// the minimal Go JSON echo server in the same run, at 64 and 1,000
// keep-alive connections, all in this process. `hetsched-bench http` runs
// the same comparison with the servers as child processes, up to 10,000
// connections (one process may hold 20,000 files here).
func BenchmarkScheduleVsEcho(b *testing.B) {
	for _, conns := range []int{64, 1000} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			t := &testing.T{}
			s := start(t, b.TempDir())
			defer s.stop(t)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			echo := &http.Server{Handler: loadgen.EchoHandler(), ReadHeaderTimeout: 10 * time.Second}
			go echo.Serve(ln)
			defer echo.Close()
			b.ResetTimer()
			for k := 0; k < b.N; k++ {
				o := loadgen.Options{Target: s.base, Connections: conns, Duration: 3 * time.Second, Mix: [4]int{1, 4, 30, 65},
					Complete: true, RunID: fmt.Sprintf("b%d-%d", conns, k)}
				hs, err := loadgen.Run(context.Background(), o)
				if err != nil {
					b.Fatal(err)
				}
				o.Target, o.Echo = "http://"+ln.Addr().String(), true
				ec, err := loadgen.Run(context.Background(), o)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(hs.RequestRate, "hetsched-req/s")
				b.ReportMetric(ec.RequestRate, "echo-req/s")
				b.ReportMetric(hs.RequestRate/ec.RequestRate, "ratio")
				b.Logf("conns=%d hetsched %.0f req/s (%.0f schedules/s) p50 %.0fµs p99 %.0fµs p999 %.0fµs errors %d | echo %.0f req/s p50 %.0fµs p99 %.0fµs p999 %.0fµs errors %d",
					conns, hs.RequestRate, hs.Rate, hs.All.P50, hs.All.P99, hs.All.P999, hs.Errors, ec.RequestRate, ec.All.P50, ec.All.P99, ec.All.P999, ec.Errors)
			}
		})
	}
}
