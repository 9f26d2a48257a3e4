package observability

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
)

// The live server's static inventory: a GPU node with two devices and a
// CPU node. A third node, gpu-b, registers as an agent would, so that the
// heartbeat series (utilization, memory used) have data.
const liveNodes = `nodes:
  - name: gpu-a
    capacity: {cpu: "16", memory: 64Gi}
    devices:
      - {type: nvidia.com/gpu, id: "0", model: L4, memory: 24Gi}
      - {type: nvidia.com/gpu, id: "1", model: L4, memory: 24Gi}
  - name: cpu-a
    capacity: {cpu: "8", memory: 32Gi}
`

// Two tenant queues: team-a may borrow a GPU past its guarantee (its max
// is 2); team-b may hold one GPU.
const liveQueues = `queues:
  - {name: team-a, parent: root, guaranteed: {nvidia.com/gpu: 1, cpu: "4"}, max: {nvidia.com/gpu: 2}, weight: 2}
  - {name: team-b, parent: root, guaranteed: {cpu: "4"}, max: {nvidia.com/gpu: 1, cpu: "8"}, weight: 1}
`

// exemptPanels are the panels allowed to return no data under the live
// load, by title, with why. None is: every series the dashboards read is
// exported at 0 from the start or given data by the load below.
var exemptPanels = map[string]string{}

// TestDashboardQueriesLive runs a real hetsched server and Debian's
// prometheus scraping it with deploy/prometheus's configuration and alert
// rules, puts a small load of every tier on the server (placements, a
// preemption, tasks waiting for resources, a queue's max and a
// dependency, agent heartbeats), and then runs every dashboard's every
// query (and every template variable's) through Prometheus's API: each
// must succeed and return data.
func TestDashboardQueriesLive(t *testing.T) {
	promBin := need(t, "prometheus")
	if testing.Short() {
		t.Skip("-short: builds hetsched and runs it and prometheus as processes")
	}
	base := startServer(t, hetschedBinary(t))
	p := startPrometheus(t, promBin, strings.TrimPrefix(base, "http://"))
	eventually(t, time.Minute, "the hetsched target up", p.targetUp)
	// A few scrapes before the load, so that the rates over the last
	// minute ($__rate_interval) see the counters move.
	p.waitScrapes(t, 3)
	rules := alertRules(t)
	eventually(t, time.Minute, "the alert rules evaluated", func() error { return p.rulesHealthy(rules) })

	putLoad(t, base)
	for _, q := range []string{
		`min(hetsched_placements_total) > 0`, // every tier placed
		`hetsched_preemptions_total{reason="priority"} > 0`,
		`hetsched_pending_tasks_by_reason{reason="queue_max"} > 0`,
		`hetsched_pending_tasks_by_reason{reason="dependencies"} > 0`,
		`hetsched_pending_tasks_by_reason{reason="resources"} > 0`,
		`hetsched_node_device_utilization_ratio`,
		`hetsched_queue_next_start_seconds`,
	} {
		eventually(t, time.Minute, "Prometheus has scraped the load", func() error { return p.has(q) })
	}
	// The engine refreshes its gauges while a scrape may be reading them:
	// the scrape that first showed the load may have read one vector
	// before a refresh and the next after it. Two more scrapes of the
	// settled state.
	p.waitScrapes(t, 2)

	for _, d := range loadDashboards(t) {
		vars := map[string]bool{}
		for _, v := range d.Templating.List {
			vars[v.Name] = true
		}
		checkVariablesLive(t, p, d, vars)
		for _, pn := range d.allPanels() {
			checkPanelLive(t, p, d.file, pn, vars)
		}
	}
	if err := p.rulesHealthy(rules); err != nil {
		t.Errorf("after the load: %v", err)
	}
}

// checkPanelLive runs each of a panel's queries, which must return data
// unless the panel is exempt.
func checkPanelLive(t *testing.T, p *prom, file string, pn panel, vars map[string]bool) {
	t.Helper()
	why, exempt := exemptPanels[pn.Title]
	for _, tg := range pn.Targets {
		q, err := substitute(tg.Expr, vars)
		if err != nil {
			t.Errorf("%s: panel %q: %v", file, pn.Title, err)
			continue
		}
		res, err := p.query(q)
		switch {
		case err != nil:
			t.Errorf("%s: panel %q target %s: %v", file, pn.Title, tg.RefID, err)
		case exempt:
			t.Logf("%s: panel %q target %s: %d series (exempt: %s)", file, pn.Title, tg.RefID, len(res), why)
		case !finite(res):
			t.Errorf("%s: panel %q target %s returns no data: %s\n%v", file, pn.Title, tg.RefID, q, res)
		}
	}
}

// checkVariablesLive runs each label_values variable: it must name values.
func checkVariablesLive(t *testing.T, p *prom, d dashboard, vars map[string]bool) {
	t.Helper()
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		sel, label, err := labelValuesQuery(v.queryText())
		if err == nil {
			sel, err = substitute(sel, vars)
		}
		if err != nil {
			t.Errorf("%s: variable %s: %v", d.file, v.Name, err)
			continue
		}
		var values []string
		if err := p.api("/api/v1/label/"+label+"/values", url.Values{"match[]": {sel}}, &values); err != nil || len(values) == 0 {
			t.Errorf("%s: variable %s (%s): values %v, %v", d.file, v.Name, v.queryText(), values, err)
		}
	}
}

// startServer runs `hetsched server` on loopback with the live inventory
// and queues; heartbeats are due every minute, so the registered agent
// node stays ready through the test. It is killed when the test ends.
func startServer(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	nodes, queues := filepath.Join(dir, "nodes.yaml"), filepath.Join(dir, "queues.yaml")
	for f, s := range map[string]string{nodes: liveNodes, queues: liveQueues} {
		if err := os.WriteFile(f, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s, err := childproc.Start(bin, time.Minute, "server", "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"),
		"--nodes", nodes, "--queues", queues, "--heartbeat-interval", "1m")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Kill()
		if t.Failed() {
			t.Logf("hetsched server's stderr:\n%s", s.Stderr())
		}
	})
	return s.URL
}

// putLoad registers an agent node (gpu-b, one A100) and heartbeats it,
// then submits leases of every tier: team-a holds two GPUs (one borrowed
// past its guarantee), a team-b task waits for its CPU max, a 100-CPU
// task waits for resources and a task depending on it for it, and an
// urgent GPU task of the root queue preempts team-b's low-tier one.
func putLoad(t *testing.T, base string) {
	t.Helper()
	c := newClient(t)
	api := base + "/api/v1"
	post := func(path, body string, want int) {
		t.Helper()
		var m map[string]any
		if code, err := call(c, "POST", api+path, body, &m); err != nil || code != want {
			t.Fatalf("POST %s: %d %v %v, want %d", path, code, m, err, want)
		}
	}
	post("/agents/register", `{"agent":"gpu-b","nodes":[{"name":"gpu-b","capacity":{"cpu":"8","memory":"16Gi"},`+
		`"devices":[{"type":"nvidia.com/gpu","id":"0","model":"A100","memory":"40Gi"}]}]}`, 200)
	post("/agents/gpu-b/heartbeat", `{"nodes":[{"node":"gpu-b","cpu":0.25,"memoryUsed":4294967296,`+
		`"devices":{"0":{"utilization":0.5,"memoryUsed":1073741824}}}]}`, 200)
	post("/tasks", `{"tasks":[`+
		lease("low-gpu", "team-b", 3, `{"nvidia.com/gpu":1}`, "")+","+
		lease("urgent-1", "team-a", 0, `{"cpu":"1","nvidia.com/gpu":1}`, "")+","+
		lease("high-1", "team-a", 1, `{"cpu":"1"}`, "")+","+
		lease("medium-1", "team-b", 2, `{"cpu":"2"}`, "")+","+
		lease("low-1", "team-b", 3, `{"cpu":"1"}`, "")+","+
		lease("over-max", "team-b", 3, `{"cpu":"6"}`, "")+","+
		lease("huge", "team-a", 2, `{"cpu":"100"}`, "")+","+
		lease("after-huge", "team-a", 2, `{"cpu":"1"}`, `"huge"`)+"]}", 201)
	for _, id := range []string{"urgent-1", "high-1", "medium-1", "low-1"} {
		waitScheduled(t, c, api, id)
	}
	// The last free GPU, then one that only a preemption frees.
	post("/schedule?wait=10s", lease("urgent-2", "team-a", 0, `{"nvidia.com/gpu":1}`, ""), 200)
	post("/schedule?wait=10s", lease("urgent-root", "", 0, `{"nvidia.com/gpu":1}`, ""), 200)
}

// lease is a task without a command that holds its placement until
// cancelled, with a declared runtime (for the queues' expected starts).
func lease(id, queue string, priority int, resources, depends string) string {
	s := fmt.Sprintf(`{"id":%q,"priority":%d,"resources":%s,"lease":"never","duration":"10m"`, id, priority, resources)
	if queue != "" {
		s += fmt.Sprintf(`,"queue":%q`, queue)
	}
	if depends != "" {
		s += `,"depends":[` + depends + `]`
	}
	return s + "}"
}

// waitScheduled waits for a task to be placed.
func waitScheduled(t *testing.T, c *http.Client, api, id string) {
	t.Helper()
	eventually(t, 30*time.Second, id+" scheduled", func() error {
		var m map[string]any
		code, err := call(c, "GET", api+"/tasks/"+id, "", &m)
		if err == nil && (code != 200 || m["state"] != "scheduled") {
			err = fmt.Errorf("%d: %v", code, m)
		}
		return err
	})
}
