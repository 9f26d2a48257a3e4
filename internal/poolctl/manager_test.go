package poolctl

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/nodepool"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock runs as the wall clock does and jumps when told (the engine's
// loop places work when due on it).
type clock struct {
	mu   sync.Mutex
	jump time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.jump)
}

func (c *clock) add(d time.Duration) time.Time {
	c.mu.Lock()
	c.jump += d
	c.mu.Unlock()
	return c.Now()
}

func gpuPool(command []string) api.NodePool {
	devs := make([]api.Device, 4)
	for i := range devs {
		devs[i] = api.Device{Type: "nvidia.com/gpu", ID: string(rune('0' + i)), Model: "L4"}
	}
	return api.NodePool{Name: "burst", Max: 3, Template: api.Node{Labels: map[string]string{"gpu.model": "L4"},
		Capacity: resource.List{resource.CPU: 16000, resource.Memory: 64 << 30}, Devices: devs},
		ScaleOutAfter: api.Duration(10 * time.Second), ScaleInAfter: api.Duration(time.Minute),
		Provider: api.PoolProvider{Exec: &api.ExecPoolProvider{Command: command}}}
}

// TestExecPoolGrowsAndShrinks: with a real engine and an exec provider (a
// script that records what it is asked), GPU tasks that waited past
// scaleOutAfter make the pool ask for the nodes they need, named and
// counted until they register; once registered and idle past
// scaleInAfter, a node is drained, then the provider removes it and the
// engine forgets it.
func TestExecPoolGrowsAndShrinks(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := `echo "$HETSCHED_POOL $HETSCHED_ACTION $HETSCHED_NODES $HETSCHED_REQUEST_ID" >> "$CALLS"; echo "$HETSCHED_NODE_TEMPLATE" | grep -q '"capacity"'`
	t.Setenv("CALLS", calls)
	pool := gpuPool([]string{"sh", "-c", script})
	clk := &clock{}
	st, err := store.OpenDisk(filepath.Join(dir, "store"), store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(engine.Config{Core: core.DefaultConfig(), Now: clk.Now}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := context.Background()
	var tasks []api.Task
	for _, id := range []string{"a", "b", "c"} {
		tasks = append(tasks, api.Task{ID: id, Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 4000}, NodeSelector: map[string]string{"gpu.model": "L4"}})
	}
	if _, errs, err := eng.Submit(ctx, engine.DefaultTenant, tasks); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	if created, err := eng.PutNodePool(ctx, pool); err != nil || !created {
		t.Fatal(created, err)
	}
	m := New(Config{Engine: eng, Planner: nodepool.New(core.DefaultConfig()), Now: clk.Now})
	read := func() string { b, _ := os.ReadFile(calls); return string(b) }

	if err := m.Pass(ctx, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if read() != "" {
		t.Fatalf("before scaleOutAfter the provider was called: %q", read())
	}
	if err := m.Pass(ctx, clk.add(11*time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := read(); !strings.HasPrefix(got, "burst add burst-1 burst-2 burst-3 burst-") {
		t.Fatalf("after scaleOutAfter: provider calls %q, want three nodes added", got)
	}
	if err := m.Pass(ctx, clk.add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if strings.Count(read(), "\n") != 1 {
		t.Fatalf("nodes launching were asked for again: %q", read())
	}

	// The agents "register" (the nodes appear), the tasks run and end.
	var nodes []api.Node
	for _, name := range []string{"burst-1", "burst-2", "burst-3"} {
		nodes = append(nodes, nodepool.Template(&pool, name))
	}
	if _, err := eng.UpsertNodes(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := eng.WaitPlaced(wctx, id)
		cancel()
		if err != nil || r.Waiting() || !strings.HasPrefix(r.Node, "burst-") {
			t.Fatalf("task %s: %+v %v, want placed on a pool node", id, r, err)
		}
		if err := eng.Started(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := eng.Finished(ctx, id, core.Result{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Pass(ctx, clk.add(time.Second)); err != nil { // idle from here
		t.Fatal(err)
	}
	if err := m.Pass(ctx, clk.add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	views, _ := eng.NodeViews(ctx)
	draining := 0
	for _, v := range views {
		if v.State == api.NodeDraining {
			draining++
		}
	}
	if draining != 3 || strings.Contains(read(), "remove") {
		t.Fatalf("idle past scaleInAfter: %d draining, calls %q; want all three drained, none removed yet", draining, read())
	}
	if err := m.Pass(ctx, clk.add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if got := read(); strings.Count(got, "burst remove") != 3 {
		t.Fatalf("drained and empty: provider calls %q, want three removals", got)
	}
	if views, _ := eng.NodeViews(ctx); len(views) != 0 {
		t.Fatalf("removed nodes still known: %d", len(views))
	}
}

// TestProvidersReportFailures: a command that fails and a webhook that
// answers 500 are errors carrying what they said; a webhook gets the
// request as JSON.
func TestProvidersReportFailures(t *testing.T) {
	pool := gpuPool([]string{"sh", "-c", "echo no capacity in zone a >&2; exit 3"})
	e := &ExecProvider{Spec: *pool.Provider.Exec}
	if err := e.Add(context.Background(), &pool, []string{"burst-1"}, "r1"); err == nil || !strings.Contains(err.Error(), "no capacity in zone a") {
		t.Errorf("failing command: %v", err)
	}
	var got Request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(&got)
		if got.Action == "remove" {
			http.Error(w, "quota", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	w := NewWebhookProvider(api.WebhookPoolProvider{URL: srv.URL})
	if err := w.Add(context.Background(), &pool, []string{"burst-1"}, "r2"); err != nil || got.Pool != "burst" || got.Nodes[0] != "burst-1" || got.Request != "r2" {
		t.Errorf("webhook add: %v, body %+v", err, got)
	}
	if err := w.Remove(context.Background(), &pool, []string{"burst-1"}, "r3"); err == nil || !strings.Contains(err.Error(), "quota") {
		t.Errorf("webhook remove answered 500: %v", err)
	}
}
