package agent

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

// forbiddenDeps are the packages the node agent must not link: the control
// plane's layers (it speaks to them only through internal/agentapi's wire
// types) and the store's database.
var forbiddenDeps = []string{
	"github.com/hetsched/hetsched/internal/store",
	"github.com/hetsched/hetsched/internal/engine",
	"github.com/hetsched/hetsched/internal/core",
	"github.com/hetsched/hetsched/internal/server",
	"github.com/cockroachdb/pebble",
}

// goCommand finds the go command on PATH (go test puts its own
// GOROOT/bin first).
func goCommand() (string, bool) {
	p, err := exec.LookPath("go")
	return p, err == nil
}

// TestAgentDependsOnNoControlPlane keeps the layers pointing one way (issue
// 17 §1): no package of the node agent may depend, directly or not, on the
// store, the engine, the core, the server or Pebble.
func TestAgentDependsOnNoControlPlane(t *testing.T) {
	gocmd, ok := goCommand()
	if !ok {
		if os.Getenv("CI") == "true" {
			t.Fatal("the go command is neither on PATH nor in GOROOT/bin: CI must run this test with the Go toolchain installed")
		}
		t.Skip("needs the go command (the Go toolchain: https://go.dev/dl, or the distribution's golang package) on PATH")
	}
	cmd := exec.Command(gocmd, "list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`,
		"github.com/hetsched/hetsched/internal/agent/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./internal/agent/...: %v\n%s", err, stderr.Bytes())
	}
	imports := map[string][]string{}
	var roots []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		imports[f[0]] = f[1:]
		if under(f[0], "github.com/hetsched/hetsched/internal/agent") {
			roots = append(roots, f[0])
		}
	}
	if len(roots) == 0 {
		t.Fatalf("go list named no agent package:\n%s", out)
	}
	sort.Strings(roots)
	from := shortestImports(imports, roots)
	for _, f := range forbiddenDeps {
		var hits []string
		for p := range imports {
			if under(p, f) {
				hits = append(hits, p)
			}
		}
		if len(hits) == 0 {
			continue
		}
		// Name the chain to the hit nearest an agent package.
		sort.Slice(hits, func(i, j int) bool {
			ci, cj := chain(from, hits[i]), chain(from, hits[j])
			return len(ci) < len(cj) || len(ci) == len(cj) && hits[i] < hits[j]
		})
		t.Errorf("the agent depends on %s (%d packages), e.g. %s", f, len(hits), strings.Join(chain(from, hits[0]), " -> "))
	}
}

// under reports whether package p is pkg or below it.
func under(p, pkg string) bool { return p == pkg || strings.HasPrefix(p, pkg+"/") }

// shortestImports maps every package reachable from roots to the package
// that imports it on a shortest chain from a root ("" for a root).
func shortestImports(imports map[string][]string, roots []string) map[string]string {
	from := map[string]string{}
	queue := append([]string(nil), roots...)
	for _, r := range roots {
		from[r] = ""
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, q := range imports[p] {
			if _, seen := from[q]; !seen {
				from[q] = p
				queue = append(queue, q)
			}
		}
	}
	return from
}

// chain is the import chain from a root to p.
func chain(from map[string]string, p string) []string {
	var c []string
	for ; p != ""; p = from[p] {
		c = append(c, p)
	}
	slices.Reverse(c)
	return c
}
