package ui_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hetsched/hetsched/internal/agent"
	"github.com/hetsched/hetsched/internal/agent/executor"
	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// shimEnv makes this test binary the agent's executor shim.
const shimEnv = "HETSCHED_EXECUTOR_SHIM"

func TestMain(m *testing.M) {
	if os.Getenv(shimEnv) == "1" {
		_ = os.Unsetenv(shimEnv)
		os.Exit(executor.RunShim(os.Args[1:]))
	}
	os.Exit(m.Run())
}

// startAgent runs an in-process agent for node name (8 CPUs, 8 GiB, the
// given devices) against base until the test ends; it returns once the
// agent registered.
func startAgent(t *testing.T, base, name string, devices []api.Device) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Options{Server: base, WorkDir: t.TempDir(),
		Node:  api.Node{Name: name, Capacity: resource.List{resource.CPU: 8000, resource.Memory: 8 << 30}, Devices: devices},
		Grace: 500 * time.Millisecond, KillOnExit: true,
		Shim: []string{exe}, ShimEnv: []string{shimEnv + "=1", "GORACE=atexit_sleep_ms=0"},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { cancel(); <-done }) })
	deadline := time.Now().Add(20 * time.Second)
	for a.Connected() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("agent %s did not register within 20s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// browser is a headless Chromium tab for one test, with helpers that fail
// the test with what the page shows.
type browser struct {
	t     testing.TB
	ctx   context.Context
	root  context.Context // the tab without the test's timeout (for diagnostics)
	shots string
}

func newBrowser(t testing.TB, timeout time.Duration) *browser {
	t.Helper()
	bin := chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 900))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	if err := chromedp.Do(bctx); err != nil { // the browser starts on its first run, on a context without a timeout
		t.Fatalf("start chromium: %v", err)
	}
	ctx, cancelT := context.WithTimeout(bctx, timeout)
	t.Cleanup(cancelT)
	return &browser{t: t, ctx: ctx, root: bctx, shots: screenshotDir(t)}
}

// fail stops the test with err and what the page shows.
func (b *browser) fail(what string, err error) {
	b.t.Helper()
	dctx, cancel := context.WithTimeout(b.root, 5*time.Second)
	defer cancel()
	page, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	b.t.Fatalf("%s: %v; the page:\n%s", what, err, page)
}

func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.fail(what, err)
	}
}

// until waits for a JavaScript expression to be true.
func (b *browser) until(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(25*time.Millisecond))); err != nil {
		b.fail(what, err)
	}
}

// eval evaluates expr into a T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.fail("evaluate "+expr, err)
	}
	return v
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || "<none>"`, sel))
}

func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err == nil {
		err = os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644)
	}
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
}

// rendered is the page's render count (main's data-rendered).
func (b *browser) rendered() int {
	b.t.Helper()
	return eval[int](b, `+(document.getElementById("main").dataset.rendered || 0)`)
}
