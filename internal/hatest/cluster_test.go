package hatest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/cli"
)

// binary builds hetsched once per test binary.
var binary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "hatest-bin")
	if err != nil {
		return "", err
	}
	return childproc.Build(dir)
})

func bin(t *testing.T) string {
	t.Helper()
	b, err := binary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// freePorts reserves n loopback ports (the servers bind them a moment
// later).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	ports, err := childproc.FreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// cluster is three `hetsched server --ha` processes on loopback.
type cluster struct {
	t     *testing.T
	bin   string
	peers string
	names []string
	urls  []string
	dirs  []string
	extra []string // more flags for every server
	token string   // the clients' bearer token ("" with auth off)
	// wrap, when set, puts a prefix before server i's command line (ip
	// netns exec NS).
	wrap func(i int, cmd []string) []string

	mu     sync.Mutex
	procs  []*childproc.Child // nil while a server is down
	frozen map[int]bool       // SIGSTOPped: not asked
}

func (c *cluster) setFrozen(i int, on bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.frozen == nil {
		c.frozen = map[int]bool{}
	}
	c.frozen[i] = on
}

// up reports whether server i runs and is not frozen.
func (c *cluster) up(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[i] != nil && !c.frozen[i]
}

// startCluster starts n servers (in parallel: each waits for a quorum).
func startCluster(t *testing.T, n int, extra ...string) *cluster {
	t.Helper()
	c := newCluster(t, n, extra...)
	c.startAll()
	return c
}

// newCluster lays out n servers on loopback ports without starting them.
func newCluster(t *testing.T, n int, extra ...string) *cluster {
	t.Helper()
	ports := freePorts(t, 2*n)
	c := &cluster{t: t, bin: bin(t), extra: extra}
	var peers []string
	root := t.TempDir()
	for i := range n {
		name := fmt.Sprintf("s%d", i+1)
		c.names = append(c.names, name)
		c.urls = append(c.urls, fmt.Sprintf("http://127.0.0.1:%d", ports[i]))
		c.dirs = append(c.dirs, filepath.Join(root, name))
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", name, ports[n+i]))
	}
	c.peers = strings.Join(peers, ",")
	return c
}

// startAll starts every server at once (each waits for a quorum) and
// stops them when the test ends.
func (c *cluster) startAll() {
	c.t.Helper()
	n := len(c.names)
	if c.procs == nil {
		c.procs = make([]*childproc.Child, n)
	}
	var wg sync.WaitGroup
	errc := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.start(i); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	close(errc)
	c.t.Cleanup(c.stopAll)
	for err := range errc {
		c.t.Fatal(err)
	}
}

// start runs server i (again) on its data dir and ports.
func (c *cluster) start(i int) error {
	addr := strings.TrimPrefix(c.urls[i], "http://")
	cmd := append([]string{c.bin, "server", "--ha", "--name", c.names[i], "--peers", c.peers, "--data-dir", c.dirs[i],
		"--listen", addr, "--memory-limit", "off"}, c.extra...)
	if c.wrap != nil {
		cmd = c.wrap(i, cmd)
	}
	p, err := childproc.Start(cmd[0], 2*time.Minute, cmd[1:]...)
	if err != nil {
		return fmt.Errorf("start %s: %w", c.names[i], err)
	}
	c.mu.Lock()
	c.procs[i] = p
	c.mu.Unlock()
	return nil
}

// kill sends SIGKILL to server i and reaps it.
func (c *cluster) kill(i int) {
	c.mu.Lock()
	p := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

func (c *cluster) proc(i int) *childproc.Child {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[i]
}

func (c *cluster) stopAll() {
	for i := range c.procs {
		if p := c.proc(i); p != nil {
			_ = p.Signal(syscall.SIGCONT) // a frozen one must be able to die
			c.kill(i)
		}
	}
}

// logs is what the servers printed on stderr, for failures.
func (c *cluster) logs() string {
	var b strings.Builder
	for i := range c.procs {
		if p := c.proc(i); p != nil {
			fmt.Fprintf(&b, "--- %s:\n%s\n", c.names[i], tail(p.Stderr(), 3000))
		}
	}
	return b.String()
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// client talks to every server (the CLI's client: a server that cannot
// be reached is skipped for the next).
func (c *cluster) client() *cli.Client {
	return cli.NewClient(strings.Join(c.urls, ","), c.token, 5*time.Second)
}

// clientOf talks to server i only.
func (c *cluster) clientOf(i int) *cli.Client {
	return cli.NewClient(c.urls[i], c.token, 5*time.Second)
}

// servers asks server i for the servers list.
func (c *cluster) servers(i int) (api.ServerList, error) {
	var out api.ServerList
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := c.clientOf(i).Do(ctx, http.MethodGet, "/api/v1/servers", nil, &out)
	return out, err
}

// leader waits (up to d) until the running servers agree on one leader
// whose /readyz is 200, and returns its index.
func (c *cluster) leader(d time.Duration) int {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if i, ok := c.agreedLeader(); ok {
			return i
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.t.Fatalf("no leader within %s\n%s", d, c.logs())
	return -1
}

func (c *cluster) agreedLeader() (int, bool) {
	leader := ""
	for i := range c.urls {
		if !c.up(i) {
			continue
		}
		l, err := c.servers(i)
		if err != nil || l.Leader == "" || (leader != "" && l.Leader != leader) {
			return 0, false
		}
		leader = l.Leader
	}
	for i, n := range c.names {
		if n == leader && c.up(i) && ready(c.urls[i]) == http.StatusOK {
			return i, true
		}
	}
	return 0, false
}

// ready is the status of GET /readyz (0: no answer).
func ready(base string) int {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(base + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitReady waits until server i answers /readyz with 200 (a standby: a
// leader is elected and it has joined).
func (c *cluster) waitReady(i int, d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for ready(c.urls[i]) != http.StatusOK {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s not ready within %s\n%s", c.names[i], d, c.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// submit POSTs a task with id until an answer says it is stored (201, or
// 409 for a retry of a submission whose answer was lost).
func submit(ctx context.Context, c *cli.Client, id string) error {
	return untilStored(ctx, c, http.MethodPost, "/api/v1/tasks", []byte(`{"id":"`+id+`","priority":2,"resources":{"cpu":"1"}}`))
}

// cancelTask DELETEs task id until an answer says it is cancelled (200,
// or 409 for a retry of a cancel whose answer was lost).
func cancelTask(ctx context.Context, c *cli.Client, id string) error {
	return untilStored(ctx, c, http.MethodDelete, "/api/v1/tasks/"+id, nil)
}

// untilStored sends the request again, every 50 ms, until it succeeds or
// is refused as done already (409), or ctx ends.
func untilStored(ctx context.Context, c *cli.Client, method, path string, body []byte) error {
	for ctx.Err() == nil {
		code, err := c.Do(ctx, method, path, body, nil)
		if err == nil || code == http.StatusConflict {
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	return ctx.Err()
}

// listAll reads every task's state from the leader (through any server).
func listAll(t *testing.T, c *cli.Client) map[string]string {
	t.Helper()
	out := map[string]string{}
	cursor := ""
	for page := 0; page < 10000; page++ {
		var p struct {
			Tasks []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"tasks"`
			Cursor string `json:"cursor"`
		}
		path := "/api/v1/tasks?limit=10000"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		// A leadership change (a later term) may be under way: a 503
		// from a standby is tried again, for up to 30 s.
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			_, err := c.Do(ctx, http.MethodGet, path, nil, &p)
			cancel()
			if err == nil {
				break
			}
			// So is a request the server being elected did not answer in
			// time (it was seen once after a partition healed, on a
			// loaded machine).
			var ae *cli.APIError
			var ne net.Error
			unanswered := errors.As(err, &ne) && ne.Timeout()
			if !unanswered && (!errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable) || time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		for _, task := range p.Tasks {
			if _, dup := out[task.ID]; dup {
				t.Errorf("task %s listed twice", task.ID)
			}
			out[task.ID] = task.State
		}
		if p.Cursor == "" {
			return out
		}
		cursor = p.Cursor
	}
	t.Fatal("more than 10000 pages")
	return nil
}

// writers submit (and cancel every fifth of) tasks through c until ctx
// ends, recording the last state each was acknowledged in.
type writers struct {
	mu    sync.Mutex
	acked map[string]string
	wg    sync.WaitGroup
}

func startWriters(ctx context.Context, c *cluster, n int) *writers {
	w := &writers{acked: map[string]string{}}
	startWritersVia(ctx, c.client(), "w", n, w)
	return w
}

// startWritersVia starts n writers on cl whose ids start with prefix,
// recording into w; the group ends when they have.
func startWritersVia(ctx context.Context, cl *cli.Client, prefix string, n int, w *writers) *sync.WaitGroup {
	var group sync.WaitGroup
	for k := range n {
		w.wg.Add(1)
		group.Add(1)
		go func() {
			defer w.wg.Done()
			defer group.Done()
			for i := 0; ctx.Err() == nil; i++ {
				id := prefix + strconv.Itoa(k) + "-" + strconv.Itoa(i)
				if submit(ctx, cl, id) != nil {
					return
				}
				w.set(id, "pending")
				if i%5 == 4 {
					w.set(id, "pending|cancelled") // either, until the cancel is answered
					if cancelTask(ctx, cl, id) != nil {
						return
					}
					w.set(id, "cancelled")
				}
			}
		}()
	}
	return &group
}

func (w *writers) set(id, state string) {
	w.mu.Lock()
	w.acked[id] = state
	w.mu.Unlock()
}

func (w *writers) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// check compares what was acknowledged with what the cluster has.
func (w *writers) check(t *testing.T, have map[string]string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	lost, wrong := 0, 0
	for id, want := range w.acked {
		got, ok := have[id]
		switch {
		case !ok:
			lost++
			if lost <= 5 {
				t.Errorf("acknowledged task %s is gone", id)
			}
		case got != want && !slices.Contains(strings.Split(want, "|"), got):
			wrong++
			if wrong <= 5 {
				t.Errorf("task %s is %s; its last acknowledged state is %s", id, got, want)
			}
		}
	}
	if lost+wrong > 0 {
		t.Errorf("%d of %d acknowledged tasks lost, %d in another state", lost, len(w.acked), wrong)
	}
}

var errNoWrite = errors.New("no write acknowledged")

// probe submits fresh tasks until one is acknowledged and returns which
// and when.
func probe(ctx context.Context, c *cli.Client, prefix string) (string, time.Time, error) {
	return probeWith(ctx, c, prefix, "")
}

// probeWith is probe with more fields of the task's JSON (",..." or "").
func probeWith(ctx context.Context, c *cli.Client, prefix, more string) (string, time.Time, error) {
	for i := 0; ctx.Err() == nil; i++ {
		id := prefix + strconv.Itoa(i)
		body := []byte(`{"id":"` + id + `","resources":{"cpu":"1"}` + more + `}`)
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.Do(rctx, http.MethodPost, "/api/v1/tasks", body, nil)
		cancel()
		if err == nil {
			return id, time.Now(), nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", time.Time{}, errNoWrite
}
