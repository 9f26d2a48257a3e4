package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/probe"
)

// listenersEnv makes the test binary serve HTTP 200 on that many ports of
// 127.0.0.1 (printing them on one line) until its stdin closes: the
// replicas a probe benchmark checks, in a process of their own so that
// their CPU is not the agent's.
const listenersEnv = "HETSCHED_TEST_LISTENERS"

func init() {
	n, err := strconv.Atoi(os.Getenv(listenersEnv))
	if err != nil || n <= 0 {
		return
	}
	var ports []string
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		ports = append(ports, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
		go func() { _ = http.Serve(ln, h) }()
	}
	fmt.Println(strings.Join(ports, " "))
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// startListeners runs n listeners in a child process; it stops with b.
func startListeners(b *testing.B, n int) []int {
	b.Helper()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), listenersEnv+"="+strconv.Itoa(n))
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { in.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatal(err)
	}
	var ports []int
	for _, f := range strings.Fields(line) {
		p, _ := strconv.Atoi(f)
		ports = append(ports, p)
	}
	return ports
}

// processCPU is this process's user+system CPU so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// probeOf is a liveness probe of kind against port, every period.
func probeOf(kind string, port int, period, delay time.Duration) *api.Probe {
	p := &api.Probe{Period: durPtr(period), InitialDelay: durPtr(delay)}
	if kind == "http" {
		p.HTTP = &api.HTTPProbe{Path: "/health", Port: port}
	} else {
		p.TCP = &api.TCPProbe{Port: port}
	}
	return p
}

func durPtr(d time.Duration) *api.Duration { v := api.Duration(d); return &v }

// probeReplicas, probePeriod: the benchmark's agent runs 10,000 replicas,
// each with one liveness probe every 10 s (the source design's example),
// their starts spread over the period: 1,000 checks a second.
const (
	probeReplicas = 10_000
	probePeriod   = 10 * time.Second
	probeWindow   = 3 * time.Second
)

// BenchmarkProbes10kReplicas measures the agent's CPU (its own process's,
// the replicas answer from another) for the probes of 10,000 replicas, as
// a percentage of one core (%core), for TCP and HTTP probes; floor is the
// same 1,000 checks a second made back to back with no prober around
// them (the checks' own cost).
func BenchmarkProbes10kReplicas(b *testing.B) {
	ports := startListeners(b, 100)
	for _, kind := range []string{"tcp", "http"} {
		b.Run(kind, func(b *testing.B) { benchProber(b, kind, ports, probeTick) })
		b.Run(kind+"-unbatched", func(b *testing.B) { benchProber(b, kind, ports, 0) })
		b.Run(kind+"-floor", func(b *testing.B) {
			c := probe.NewChecker()
			const checks = 3000
			var cpu time.Duration
			for b.Loop() {
				c0 := processCPU()
				var wg sync.WaitGroup
				sem := make(chan struct{}, maxProbing)
				for i := range checks {
					sem <- struct{}{}
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := c.Check(context.Background(), probeOf(kind, ports[i%len(ports)], probePeriod, 0), "127.0.0.1", nil); err != nil {
							b.Error(err)
						}
						<-sem
					}()
				}
				wg.Wait()
				cpu += processCPU() - c0
			}
			// At 1,000 checks a second: the CPU of one check × 1,000.
			perCheck := cpu / time.Duration(b.N*checks)
			b.ReportMetric(100*float64(perCheck*1000)/float64(time.Second), "%core")
		})
	}
}

// runsFiles is the executor's RunsOf as the prober pays for it before
// each check: a lock, a lookup, and a read of the attempt's runs file,
// which a replica that never restarted does not have.
type runsFiles struct {
	mu  sync.Mutex
	dir map[string]string
}

func (r *runsFiles) RunsOf(task string, _ int) (executor.Runs, bool) {
	r.mu.Lock()
	dir, ok := r.dir[task]
	r.mu.Unlock()
	if !ok {
		return executor.Runs{}, false
	}
	b, err := os.ReadFile(filepath.Join(dir, "runs"))
	if errors.Is(err, fs.ErrNotExist) {
		return executor.Runs{}, true
	}
	var runs executor.Runs
	if err != nil || json.Unmarshal(b, &runs) != nil {
		return executor.Runs{}, false
	}
	return runs, true
}

func (r *runsFiles) Restart(string, int, string) error { return nil }

// benchProber measures a prober over probeReplicas replicas whose checks
// are batched by tick; before each check it reads the replica's runs
// file, as with a real executor.
func benchProber(b *testing.B, kind string, ports []int, tick time.Duration) {
	runs := &runsFiles{dir: map[string]string{}}
	dir := b.TempDir()
	for i := range probeReplicas {
		runs.dir["r"+strconv.Itoa(i)] = filepath.Join(dir, "r"+strconv.Itoa(i))
	}
	p := newProber(slog.New(slog.DiscardHandler), func() runsSource { return runs }, func() {})
	p.tick = tick
	for i := range probeReplicas {
		delay := probePeriod * time.Duration(i) / probeReplicas
		as := agentapi.Assignment{Task: "r" + strconv.Itoa(i), Service: "s", Liveness: probeOf(kind, ports[i%len(ports)], probePeriod, delay)}
		p.add(&as, nil)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); p.run(ctx) }()
	defer func() { cancel(); <-done }()
	time.Sleep(time.Second) // past the first checks' start
	var cpu, wall time.Duration
	for b.Loop() {
		c0, t0 := processCPU(), time.Now()
		time.Sleep(probeWindow)
		cpu += processCPU() - c0
		wall += time.Since(t0)
	}
	b.ReportMetric(100*float64(cpu)/float64(wall), "%core")
	failing := 0
	p.mu.Lock()
	for _, r := range p.reps {
		if r.reason != "" {
			failing++
		}
	}
	p.mu.Unlock()
	if failing > 0 {
		b.Errorf("%d replicas' probes failed: the measure is not of passing checks", failing)
	}
}
