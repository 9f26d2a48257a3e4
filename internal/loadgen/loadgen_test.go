package loadgen

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

func TestParseMix(t *testing.T) {
	got, err := ParseMix("urgent=1,high=4,medium=30,low=65")
	if err != nil || got != [4]int{1, 4, 30, 65} {
		t.Fatalf("got %v, %v", got, err)
	}
	if got, err := ParseMix("0=2,low=1"); err != nil || got != [4]int{2, 0, 0, 1} {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "urgent", "urgent=x", "extreme=1", "low=-1", "a=1,b=1,c=1,d=1,e=1"} {
		if _, err := ParseMix(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{Connections: 0, Duration: time.Second}, {Connections: 1}, {Connections: 1, Duration: time.Second, Mix: [4]int{-1}},
		{Connections: 1, Duration: time.Second, Mix: [4]int{1}, Lease: time.Microsecond}} {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// startEcho serves h on 127.0.0.1:0 as the echo floor is served and
// returns its base URL; the server closes with the test.
func startEcho(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := EchoServer(h)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestEchoFloor drives the echo handler on a real socket: every request
// succeeds and lands in the tier histogram it was drawn for.
func TestEchoFloor(t *testing.T) {
	r, err := Run(context.Background(), Options{Target: startEcho(t, EchoHandler()), Echo: true, Connections: 4,
		Duration: 300 * time.Millisecond, Mix: [4]int{1, 0, 0, 1}, SourceAddrs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Scheduled == 0 || r.Requests != r.Scheduled {
		t.Fatalf("result %+v", r)
	}
	if r.Tiers[0].Count+r.Tiers[3].Count != r.Scheduled || r.Tiers[1].Count != 0 || r.Tiers[2].Count != 0 {
		t.Fatalf("tier counts %+v for %d requests", r.Tiers, r.Scheduled)
	}
	if r.All.P50 <= 0 || r.All.P99 < r.All.P50 || r.All.Max < r.All.P999 {
		t.Fatalf("quantiles %+v", r.All)
	}
}

// TestAgainstServer schedules and completes leases on a real server: no
// errors, two requests per placement, every task placed within wait.
func TestAgainstServer(t *testing.T) {
	addr := servertest.Start(t, "nodes:\n  - name: n1\n    capacity: {cpu: \"8\", memory: 4Gi}\n")
	// 8 connections of 1 cpu each on an 8-cpu node: each connection holds
	// at most one lease, so if completes free capacity every schedule is
	// placed at once; a lost release would leave later schedules waiting
	// (202) once the node is full.
	r, err := Run(context.Background(), Options{Target: addr, Connections: 8, Duration: 500 * time.Millisecond,
		Mix: [4]int{1, 1, 1, 1}, Complete: true, Resources: `{"cpu":"1"}`, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Scheduled == 0 || r.Requests != 2*r.Scheduled {
		t.Fatalf("result %+v", r)
	}
	if r.Pending != 0 {
		t.Fatalf("%d schedules answered 202: capacity was not released", r.Pending)
	}
}

// TestShortLeasesFreeCapacity: without completes, tasks' own short leases
// free the node, so schedules keep being placed (none left waiting) and no
// complete request is sent.
func TestShortLeasesFreeCapacity(t *testing.T) {
	addr := servertest.Start(t, "nodes:\n  - name: n1\n    capacity: {cpu: \"2\", memory: 4Gi}\n")
	r, err := Run(context.Background(), Options{Target: addr, Connections: 4, Duration: 600 * time.Millisecond,
		Mix: [4]int{0, 0, 1, 1}, Resources: `{"cpu":"1"}`, Lease: 20 * time.Millisecond, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Pending != 0 || r.Requests != r.Scheduled || r.Scheduled <= 4 {
		t.Fatalf("result %+v: expiring leases should have freed the 2 CPUs for every schedule", r)
	}
}

// TestOpenLoopRate: at a fixed arrival rate the run sends about rate ×
// duration requests, however fast the server answers.
func TestOpenLoopRate(t *testing.T) {
	r, err := Run(context.Background(), Options{Target: startEcho(t, EchoHandler()), Echo: true, Connections: 4,
		Duration: time.Second, Rate: 200})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Scheduled < 150 || r.Scheduled > 210 {
		t.Fatalf("sent %d at 200/s for 1s (errors %d)", r.Scheduled, r.Errors)
	}
}

// TestH2CStreams: over h2c one connection carries many concurrent
// streams, and the server sees HTTP/2.
func TestH2CStreams(t *testing.T) {
	var h2 atomic.Int64
	echo := EchoHandler()
	target := startEcho(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor == 2 {
			h2.Add(1)
		}
		echo.ServeHTTP(w, r)
	}))
	r, err := Run(context.Background(), Options{Target: target, Echo: true, Connections: 1,
		H2C: true, Streams: 50, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Errors != 0 || r.Scheduled == 0 || h2.Load() != r.Scheduled {
		t.Fatalf("%d requests, %d over HTTP/2, errors %v", r.Scheduled, h2.Load(), r.ErrorsBy)
	}
	if _, err := Run(context.Background(), Options{Target: "http://x", Connections: 1, Duration: time.Second, Streams: 4}); err == nil {
		t.Error("streams without h2c accepted")
	}
}
