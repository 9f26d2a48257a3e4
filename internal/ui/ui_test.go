package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hetsched/hetsched/internal/server"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

const (
	adminTok = "admin-token-0123456789abcdef"
	aTok     = "team-a-token-0123456789abcd"
	bTok     = "team-b-token-0123456789abcd"
)

const nodesYAML = `nodes:
  - name: gpu-a
    capacity: {cpu: "16", memory: 64Gi}
    devices:
      - {type: nvidia.com/gpu, id: "0", model: L4}
      - {type: nvidia.com/gpu, id: "1", model: L4}
`

// chromium finds Debian's chromium, or skips (fails under CI=true).
func chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found under CI=true; apt-get install -y chromium")
	}
	t.Skip("chromium not found; apt-get install -y chromium")
	return ""
}

// call makes one API request with tok and decodes the answer into out.
func call(t *testing.T, method, url, tok, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp.StatusCode
}

// screenshotDir is where the pages' screenshots go for a person to look
// at ($HETSCHED_UI_SCREENSHOTS, else a directory under the system's temp).
func screenshotDir(t testing.TB) string {
	dir := os.Getenv("HETSCHED_UI_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "hetsched-ui-screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUIInChromium: in a real headless Chromium, the UI asks for a token,
// renders the overview with the API's numbers, lists a tenant's tasks and
// none of another tenant's, shows a task's page with its queue position,
// and a task submitted meanwhile appears without a reload (the events
// stream). Screenshots of each page are written for a person.
func TestUIInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte(fmt.Sprintf("tokens:\n  - {token: %s, role: admin}\n  - {token: %s, role: tenant, tenant: team-a}\n  - {token: %s, role: tenant, tenant: team-b}\n", adminTok, aTok, bTok)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := servertest.StartWith(t, nodesYAML, func(o *server.Options) { o.TokensFile = tokens })
	if code := call(t, "PUT", base+"/api/v1/queues/team-a", adminTok, `{"name":"team-a","guaranteed":{"nvidia.com/gpu":1,"memory":"1Gi"},"max":{"nvidia.com/gpu":2}}`, nil); code != 200 {
		t.Fatalf("queue team-a: %d", code)
	}
	for _, s := range []struct{ tok, body string }{
		{aTok, `{"id":"a1","priority":1,"resources":{"cpu":"1","memory":"5Gi","nvidia.com/gpu":2}}`},
		{aTok, `{"id":"a-waits","priority":1,"resources":{"cpu":"1","nvidia.com/gpu":2}}`},
		{bTok, `{"id":"b1","priority":3,"resources":{"cpu":"1"}}`},
	} {
		if code := call(t, "POST", base+"/api/v1/tasks", s.tok, s.body, nil); code >= 300 {
			t.Fatalf("submit %s: %d", s.body, code)
		}
	}
	for _, j := range []struct{ tok, body string }{
		{aTok, `{"id":"aj","tasks":[{"id":"x","resources":{"cpu":"1"},"lease":"1h"}]}`},
		{bTok, `{"id":"bj","tasks":[{"id":"y","resources":{"cpu":"1"},"lease":"1h"}]}`},
	} {
		if code := call(t, "POST", base+"/api/v1/jobs", j.tok, j.body, nil); code >= 300 {
			t.Fatalf("submit job %s: %d", j.body, code)
		}
	}
	var cluster struct {
		Tasks     int
		Resources map[string]struct{ Capacity, Allocated int64 }
		Devices   []struct {
			Type, Model string
			Devices     int
			Allocated   float64
		}
	}
	call(t, "GET", base+"/api/v1/cluster", adminTok, "", &cluster)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil { // the browser starts on its first run, on a context without a timeout
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelT := context.WithTimeout(bctx, 90*time.Second)
	defer cancelT()
	shots := screenshotDir(t)
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			// What the page shows says why it did not get there.
			dctx, cancel := context.WithTimeout(bctx, 5*time.Second)
			defer cancel()
			page, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Fatalf("%s: %v; the page:\n%s", what, err, page)
		}
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || "<none>"`, sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
		if err == nil {
			err = os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		}
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
	}

	// The token form, then the overview with the API's numbers.
	do("open the UI", chromedp.Navigate(base+"/ui/#/overview"), chromedp.WaitVisible(chromedp.CSS("#token-input")))
	shot("sign-in")
	do("sign in", chromedp.SendKeys(chromedp.CSS("#token-input"), adminTok), chromedp.Click(chromedp.CSS(`#token button[type="submit"]`)), // a click fires the submit event; form.submit() would not
		chromedp.WaitVisible(chromedp.CSS("#cluster-tasks")))
	tasksHeld := text("#cluster-tasks")
	gpuCap := text(`tr[data-resource="nvidia.com/gpu"] td[data-field="capacity"]`)
	gpuAlloc := text(`tr[data-resource="nvidia.com/gpu"] td[data-field="allocated"]`)
	l4Devices := text(`tr[data-device="nvidia.com/gpu/L4"] td[data-field="devices"]`)
	l4Alloc := text(`tr[data-device="nvidia.com/gpu/L4"] td[data-field="allocated"]`)
	heatCells := text("#heatmap-summary")
	shot("overview")
	if !strings.HasPrefix(heatCells, "2 devices on 1 node: 0 unhealthy") {
		t.Errorf("overview heatmap: %q, want 2 devices on 1 node", heatCells)
	}
	if len(cluster.Devices) != 1 || l4Devices != fmt.Sprint(cluster.Devices[0].Devices) || l4Alloc != fmt.Sprint(cluster.Devices[0].Allocated) {
		t.Errorf("overview: L4s %s allocated of %s; the API says %+v", l4Alloc, l4Devices, cluster.Devices)
	}
	if tasksHeld != fmt.Sprint(cluster.Tasks) {
		t.Errorf("overview: %s tasks, the API says %d", tasksHeld, cluster.Tasks)
	}
	// issue 45 §4: the allocation and the measured use, each named so (no
	// agent here: nothing measured).
	if frac, util := text(`tr[data-resource="nvidia.com/gpu"] span[data-field="allocated-fraction"]`), text(`tr[data-resource="nvidia.com/gpu"] td[data-field="utilization"]`); frac != "100.0%" || util != "not reported" {
		t.Errorf("overview GPUs: allocated %q, utilization %q; want 100.0%% and not reported", frac, util)
	}
	gpu := cluster.Resources["nvidia.com/gpu"]
	if gpuCap != fmt.Sprint(gpu.Capacity/1000) || gpuAlloc != fmt.Sprint(gpu.Allocated/1000) {
		t.Errorf("overview: GPUs %s allocated of %s, the API says %d of %d (milli)", gpuAlloc, gpuCap, gpu.Allocated, gpu.Capacity)
	}

	// Team a's tasks: its own, not team b's.
	do("list team a's tasks",
		chromedp.Navigate(base+"/ui/#/tasks"),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`sessionStorage.setItem("hetsched.token", %q)`, aTok)),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-id="a1"]`)))
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#tasks tbody tr")].map(r => r.dataset.id).sort()`))
	if err != nil {
		t.Fatal(err)
	}
	shot("tasks")
	if strings.Join(ids, ",") != "a-waits,a1,aj.x" {
		t.Errorf("team a sees tasks %v, want a1, a-waits and aj.x only", ids)
	}

	// A task submitted now appears without a reload.
	if code := call(t, "POST", base+"/api/v1/tasks", aTok, `{"id":"a-live","priority":3,"resources":{"cpu":"1"}}`, nil); code >= 300 {
		t.Fatalf("submit a-live: %d", code)
	}
	do("see a live update", chromedp.WaitVisible(chromedp.CSS(`tr[data-id="a-live"]`)))

	// issue 45 §4: newest first, with name, resources, devices, age and
	// duration; a column's header sorts by it; search keeps the matches.
	rowIDs := func() []string {
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#tasks tbody tr")].map(r => r.dataset.id)`))
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	heads, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#tasks thead th")].map(h => h.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(heads, ","); got != "id,name,state,queue,tier,resources,devices,node,age,duration,reason" {
		t.Errorf("task columns %s", got)
	}
	if ids := rowIDs(); len(ids) == 0 || ids[0] != "a-live" {
		t.Errorf("tasks %v, want the newest (a-live) first", ids)
	}
	if res, devs := text(`tr[data-id="a1"] td[data-field="resources"]`), text(`tr[data-id="a1"] td[data-field="devices"]`); res != "cpu=1, gpu=2, memory=5Gi" || !strings.HasPrefix(devs, "gpu:") || !strings.HasSuffix(devs, "(L4)") {
		t.Errorf("a1's row: resources %q, devices %q", res, devs)
	}
	do("sort by id", chromedp.Click(chromedp.CSS(`a[data-sort="id"]`)), chromedp.WaitVisible(chromedp.CSS(`a[data-sort="id"]`)))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ids := rowIDs()
		if slices.IsSorted(ids) && len(ids) > 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("sorted by id: %v", ids)
			break
		}
	}
	do("search", chromedp.Navigate(base+"/ui/#/tasks?q=waits"), chromedp.WaitVisible(chromedp.CSS(`tr[data-id="a-waits"]`)))
	if ids := rowIDs(); strings.Join(ids, ",") != "a-waits" {
		t.Errorf("search waits: %v, want a-waits only", ids)
	}

	// Team a's queue: its usage against guarantee and max, as the API.
	do("open the queues", chromedp.Navigate(base+"/ui/#/queues"), chromedp.WaitVisible(chromedp.CSS(`tr[data-queue="team-a"]`)))
	used := text(`tr[data-queue="team-a"] div[data-resource="nvidia.com/gpu"] span[data-field="usage"]`)
	borrowed := text(`tr[data-queue="team-a"] div[data-resource="nvidia.com/gpu"] span[data-field="borrowed"]`)
	// issue 45 §4: in a person's units, not bytes (68719476736).
	if mem := text(`tr[data-queue="team-a"] div[data-resource="memory"] span[data-field="borrowed"]`); mem != " borrowing 4Gi" {
		t.Errorf("queues page: team-a borrows %q of memory, want 4Gi", mem)
	}
	shot("queues")
	var qs struct {
		Queues []struct {
			Name  string
			Usage map[string]string
		}
	}
	call(t, "GET", base+"/api/v1/queues", aTok, "", &qs)
	if len(qs.Queues) != 1 || qs.Queues[0].Name != "team-a" || used != qs.Queues[0].Usage["nvidia.com/gpu"] || used != "2" || borrowed != " borrowing 1" {
		t.Errorf("queues page: team-a uses %q GPUs (%q); the API says %+v", used, borrowed, qs.Queues)
	}

	// The nodes page: the GPU node's allocation and a heatmap cell per GPU.
	do("open the nodes", chromedp.Navigate(base+"/ui/#/nodes"), chromedp.WaitVisible(chromedp.CSS(`tr[data-node="gpu-a"]`)))
	nodeGPUs := text(`tr[data-node="gpu-a"] div[data-resource="nvidia.com/gpu"] span[data-field="allocated"]`)
	cells, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('tr[data-node="gpu-a"] .cell').length`))
	if err != nil {
		t.Fatal(err)
	}
	shot("nodes")
	if nodeGPUs != "2" || cells != 2 {
		t.Errorf("nodes page: gpu-a has %q GPUs allocated and %d cells; want 2 and 2", nodeGPUs, cells)
	}

	// The waiting task's page: its state and queue position, as the API.
	do("open a waiting task", chromedp.Navigate(base+"/ui/#/tasks"), chromedp.WaitVisible(chromedp.CSS(`a[href="#/task/a-waits"]`)),
		chromedp.Click(chromedp.CSS(`a[href="#/task/a-waits"]`)), chromedp.WaitVisible(chromedp.CSS(`#task[data-id="a-waits"]`)))
	state, position := text(`dd[data-field="state"]`), text(`dd[data-field="position"]`)
	// issue 45 §4: what it asked for, next to why it waits.
	if req := text(`dd[data-field="requested"]`); req != "cpu=1, nvidia.com/gpu=2" {
		t.Errorf("task page: requested %q, want cpu=1, nvidia.com/gpu=2", req)
	}
	shot("task")
	var apiTask struct {
		State    string
		Queueing struct{ Position int }
	}
	call(t, "GET", base+"/api/v1/tasks/a-waits", aTok, "", &apiTask)
	if state != apiTask.State || !strings.HasPrefix(position, fmt.Sprint(apiTask.Queueing.Position)+" among its class") {
		t.Errorf("task page: state %q, position %q; the API says %s, position %d", state, position, apiTask.State, apiTask.Queueing.Position)
	}
	// Team a's jobs: its own, not team b's; team b's job is not found.
	do("list team a's jobs", chromedp.Navigate(base+"/ui/#/jobs"), chromedp.WaitVisible(chromedp.CSS(`tr[data-job="aj"]`)))
	jobs, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#jobs tbody tr")].map(r => r.dataset.job)`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(jobs, ",") != "aj" {
		t.Errorf("team a sees jobs %v, want aj only", jobs)
	}
	do("open another tenant's job", chromedp.Navigate(base+"/ui/#/job/bj"), chromedp.WaitVisible(chromedp.CSS("#error")))
	if errText := text("#error"); !strings.Contains(errText, "no job") {
		t.Errorf("team a opening team b's job: %q", errText)
	}
	// Team b's task is not found by team a's page.
	do("open another tenant's task", chromedp.Navigate(base+"/ui/#/task/b1"), chromedp.WaitVisible(chromedp.CSS("#error")))
	if errText := text("#error"); !strings.Contains(errText, "no task") {
		t.Errorf("team a opening team b's task: %q", errText)
	}
	// issue 45 §4: the node page fits its cards at 1440×900 and on a
	// phone (390×844): nothing wider than its card, no page-wide scroll.
	for _, vp := range []struct{ w, h int64 }{{1440, 900}, {390, 844}} {
		name := fmt.Sprintf("node-%dx%d", vp.w, vp.h)
		do("open gpu-a at "+name, chromedp.EmulateViewport(vp.w, vp.h), chromedp.Navigate(base+"/ui/#/node/gpu-a"),
			chromedp.WaitVisible(chromedp.CSS(`#node-tasks`)))
		over, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[
			...[...document.querySelectorAll("section.card")].filter(c => c.scrollWidth > c.clientWidth + 1).map(c => "card " + (c.querySelector("h2") || {}).textContent),
			...(document.documentElement.scrollWidth > window.innerWidth + 1 ? ["the page scrolls sideways"] : [])]`))
		if err != nil {
			t.Fatal(err)
		}
		shot(name)
		if len(over) > 0 {
			t.Errorf("node page at %s overflows: %v", name, over)
		}
	}
	t.Logf("screenshots in %s", shots)
}

// TestUIHeaders: the page is served with a policy that allows only its own
// script, style and API, and unknown or nested paths are not found.
func TestUIHeaders(t *testing.T) {
	base := servertest.Start(t, nodesYAML)
	for path, want := range map[string]int{"/ui/": 200, "/ui/app.js": 200, "/ui/app.css": 200, "/ui/nope.js": 404, "/ui/assets/app.js": 404} {
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d, want %d", path, resp.StatusCode, want)
		}
		if want == 200 {
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("%s: policy %q", path, csp)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("%s: no nosniff", path)
			}
		}
	}
}
