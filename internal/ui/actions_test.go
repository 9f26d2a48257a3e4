package ui_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hetsched/hetsched/internal/server"
	"github.com/hetsched/hetsched/internal/server/servertest"
)

// issue 45 §4, in Chromium: the UI's actions act with the tab's token
// and the server's own checks (a tenant cancels its task and job, is
// refused a cordon and its top queue's weight, with the server's
// message; an admin cordons, uncordons and sets a weight), each on a
// confirming second click; the overview and queues pages chart the
// server's last hour.
func TestUIActionsAndCharts(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte(fmt.Sprintf("tokens:\n  - {token: %s, role: admin}\n  - {token: %s, role: tenant, tenant: team-a}\n", adminTok, aTok)), 0o600); err != nil {
		t.Fatal(err)
	}
	base := servertest.StartWith(t, nodesYAML, func(o *server.Options) { o.TokensFile = tokens; o.SeriesEvery = 50 * time.Millisecond })
	if code := call(t, "PUT", base+"/api/v1/queues/team-a", adminTok, `{"name":"team-a","guaranteed":{"cpu":"1"}}`, nil); code != 200 {
		t.Fatalf("queue team-a: %d", code)
	}
	for _, s := range []struct{ path, body string }{
		{"/api/v1/tasks", `{"id":"waits","queue":"team-a","priority":3,"resources":{"cpu":"100"}}`},
		{"/api/v1/tasks", `{"id":"runs","queue":"team-a","priority":3,"resources":{"cpu":"2","nvidia.com/gpu":1},"lease":"1h"}`},
		{"/api/v1/jobs", `{"id":"etl","queue":"team-a","tasks":[{"id":"x","resources":{"cpu":"100"}}]}`},
	} {
		if code := call(t, "POST", base+s.path, aTok, s.body, nil); code >= 300 {
			t.Fatalf("submit %s: %d", s.body, code)
		}
	}
	state := func(path, tok string) string {
		var v struct{ State string }
		call(t, "GET", base+path, tok, "", &v)
		return v.State
	}
	b := newBrowser(t, 120*time.Second)
	// signIn fills the token form and submits it in one step of the page's
	// own (a render in between may replace the form).
	signIn := func(tok string) {
		b.do("open the overview", chromedp.Navigate(base+"/ui/#/overview"))
		b.until("the token form", `document.getElementById("token-input") !== null`)
		eval[bool](b, fmt.Sprintf(`document.getElementById("token-input").value = %q, document.querySelector('#token button[type="submit"]').click(), true`, tok))
		b.do("signed in", chromedp.WaitVisible(chromedp.CSS("#cluster-tasks")))
	}
	// confirm clicks an action twice, checking the first click only arms
	// it. The clicks are the page's own (a live render moves a kept bar,
	// which the debugging protocol's node ids do not survive).
	confirm := func(what, sel string) {
		b.until(what+": the button", fmt.Sprintf(`document.querySelector(%q) !== null`, sel))
		eval[bool](b, fmt.Sprintf(`document.querySelector(%q).click(), true`, sel))
		b.until(what+": asks to confirm", fmt.Sprintf(`document.querySelector(%q).textContent.includes("Click again")`, sel))
		eval[bool](b, fmt.Sprintf(`document.querySelector(%q).click(), true`, sel))
	}

	// The server samples every 50 ms: once it holds two samples, the
	// overview charts them.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var s struct{ Points []any }
		call(t, "GET", base+"/api/v1/series", aTok, "", &s)
		if len(s.Points) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d samples after 10 s", len(s.Points))
		}
		time.Sleep(20 * time.Millisecond)
	}
	setWeight := func(w string) {
		eval[bool](b, fmt.Sprintf(`document.querySelector('form.weight[data-queue="team-a"] input').value = %q, document.querySelector('form.weight[data-queue="team-a"] button').click(), true`, w))
	}
	signIn(aTok)
	b.until("the allocation chart has two samples", `(document.querySelector('#chart-allocated polyline[data-line="cpu"]') || {dataset: {}}).dataset.points >= 2`)
	b.shot("actions-overview-charts")
	b.do("open the task", chromedp.Navigate(base+"/ui/#/task/waits"))
	confirm("cancel the task", "#cancel-task")
	b.until("the task page says cancelled", `(document.querySelector('#task dd[data-field="state"]') || {}).textContent === "cancelled"`)
	if st := state("/api/v1/tasks/waits", aTok); st != "cancelled" {
		t.Errorf("waits is %s after the UI cancelled it", st)
	}
	b.do("open the job", chromedp.Navigate(base+"/ui/#/job/etl"))
	confirm("cancel the job", "#cancel-job")
	b.until("the job page says cancelled", `(document.querySelector('#job dd[data-field="state"]') || {}).textContent === "cancelled"`)
	// A tenant may not cordon: the server says so, and nothing changes.
	b.do("open the node as a tenant", chromedp.Navigate(base+"/ui/#/node/gpu-a"))
	confirm("cordon as a tenant", "#cordon")
	b.until("the refusal shows", `(document.querySelector('#node .action-result.error') || {textContent: ""}).textContent.includes("may not")`)
	b.shot("actions-node-refused")
	if st := state("/api/v1/nodes/gpu-a", adminTok); st != "ready" {
		t.Errorf("gpu-a is %s after a tenant's refused cordon", st)
	}
	// Nor set its top queue's weight.
	b.do("open the queues as a tenant", chromedp.Navigate(base+"/ui/#/queues"), chromedp.WaitVisible(chromedp.CSS(`form.weight[data-queue="team-a"]`)))
	setWeight("5")
	b.until("the weight refusal shows", `(document.querySelector('form.weight[data-queue="team-a"] .action-result.error') || {textContent: ""}).textContent.length > 0`)

	// An admin may.
	b.do("sign out", chromedp.Click(chromedp.CSS("#signout")))
	signIn(adminTok)
	b.do("open the node as an admin", chromedp.Navigate(base+"/ui/#/node/gpu-a"))
	confirm("cordon", "#cordon")
	b.until("the node page says cordoned", `(document.querySelector('#node dd[data-field="state"]') || {}).textContent === "cordoned" && (document.querySelector('#node .action-result.ok') || {}).textContent === "cordoned"`)
	if st := state("/api/v1/nodes/gpu-a", adminTok); st != "cordoned" {
		t.Errorf("gpu-a is %s after the UI cordoned it", st)
	}
	confirm("uncordon", "#uncordon")
	b.until("the node page says ready", `(document.querySelector('#node dd[data-field="state"]') || {}).textContent === "ready"`)
	b.do("open the queues as an admin", chromedp.Navigate(base+"/ui/#/queues"), chromedp.WaitVisible(chromedp.CSS(`form.weight[data-queue="team-a"]`)))
	setWeight("3")
	b.until("the weight is set", `(document.querySelector('form.weight[data-queue="team-a"] .action-result.ok') || {}).textContent === "weight set to 3"`)
	var qs struct {
		Queues []struct {
			Name   string
			Weight float64
		}
	}
	call(t, "GET", base+"/api/v1/queues", adminTok, "", &qs)
	for _, q := range qs.Queues {
		if q.Name == "team-a" && q.Weight != 3 {
			t.Errorf("team-a's weight is %v after the UI set 3", q.Weight)
		}
	}
	b.until("the queues chart", `document.querySelector('#chart-queues polyline[data-line="team-a"]') !== null`)
	b.shot("actions-queues")
}
