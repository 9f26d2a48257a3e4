package hatest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/cli"
)

// TestFrozenLeaderKillsNoTask (issue 41 §2): with the default heartbeat
// deadline (2 s × 3), the leader is frozen (SIGSTOP) for 2, 4 and 10 s
// while two agents run tasks. A standby finds the leader silent, revokes
// its lease and another leads; the agents' heartbeats reach it (hedged
// over the servers); the resumed leader answers nothing it no longer
// owns. No task is fenced, killed or run twice: each runs its first
// attempt throughout, once. One round of the three freezes runs in the
// suite; HETSCHED_FREEZE_ROUNDS=N runs N and logs the failovers'
// distribution (the ten: BENCHMARKS.md).
func TestFrozenLeaderKillsNoTask(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs three servers and two agents, and freezes leaders")
	}
	rounds := 1
	if v := os.Getenv("HETSCHED_FREEZE_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("HETSCHED_FREEZE_ROUNDS=%q: want a count", v)
		}
		rounds = n
	}
	c := startCluster(t, 3)
	c.leader(time.Minute)
	servers := strings.Join(c.urls, ",")
	var agents []*childproc.Child
	for _, name := range []string{"a1", "a2"} {
		a, err := childproc.Start(c.bin, time.Minute, "agent", "--server", servers, "--name", name, "--work-dir", t.TempDir(), "--grace", "500ms")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(a.Kill)
		agents = append(agents, a)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for i, a := range agents {
				t.Logf("agent a%d said:\n%s", i+1, tail(a.Stderr(), 6000))
			}
		}
	})
	cl := c.client()
	waitUntil(t, 30*time.Second, "two agent nodes ready", func() bool { return agentNodesReady(t, cl) == 2 })
	runLog := t.TempDir() + "/runs.log"
	freezes := []time.Duration{2 * time.Second, 4 * time.Second, 10 * time.Second}
	// Long enough to outlast every freeze and failover.
	long := time.Duration(rounds)*(16*time.Second+3*20*time.Second) + time.Minute
	var ids, tasks []string
	for i := range 4 {
		id := fmt.Sprintf("long%d", i)
		ids = append(ids, id)
		tasks = append(tasks, fmt.Sprintf(`{"id":%q,"priority":1,"resources":{"cpu":"500m"},"command":%s}`, id, command(runLog, long)))
	}
	if _, err := cl.Do(ctxTimeout(t, 10*time.Second), http.MethodPost, "/api/v1/tasks", []byte(`{"tasks":[`+strings.Join(tasks, ",")+`]}`), nil); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "every task to have started", func() bool { return len(runsSoFar(t, runLog)) == len(ids) })
	// Before the agents are killed (cleanups run last first): the tasks
	// are cancelled and their runs end, or they would outlive the test.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, id := range ids {
			if err := cancelTask(ctx, c.client(), id); err != nil {
				t.Errorf("cancel %s: %v", id, err)
			}
		}
		waitUntil(t, 30*time.Second, "the cancelled tasks' runs to end", func() bool {
			for _, id := range ids {
				if st, _ := taskState(t, c, id); st == "running" || st == "scheduled" {
					return false
				}
			}
			return true
		})
	})

	var took []time.Duration
	for r := range rounds {
		for _, d := range freezes {
			l := c.leader(30 * time.Second)
			p := c.proc(l)
			if err := p.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			c.setFrozen(l, true)
			frozen := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), d+30*time.Second)
			at, err := firstWrite(ctx, c, fmt.Sprintf("freeze%d-%d-", r, d/time.Second))
			cancel()
			if err != nil {
				p.Signal(syscall.SIGCONT)
				t.Fatalf("round %d, %s frozen %s: no write acknowledged: %v\n%s", r+1, c.names[l], d, err, c.logs())
			}
			took = append(took, at.Sub(frozen))
			if rest := d - time.Since(frozen); rest > 0 {
				time.Sleep(rest) // the freeze lasts d in all
			}
			if err := p.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			c.setFrozen(l, false)
			t.Logf("round %d: %s frozen for %s; a write was acknowledged %s after the freeze", r+1, c.names[l], d, took[len(took)-1].Round(time.Millisecond))
			c.waitReady(l, 30*time.Second)
			// Every task still runs its first attempt, once.
			checkFirstRuns(t, c, runLog, ids)
		}
	}
	slices.Sort(took)
	p99 := took[min(len(took)-1, len(took)*99/100)]
	t.Logf("failovers after a freeze: min %s, median %s, p99 %s, max %s (%d)", took[0].Round(time.Millisecond),
		took[len(took)/2].Round(time.Millisecond), p99.Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond), len(took))
}

// checkFirstRuns fails the test unless each task of ids runs, on its
// first attempt, and has run once.
func checkFirstRuns(t *testing.T, c *cluster, runLog string, ids []string) {
	t.Helper()
	runs := runsSoFar(t, runLog)
	for _, id := range ids {
		st, attempt := taskState(t, c, id)
		if st != "running" || attempt != 0 || len(runs[id]) != 1 || runs[id][0].ended {
			t.Fatalf("task %s: %s on attempt %d, %d run(s); want running its first attempt, once\n%s", id, st, attempt, len(runs[id]), c.logs())
		}
	}
}

// agentNodesReady counts the ready nodes agents serve.
func agentNodesReady(t *testing.T, cl *cli.Client) int {
	var nodes struct {
		Nodes []struct {
			Agent string `json:"agent"`
			State string `json:"state"`
		} `json:"nodes"`
	}
	if _, err := cl.Do(ctxTimeout(t, 5*time.Second), http.MethodGet, "/api/v1/nodes", nil, &nodes); err != nil {
		return 0
	}
	n := 0
	for _, x := range nodes.Nodes {
		if x.Agent != "" && x.State == "ready" {
			n++
		}
	}
	return n
}

// firstWrite submits a task every 100 ms, each through the next server
// in turn and on its own (a request to the frozen leader hangs until its
// timeout, which would hide the failover behind it), and returns when the
// first is acknowledged: the failover's end, within 100 ms.
func firstWrite(ctx context.Context, c *cluster, prefix string) (time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	won := make(chan time.Time, 1)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		go func() {
			rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			body := []byte(`{"id":"` + prefix + strconv.Itoa(i) + `","resources":{"cpu":"1"},"nodeSelector":{"hatest":"nowhere"}}`)
			if _, err := c.clientOf(i%len(c.urls)).Do(rctx, http.MethodPost, "/api/v1/tasks", body, nil); err == nil {
				select {
				case won <- time.Now():
				default:
				}
			}
		}()
		select {
		case at := <-won:
			return at, nil
		case <-ctx.Done():
			return time.Time{}, errNoWrite
		case <-tick.C:
		}
	}
}
