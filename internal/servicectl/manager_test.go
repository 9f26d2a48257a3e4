package servicectl

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a test's time, shared by the engine and the manager: it runs
// as the wall clock does (the engine's loop places work a few
// milliseconds after it is due) and jumps forward when the test says.
type clock struct {
	mu    sync.Mutex
	start time.Time
	real  time.Time
	jump  time.Duration
}

func newClock() *clock {
	return &clock{start: time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC), real: time.Now()}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start.Add(time.Since(c.real) + c.jump)
}

func (c *clock) add(d time.Duration) time.Time {
	c.mu.Lock()
	c.jump += d
	c.mu.Unlock()
	return c.Now()
}

// rig is an engine on a store on disk with four CPU nodes in two zones,
// and a manager on it, both on the test's clock.
type rig struct {
	t   *testing.T
	clk *clock
	eng *engine.Engine
	st  store.Store
	m   *Manager
	dir string
}

func newRig(t *testing.T) *rig {
	r := &rig{t: t, clk: newClock(), dir: t.TempDir()}
	r.open()
	var nodes []api.Node
	for i := range 4 {
		nodes = append(nodes, api.Node{Name: fmt.Sprint("n", i), Labels: map[string]string{"zone": fmt.Sprint("z", i%2)},
			Capacity: resource.List{resource.CPU: 8000, resource.Memory: 8 << 30}})
	}
	if _, err := r.eng.UpsertNodes(context.Background(), nodes); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *rig) open() {
	st, err := store.OpenDisk(r.dir, store.DiskOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Core: core.DefaultConfig(), Now: r.clk.Now}, st)
	if err != nil {
		st.Close()
		r.t.Fatal(err)
	}
	r.eng, r.st = eng, st
	r.m = New(Config{Engine: eng, Now: r.clk.Now})
	r.t.Cleanup(r.close)
}

func (r *rig) close() {
	if r.eng != nil {
		r.eng.Close()
		r.st.Close()
		r.eng = nil
	}
}

// pass runs one pass at the clock's time plus d, then waits until every
// replica it made has been placed (the engine's loop places them after
// the commit that made them).
func (r *rig) pass(d time.Duration) {
	r.m.Pass(context.Background(), r.clk.add(d))
	for _, t := range r.eng.Replicas("echo") {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tr, err := r.eng.WaitPlaced(ctx, t.Spec.ID)
		cancel()
		if err != nil || tr.Waiting() {
			r.t.Fatalf("replica %s not placed: %v", t.Spec.ID, err)
		}
	}
}

// live are the service's replicas that have not ended, by state.
func (r *rig) live(id string) (ids []string, byState map[string]int) {
	byState = map[string]int{}
	for _, t := range r.eng.Replicas(id) {
		byState[t.State]++
		if !ended(t.State) {
			ids = append(ids, t.Spec.ID)
		}
	}
	return ids, byState
}

// startAll marks every scheduled replica started (an agent ran it).
func (r *rig) startAll(id string) {
	for _, t := range r.eng.Replicas(id) {
		if t.State == "scheduled" {
			if err := r.eng.Started(context.Background(), t.Spec.ID); err != nil {
				r.t.Fatal(err)
			}
		}
	}
}

func echo(n int) api.Service {
	return api.Service{Name: "echo", Replicas: n, Template: api.ServiceTemplate{Command: []string{"./serve"},
		Resources: resource.List{resource.CPU: 1000}}}
}

// TestManagerKeepsReplicasRunning: the manager makes the count asked for,
// spread over the nodes; a failed replica is replaced after the backoff;
// scaling down stops replicas; a changed template rolls out one at a time;
// endpoints list the running ones; deleting the service stops them all.
func TestManagerKeepsReplicasRunning(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if _, created, err := r.eng.CreateService(ctx, engine.DefaultTenant, echo(4)); err != nil || !created {
		t.Fatalf("create: %v %v", created, err)
	}
	r.pass(0)
	ids, states := r.live("echo")
	if len(ids) != 4 || states["scheduled"] != 4 {
		t.Fatalf("after a pass: %v %v, want 4 scheduled", ids, states)
	}
	nodes := map[string]bool{}
	for _, tr := range r.eng.Replicas("echo") {
		nodes[tr.Node] = true
		if tr.Spec.Service != "echo" || tr.Spec.Metadata[engine.ServiceLabel] != "echo" || tr.Spec.Metadata[engine.RevisionLabel] == "" {
			t.Errorf("replica %s: service %q, metadata %v", tr.Spec.ID, tr.Spec.Service, tr.Spec.Metadata)
		}
	}
	if len(nodes) != 4 {
		t.Errorf("4 replicas on %d nodes, want one per node (the default spread)", len(nodes))
	}
	r.startAll("echo")
	r.pass(time.Second)
	rec, _ := r.eng.Service("echo")
	if rec.Status.Ready != 4 || rec.Status.Replicas != 4 || len(rec.Endpoints) != 4 {
		t.Fatalf("running: status %+v, %d endpoints, want 4 ready", rec.Status, len(rec.Endpoints))
	}

	// A replica fails: replaced only after the backoff.
	if err := r.eng.Finished(ctx, ids[0], core.Result{ExitCode: 3}); err != nil {
		t.Fatal(err)
	}
	r.pass(time.Second)
	if ids, _ := r.live("echo"); len(ids) != 3 {
		t.Fatalf("within the backoff: %d live, want 3 (no replacement yet)", len(ids))
	}
	r.pass(10 * time.Second)
	if ids, _ := r.live("echo"); len(ids) != 4 {
		t.Fatalf("after the backoff: %d live, want 4", len(ids))
	}
	r.startAll("echo")

	// Scaled down by hand to 2.
	if _, err := r.eng.ScaleService(ctx, "echo", 2); err != nil {
		t.Fatal(err)
	}
	r.pass(time.Second)
	if ids, st := r.live("echo"); len(ids) != 2 {
		t.Fatalf("scaled to 2: %d live %v", len(ids), st)
	}
	rec, _ = r.eng.Service("echo")
	if ls := rec.Status.LastScale; ls == nil || ls.From != 4 || ls.To != 2 {
		t.Errorf("last scale %+v, want 4 to 2", ls)
	}

	// A new template rolls out: one new at a time (maxSurge 1, maxUnavailable 0).
	svc := echo(2)
	svc.Template.Command = []string{"./serve", "--v2"}
	if _, err := r.eng.UpdateService(ctx, "echo", svc); err != nil {
		t.Fatal(err)
	}
	for step := 0; step < 10; step++ {
		r.pass(time.Second)
		ids, _ := r.live("echo")
		if len(ids) > 3 {
			t.Fatalf("rollout step %d: %d live, want at most 3 (2 + maxSurge 1)", step, len(ids))
		}
		r.startAll("echo")
	}
	for _, tr := range r.eng.Replicas("echo") {
		if !ended(tr.State) && len(tr.Spec.Command) != 2 {
			t.Errorf("after the rollout, replica %s runs %v", tr.Spec.ID, tr.Spec.Command)
		}
	}
	if ids, _ := r.live("echo"); len(ids) != 2 {
		t.Fatalf("after the rollout: %d live, want 2", len(ids))
	}

	// Deleted: every replica stops, the record goes.
	if err := r.eng.DeleteService(ctx, "echo"); err != nil {
		t.Fatal(err)
	}
	if ids, _ := r.live("echo"); len(ids) != 0 {
		t.Fatalf("deleted: %d live", len(ids))
	}
	if _, ok := r.eng.Service("echo"); ok {
		t.Fatal("deleted service still there")
	}
	r.pass(time.Second) // forgets its controller
}

// TestManagerResumesAfterRestart: the service and its replicas are
// durable; a new engine and manager on the same store keep the replicas
// (nothing made twice), and replica ids never repeat.
func TestManagerResumesAfterRestart(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if _, _, err := r.eng.CreateService(ctx, engine.DefaultTenant, echo(3)); err != nil {
		t.Fatal(err)
	}
	r.pass(0)
	before, _ := r.live("echo")
	r.close()
	r.open()
	r.pass(time.Second)
	after, _ := r.live("echo")
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("replicas before the restart %v, after %v", before, after)
	}
	if _, err := r.eng.ScaleService(ctx, "echo", 4); err != nil {
		t.Fatal(err)
	}
	r.pass(time.Second)
	now, _ := r.live("echo")
	seen := map[string]bool{}
	for _, id := range now {
		if seen[id] {
			t.Fatalf("replica id %s twice: %v", id, now)
		}
		seen[id] = true
	}
	if len(now) != 4 || !seen["echo-4"] {
		t.Fatalf("scaled to 4 after a restart: %v, want echo-1..4", now)
	}
}

// TestCreateServiceRules: the same spec again is idempotent, another
// spec under the name a conflict; a replica cannot be submitted as a
// plain task; scaling an autoscaled service by hand is refused.
func TestCreateServiceRules(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if _, created, err := r.eng.CreateService(ctx, "team-a", echo(1)); err != nil || !created {
		t.Fatal(err)
	}
	if _, created, err := r.eng.CreateService(ctx, "team-a", echo(1)); err != nil || created {
		t.Fatalf("the same spec again: created %v, %v; want the existing one", created, err)
	}
	if _, _, err := r.eng.CreateService(ctx, "team-a", echo(2)); err == nil {
		t.Fatal("another spec under the name: accepted")
	}
	if _, errs, err := r.eng.Submit(ctx, "team-a", []api.Task{{Command: []string{"x"}, Service: "echo"}}); err != nil || errs[0] == nil {
		t.Fatalf("a task naming a service: %v %v, want refused", errs, err)
	}
	auto := echo(2)
	auto.Name = "auto"
	auto.Autoscale = &api.Autoscale{Min: 2, Max: 4, Metrics: []api.AutoscaleMetric{{Resource: "cpu", Target: "70%"}}}
	if _, _, err := r.eng.CreateService(ctx, "team-a", auto); err != nil {
		t.Fatal(err)
	}
	if _, err := r.eng.ScaleService(ctx, "team-a:auto", 3); err == nil {
		t.Fatal("scaling an autoscaled service by hand: accepted")
	}
}

// TestManagerScalesOnPushedMetric: values the replicas push (POST
// …/metrics) drive the autoscaler; a name that is not one of the
// service's custom metrics is refused; the decision is the service's
// last scale, with its reason.
func TestManagerScalesOnPushedMetric(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	svc := echo(2)
	svc.Autoscale = &api.Autoscale{Min: 1, Max: 4, Metrics: []api.AutoscaleMetric{{Custom: "rps", Target: "10"}}}
	if _, _, err := r.eng.CreateService(ctx, engine.DefaultTenant, svc); err != nil {
		t.Fatal(err)
	}
	r.pass(0)
	r.startAll("echo")
	rec, _ := r.eng.Service("echo")
	ids, _ := r.live("echo")
	if err := r.m.Push("echo", rec, ids[0], map[string]float64{"latency": 3}, r.clk.Now()); err == nil {
		t.Error("a metric the service does not scale on: accepted")
	}
	for _, id := range ids {
		if err := r.m.Push("echo", rec, id, map[string]float64{"rps": 30}, r.clk.Now()); err != nil {
			t.Fatal(err)
		}
	}
	r.pass(time.Second)
	rec, _ = r.eng.Service("echo")
	if ids, _ := r.live("echo"); len(ids) != 4 || rec.Status.Desired != 4 {
		t.Fatalf("at 3× the target: %d live, desired %d; want max 4", len(ids), rec.Status.Desired)
	}
	if ls := rec.Status.LastScale; ls == nil || ls.From != 2 || ls.To != 4 || !strings.Contains(ls.Reason, "ScaleUp") {
		t.Errorf("last scale %+v, want 2 to 4 with the reason", ls)
	}
	if len(rec.Notes) == 0 || rec.Notes[len(rec.Notes)-1].Kind != "scaled" {
		t.Errorf("notes %+v, want the decision", rec.Notes)
	}
}

// agentsAt answers every node's agent address as 127.0.0.1 (the rig's
// nodes are static: no agent registered them).
type agentsAt struct{ *engine.Engine }

func (agentsAt) AgentLogs(string) (string, string, bool) { return "http://127.0.0.1:1", "", true }

// TestManagerScrapesReplicaMetrics: a custom metric with scrape is read
// from each ready replica's Prometheus endpoint (the sum of its series)
// and drives the autoscaler as pushed values do.
func TestManagerScrapesReplicaMetrics(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/stats" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "# TYPE rps gauge\nrps{path=\"/a\"} 20\nrps{path=\"/b\"} 10\nother 5\n")
	}))
	defer srv.Close()
	port, _ := strconv.Atoi(srv.URL[strings.LastIndexByte(srv.URL, ':')+1:])
	r := newRig(t)
	r.m = New(Config{Engine: agentsAt{r.eng}, Now: r.clk.Now})
	ctx := context.Background()
	svc := echo(2)
	svc.Autoscale = &api.Autoscale{Min: 1, Max: 4, Metrics: []api.AutoscaleMetric{{Custom: "rps", Target: "10", Scrape: &api.MetricScrape{Port: port, Path: "/stats"}}}}
	if _, _, err := r.eng.CreateService(ctx, engine.DefaultTenant, svc); err != nil {
		t.Fatal(err)
	}
	r.pass(0)
	r.startAll("echo")
	r.pass(time.Second) // ready now: scraped (30 a replica), scaled to max
	r.pass(time.Second)
	rec, _ := r.eng.Service("echo")
	if rec.Status.Desired != 4 {
		t.Fatalf("scraped 30 rps a replica at a target of 10: desired %d, want max 4; last scale %+v", rec.Status.Desired, rec.Status.LastScale)
	}
}
