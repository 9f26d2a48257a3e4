package ui_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

// evilPage is another origin's page that tries, against a server with
// auth off (the `hetsched up` default), to read the API, to submit a task
// by a no-cors fetch and by a text/plain form, and to frame the UI.
const evilPage = `<!doctype html><html><body>
<iframe name="sink" id="sink"></iframe>
<form id="f" method="POST" action="%[1]s/api/v1/tasks" enctype="text/plain" target="sink">
<input type="hidden" name='{"id":"evil-form","resources":{"cpu":"1"},"x":"' value='"}'></form>
<iframe id="framed"></iframe>
<script>
window.results = {};
(async () => {
  try { const r = await fetch("%[1]s/api/v1/cluster"); results.read = "read " + r.status + " " + (await r.text()); }
  catch (e) { results.read = "blocked " + e.name; }
  try { await fetch("%[1]s/api/v1/tasks", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: '{"id":"evil-fetch","resources":{"cpu":"1"}}'}); results.post = "sent"; }
  catch (e) { results.post = "blocked " + e.name; }
  document.getElementById("sink").onload = () => { results.form = "answered"; };
  document.getElementById("f").submit();
  const framed = document.getElementById("framed");
  framed.onload = () => { results.framed = "loaded"; };
  framed.src = "%[2]s/ui/";
})();
</script></body></html>`

// TestUICrossOrigin: a page of another origin, in a real Chromium, can
// neither read the API of a server with auth off, nor make it act (a
// no-cors fetch and a text/plain form both create nothing), nor frame
// the UI (Chromium refuses it by frame-ancestors 'none', so the framed
// page's script is never fetched; the same page opened directly is).
func TestUICrossOrigin(t *testing.T) {
	base := servertest.Start(t, nodesYAML)
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	// The UI is framed through a proxy that counts what the browser asks
	// for, so the test sees whether the framed page ran.
	var mu sync.Mutex
	seen := map[string]int{}
	rp := httputil.NewSingleHostReverseProxy(target)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path]++
		mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(proxy.Close) // after the browser closes (cleanups run last first): the UI keeps an events stream open through it
	count := func(path string) int { mu.Lock(); defer mu.Unlock(); return seen[path] }
	// The attacker's origin: "localhost" where the server is 127.0.0.1,
	// another port besides.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, evilPage, base, proxy.URL)
	}))
	t.Cleanup(evil.Close)
	evilURL := strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)

	b := newBrowser(t, 60*time.Second)
	b.do("open the other origin's page", chromedp.Navigate(evilURL+"/"))
	b.until("the page's attempts", `!!(window.results && results.read && results.post && results.form && results.framed)`)
	results := eval[map[string]string](b, `window.results`)
	if !strings.HasPrefix(results["read"], "blocked TypeError") {
		t.Errorf("another origin read the API: %q", results["read"])
	}
	for _, id := range []string{"evil-fetch", "evil-form"} {
		if code := call(t, "GET", base+"/api/v1/tasks/"+id, "", "", nil); code != http.StatusNotFound {
			t.Errorf("another origin's %s: GET /tasks/%s is %d, want 404 (nothing created)", id, id, code)
		}
	}
	if count("/ui/") == 0 {
		t.Fatalf("the frame never asked for the UI (seen %v): the test proves nothing", seen)
	}
	if n := count("/ui/app.js"); n != 0 {
		t.Errorf("the framed UI ran: its script was fetched %d times", n)
	}
	// The same page opened directly fetches its script (the count works).
	b.do("open the UI directly", chromedp.Navigate(proxy.URL+"/ui/#/overview"), chromedp.WaitVisible(chromedp.CSS("#cluster-tasks")))
	if count("/ui/app.js") == 0 {
		t.Errorf("the UI opened directly did not fetch its script (seen %v)", seen)
	}
}
