package ui_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hetsched/hetsched/internal/server/servertest"
)

// largeFleetYAML is an inventory of n nodes of 16 CPUs: every fourth has
// 8 GPUs (H100 and L4 in turn), the rest are CPU nodes.
func largeFleetYAML(n int) string {
	var b strings.Builder
	b.WriteString("nodes:\n")
	for i := range n {
		fmt.Fprintf(&b, "  - name: node-%05d\n    capacity: {cpu: \"16\", memory: 64Gi}\n", i)
		if i%4 == 0 {
			model := []string{"H100", "L4"}[i/4%2]
			b.WriteString("    devices:\n")
			for d := range 8 {
				fmt.Fprintf(&b, "      - {type: nvidia.com/gpu, id: \"%d\", model: %s}\n", d, model)
			}
		}
	}
	return b.String()
}

// submitBatch submits n tasks of 2 CPUs (every tenth with a GPU) named
// prefix-0…, in one request.
func submitBatch(tb testing.TB, base, prefix string, n int) {
	var b strings.Builder
	b.WriteString(`{"tasks":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		gpu := ""
		if i%10 == 0 {
			gpu = `,"nvidia.com/gpu":1`
		}
		fmt.Fprintf(&b, `{"id":"%s-%d","priority":%d,"lease":"1h","resources":{"cpu":"2"%s}}`, prefix, i, i%4, gpu)
	}
	b.WriteString(`]}`)
	resp, err := (&http.Client{Timeout: 120 * time.Second}).Post(base+"/api/v1/tasks", "application/json", strings.NewReader(b.String()))
	if err != nil {
		tb.Error(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		tb.Errorf("submit %s: %d", prefix, resp.StatusCode)
	}
}

// BenchmarkUILargeFleet loads the UI's pages in headless Chromium against
// a server holding 10,000 nodes (20,000 GPUs) and 100,000 tasks (80,000
// placed, 20,000 waiting). load-ms is the time from the page's navigation
// to its first complete render (main's data-renderedAt: every API answer
// read and drawn). live measures the overview while 1,000 tasks a second
// arrive: longtask-ms/s is the main thread's time in tasks over 50 ms per
// second (what makes a page feel stuck), renders/s how often it redrew.
//
//	go test ./internal/ui -run '^$' -bench UILargeFleet -benchtime 5x
func BenchmarkUILargeFleet(b *testing.B) {
	chromium(b)
	base := servertest.Start(b, largeFleetYAML(10_000))
	for batch := range 10 {
		submitBatch(b, base, fmt.Sprintf("t%d", batch), 10_000)
	}
	br := newBrowser(b, 30*time.Minute)
	for _, page := range []struct{ name, hash, ready string }{
		{"overview", "#/overview", "#heatmap"},
		{"nodes", "#/nodes", "#nodes"},
		{"tasks", "#/tasks?state=pending", "#tasks"},
		{"queues", "#/queues", "main h2"},
	} {
		b.Run(page.name, func(b *testing.B) {
			total := 0.0
			for b.Loop() {
				br.do("load "+page.name, chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/ui/"+page.hash), chromedp.WaitVisible(chromedp.CSS(page.ready)))
				br.until("rendered", `!!document.getElementById("main").dataset.renderedAt`)
				ms := eval[float64](br, `+document.getElementById("main").dataset.renderedAt`)
				if ms > 2000 {
					b.Logf("%s loaded in %.0f ms: %s", page.name, ms, eval[string](br, `JSON.stringify(performance.getEntriesByType("resource").map(e => [e.name.slice(-50), Math.round(e.startTime), Math.round(e.duration)]))`))
				}
				total += ms
			}
			b.ReportMetric(total/float64(b.N), "load-ms")
		})
	}
	b.Run("live", func(b *testing.B) {
		var longtask, renders, seconds float64
		for i := 0; b.Loop(); i++ {
			br.do("load the overview", chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/ui/#/overview"), chromedp.WaitVisible(chromedp.CSS("#heatmap")))
			eval[bool](br, `window.__lt = 0, window.__r0 = +document.getElementById("main").dataset.rendered,
				new PerformanceObserver(l => l.getEntries().forEach(e => window.__lt += e.duration)).observe({type: "longtask"}), true`)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			wg.Go(func() { // 100 tasks every 100 ms for 5 s
				tick := time.NewTicker(100 * time.Millisecond)
				defer tick.Stop()
				for k := 0; k < 50; k++ {
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
						submitBatch(b, base, fmt.Sprintf("live%d-%d", i, k), 100)
					}
				}
			})
			wg.Wait()
			cancel()
			longtask += eval[float64](br, `window.__lt`)
			renders += eval[float64](br, `+document.getElementById("main").dataset.rendered - window.__r0`)
			seconds += 5
		}
		b.ReportMetric(longtask/seconds, "longtask-ms/s")
		b.ReportMetric(renders/seconds, "renders/s")
	})
}
