package benchhttp

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
)

// TestPendingAndCompareSmall runs both whole-server benchmarks at a tiny
// size: tasks survive the SIGKILL and restart, memory is read, and the
// side-by-side run gets answers from both servers without errors.
func TestPendingAndCompareSmall(t *testing.T) {
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	p, err := Pending(context.Background(), PendingOptions{Bin: bin, Tasks: 2500, Batch: 1000, Clients: 2, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if p.Restored != 2500 || p.Memory.RSS <= 0 || p.Memory.Peak < p.Memory.RSS || p.RestartSeconds <= 0 {
		t.Fatalf("pending result %+v", p)
	}
	if !strings.Contains(p.RestartLine, "2500 tasks restored") {
		t.Fatalf("restart line %q", p.RestartLine)
	}
	benchBin, err := childproc.BuildCommand(filepath.Dir(bin), "hetsched-bench")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Compare(context.Background(), CompareOptions{Bin: bin, BenchBin: benchBin, Nodes: 20, Connections: []int{4}, H2C: [][2]int{{1, 4}}, Duration: 300 * time.Millisecond, Mix: [4]int{1, 1, 1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	jr, err := Job(context.Background(), JobOptions{Bin: bin, Layers: 5, Width: 4, Nodes: 3, TaskDuration: time.Millisecond, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if jr.Tasks != 20 || jr.RunSeconds <= 0 || jr.TasksPerSecond <= 0 {
		t.Fatalf("job %+v", jr)
	}
	f, err := Fleet(context.Background(), FleetOptions{Bin: bin, Nodes: 300, Duration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if f.Nodes != 300 || f.ReadySeconds <= 0 || f.ServerRSS.RSS <= 0 || f.AgentRSS.RSS <= 0 || f.ServerCores < 0 || f.ServerCores > 2 {
		t.Fatalf("fleet %+v", f)
	}
	if len(rs) != 2 || rs[1].Streams != 4 {
		t.Fatalf("compare ran %d loads, want HTTP/1.1 then h2c: %+v", len(rs), rs)
	}
	for _, r := range rs {
		if r.Hetsched.Errors != 0 || r.Echo.Errors != 0 || r.Hetsched.Scheduled == 0 || r.Echo.Scheduled == 0 || r.Ratio <= 0 {
			t.Fatalf("compare %+v: hetsched %+v echo %+v", r, r.Hetsched, r.Echo)
		}
	}
}

// TestInflightSmall holds a few thousand waiting schedule requests over
// two h2c connections on a full cluster, releases it, and checks that each
// request is answered once with its placement, nothing is lost, and (with
// aging off) every tier is placed before any less important one.
func TestInflightSmall(t *testing.T) {
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	r, err := Inflight(context.Background(), InflightOptions{Bin: bin, Nodes: 10, Requests: 3000, Conns: 2, Mix: [4]int{1, 4, 30, 65},
		ServerArgs: []string{"--no-aging"}, Timeout: 3 * time.Minute, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	t.Logf("%+v\n%s", r, log.String())
	if r.Held != 3000 || r.Answered != 3000 || r.Placed != 3000 || r.Lost != 0 || r.Duplicates != 0 || len(r.ErrorsBy) != 0 || r.Inversions != 0 {
		t.Fatalf("result %+v\n%s", r, log.String())
	}
	if r.ServerMemory.RSS <= 0 || r.ServerPeak < r.ServerMemory.RSS || r.ServerGoroutines < 3000 || r.DrainSeconds <= 0 {
		t.Fatalf("measures %+v", r)
	}
	var n int64
	for _, d := range r.Drain {
		n += d.Count
	}
	if n != 3000 {
		t.Fatalf("drain latencies count %d, want 3000", n)
	}
}

// TestBatchSmall holds more lease tasks than fit, submitted through the
// batch API, and checks that all are in flight, then that every one ends
// by lease expiry.
func TestBatchSmall(t *testing.T) {
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	r, err := Batch(context.Background(), BatchOptions{Bin: bin, Nodes: 10, Tasks: 1000, Batch: 100, Clients: 2, Mix: [4]int{1, 4, 30, 65}, Lease: 2 * time.Second,
		Timeout: 2 * time.Minute, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if r.Leased != 640 || r.Pending != 360 || r.Expired != 1000 || r.DrainSeconds < 2 || r.Memory.RSS <= 0 {
		t.Fatalf("result %+v\n%s", r, log.String())
	}
}

// TestHASmall runs bench ha at a tiny size on every setup: each
// acknowledges the batch, serves the schedule load without errors and
// acknowledges a write again after its leader's SIGKILL.
func TestHASmall(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts five servers")
	}
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	rs, err := HA(context.Background(), HAOptions{Bin: bin, Setups: []string{SetupPebble, SetupEtcd1, SetupHA3},
		Tasks: 3000, Batch: 1000, Clients: 2, Nodes: 10, Connections: []int{2}, Duration: 300 * time.Millisecond, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if len(rs) != 3 {
		t.Fatalf("%d results", len(rs))
	}
	for _, r := range rs {
		if r.SubmitRate <= 0 || r.TakeoverSeconds <= 0 || len(r.Schedule) != 1 || r.Schedule[0].Errors != 0 || r.Schedule[0].Scheduled == 0 {
			t.Fatalf("%s: %+v (schedule %+v)\n%s", r.Setup, r, r.Schedule, log.String())
		}
	}
	var table strings.Builder
	HATable(&table, rs)
	if !strings.Contains(table.String(), "ha3") || strings.Count(table.String(), "\n") != 4 {
		t.Fatalf("table:\n%s", table.String())
	}
}
