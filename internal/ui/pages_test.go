package ui_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

// staticNodes is an inventory of n one-CPU nodes s-000, s-001, ….
func staticNodes(n int) string {
	var b strings.Builder
	b.WriteString("nodes:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - {name: s-%03d, capacity: {cpu: \"1\", memory: 1Gi}}\n", i)
	}
	return b.String()
}

// TestUIJobsLogsNodesAndFocus, in a real headless Chromium against a
// server and a real agent: the jobs page lists the jobs; a job's page
// draws its DAG with each task's state and follows it live as a task
// ends; a gang's page says how many members are placed and why it
// waits; a task's page tails its output while it runs and keeps the
// tail across a live re-render; a live re-render keeps the focus and
// what the user typed in a filter; the nodes page pages 251 nodes 100
// at a time as the API does; a node's page shows its devices.
func TestUIJobsLogsNodesAndFocus(t *testing.T) {
	base := servertest.Start(t, staticNodes(250))
	startAgent(t, base, "n1", []api.Device{{Type: "nvidia.com/gpu", ID: "0", Model: "L4"}, {Type: "nvidia.com/gpu", ID: "1", Model: "L4"}})
	files := t.TempDir()
	talkGo, prepGo := filepath.Join(files, "talk-go"), filepath.Join(files, "prep-go")
	onN1 := `"nodeSelector":{"hetsched.io/node":"n1"}`
	waitFor := func(f, then string) string {
		return fmt.Sprintf(`["sh","-c","echo first; while [ ! -f %s ]; do sleep 0.05; done; echo %s"]`, f, then)
	}
	mustPost := func(path, body string) {
		t.Helper()
		if code := call(t, "POST", base+path, "", body, nil); code >= 300 {
			t.Fatalf("POST %s %s: %d", path, body, code)
		}
	}
	mustPost("/api/v1/tasks", `{"id":"talk","resources":{"cpu":"1"},`+onN1+`,"command":`+waitFor(talkGo, "second")+`}`)
	mustPost("/api/v1/jobs", `{"id":"pipe","tasks":[
		{"id":"prep","resources":{"cpu":"1"},`+onN1+`,"command":`+waitFor(prepGo, "prepped")+`},
		{"id":"train","resources":{"cpu":"1"},`+onN1+`,"command":["echo","trained"],"depends":["prep"]},
		{"id":"eval","resources":{"cpu":"1"},`+onN1+`,"command":["echo","evaluated"],"depends":["train"]}]}`)
	mustPost("/api/v1/jobs", `{"id":"g","gang":{"minMember":3},"tasks":[
		{"id":"w0","resources":{"cpu":"1","nvidia.com/gpu":1},`+onN1+`,"lease":"1h"},
		{"id":"w1","resources":{"cpu":"1","nvidia.com/gpu":1},`+onN1+`,"lease":"1h"},
		{"id":"w2","resources":{"cpu":"1","nvidia.com/gpu":1},`+onN1+`,"lease":"1h"}]}`)

	b := newBrowser(t, 120*time.Second)

	// The jobs page lists both jobs.
	b.do("open the jobs", chromedp.Navigate(base+"/ui/#/jobs"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job="pipe"]`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-job="g"]`)))
	b.shot("jobs")

	// A task's output, followed while it runs, kept across a re-render.
	b.do("open talk", chromedp.Navigate(base+"/ui/#/task/talk"), chromedp.WaitVisible(chromedp.CSS("#log")))
	b.until("talk's first line", `document.getElementById("log").textContent.includes("first")`)
	eval[bool](b, `window.__log = document.getElementById("log"), true`)
	before := b.rendered()
	mustPost("/api/v1/tasks", `{"id":"poke-1","resources":{"cpu":"1"},"lease":"1h"}`) // an event: the page re-renders
	b.until("a live re-render of talk's page", fmt.Sprintf(`+document.getElementById("main").dataset.rendered > %d`, before))
	if !eval[bool](b, `document.getElementById("log") === window.__log && window.__log.textContent.includes("first")`) {
		t.Errorf("the log tail was not kept across a live re-render")
	}
	if err := os.WriteFile(talkGo, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b.until("talk's second line, followed", `document.getElementById("log").textContent === "first\nsecond\n"`)
	b.until("the tail's end", `document.getElementById("log-status").textContent === "Ended."`)
	b.shot("task-log")

	// The job's DAG: boxes and edges as the API says, followed live.
	b.do("open pipe", chromedp.Navigate(base+"/ui/#/job/pipe"), chromedp.WaitVisible(chromedp.CSS(`#dag a[data-task="prep"]`)))
	b.until("prep running", `document.querySelector('#dag a[data-task="prep"]').dataset.state === "running"`)
	edges := eval[[]string](b, `[...document.querySelectorAll("#dag path.edge")].map(e => e.dataset.edge).sort()`)
	if strings.Join(edges, " ") != "prep->train train->eval" {
		t.Errorf("pipe's edges %v, want prep->train and train->eval", edges)
	}
	var job struct {
		Tasks []struct{ ID, State string }
	}
	call(t, "GET", base+"/api/v1/jobs/pipe", "", "", &job)
	for _, task := range job.Tasks {
		name := strings.TrimPrefix(task.ID, "pipe.")
		if got := eval[string](b, fmt.Sprintf(`document.querySelector('#dag a[data-task=%q]').dataset.state`, name)); got != task.State && name != "prep" {
			t.Errorf("pipe's %s drawn %s; the API says %s", name, got, task.State)
		}
	}
	b.shot("job-dag")
	if err := os.WriteFile(prepGo, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b.until("the DAG follows the job to its end", `["prep","train","eval"].every(n => document.querySelector('#dag a[data-task="' + n + '"]').dataset.state === "succeeded")`)
	if s := b.text(`dd[data-field="state"]`); s != "succeeded" {
		t.Errorf("pipe's state shown %q, want succeeded", s)
	}

	// The gang waits for a third GPU, and says so.
	b.do("open g", chromedp.Navigate(base+"/ui/#/job/g"), chromedp.WaitVisible(chromedp.CSS(`dd[data-field="gang-status"]`)))
	b.until("the gang's reason", `document.querySelector('dd[data-field="gang-status"]').textContent.includes("needed to start. gang of job g:")`)
	status, placed := b.text(`dd[data-field="gang-status"]`), b.text(`dd[data-field="gang-placed"]`)
	b.shot("job-gang")
	if !strings.HasPrefix(status, "waiting: 0 of 3 members placed, 3 needed to start") || placed != "0 / 3" {
		t.Errorf("gang status %q, placed %q", status, placed)
	}

	// A live re-render keeps the focus and what was typed.
	b.do("type a filter", chromedp.Navigate(base+"/ui/#/tasks"), chromedp.WaitVisible(chromedp.CSS(`tr[data-id="talk"]`)),
		chromedp.Click(chromedp.CSS(`#task-filters input[name="queue"]`)), chromedp.SendKeys(chromedp.CSS(`#task-filters input[name="queue"]`), "ab"))
	before = b.rendered()
	mustPost("/api/v1/tasks", `{"id":"poke-2","resources":{"cpu":"1"},"lease":"1h"}`)
	b.until("a live re-render of the tasks", fmt.Sprintf(`+document.getElementById("main").dataset.rendered > %d && !!document.querySelector('tr[data-id="poke-2"]')`, before))
	if got := eval[string](b, `document.activeElement.name + "=" + document.activeElement.value + "@" + document.activeElement.selectionStart`); got != "queue=ab@2" {
		t.Errorf("after a live re-render the focus is on %q, want queue=ab@2 (the field, its text, the caret)", got)
	}

	// The nodes page: 100 a page, as the API pages them.
	var page1, page2 struct {
		Nodes  []struct{ Name string }
		Total  int
		Cursor string
	}
	call(t, "GET", base+"/api/v1/nodes?limit=100", "", "", &page1)
	call(t, "GET", base+"/api/v1/nodes?limit=100&cursor="+page1.Cursor, "", "", &page2)
	b.do("open the nodes", chromedp.Navigate(base+"/ui/#/nodes"), chromedp.WaitVisible(chromedp.CSS("#next-page")))
	if rows, total := eval[int](b, `document.querySelectorAll("#nodes tbody tr").length`), b.text("#nodes-total"); rows != 100 || !strings.HasPrefix(total, fmt.Sprint(page1.Total, " nodes match")) || page1.Total != 251 {
		t.Errorf("nodes page 1: %d rows, %q; the API says %d nodes", rows, total, page1.Total)
	}
	b.do("next page", chromedp.Click(chromedp.CSS("#next-page")), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-node=%q]`, page2.Nodes[0].Name))))
	if first := eval[string](b, `document.querySelector("#nodes tbody tr").dataset.node`); first != page2.Nodes[0].Name {
		t.Errorf("nodes page 2 starts at %q; the API's at %q", first, page2.Nodes[0].Name)
	}
	b.shot("nodes-page-2")

	// A node's page: its devices, and the gang's lease-holders not on them.
	b.do("open n1", chromedp.Navigate(base+"/ui/#/node/n1"), chromedp.WaitVisible(chromedp.CSS(`#node-devices tr[data-device="nvidia.com/gpu/1"]`)))
	if n := eval[int](b, `document.querySelectorAll("#node-devices tbody tr").length`); n != 2 {
		t.Errorf("n1's page shows %d devices, want 2", n)
	}
	if !eval[bool](b, `!!document.querySelector('#node-tasks tr[data-id="talk"]')`) {
		t.Errorf("n1's page does not list talk")
	}
	b.shot("node")
}

// TestUIFreesItsStreamWhenPutAway: a page left for another (kept in the
// back-forward cache, as about:blank leaves it) closes its live stream. Chromium holds 6
// connections per server over HTTP/1.1, so streams left open by 8 pages
// would stall the next page's API calls until they time out.
func TestUIFreesItsStreamWhenPutAway(t *testing.T) {
	base := servertest.Start(t, nodesYAML)
	b := newBrowser(t, 60*time.Second)
	for i := range 8 {
		b.do(fmt.Sprintf("open the UI, time %d", i+1), chromedp.Navigate(base+"/ui/#/overview"), chromedp.WaitVisible(chromedp.CSS("#live.on")))
		b.do("leave it", chromedp.Navigate("about:blank"))
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second) // the stall, when streams stay open, lasts about a minute
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/ui/#/tasks"), chromedp.WaitVisible(chromedp.CSS("#tasks")), chromedp.WaitVisible(chromedp.CSS("#live.on"))); err != nil {
		b.fail("the ninth page's API calls", err)
	}
}
