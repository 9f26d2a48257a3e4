package layers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/hetsched/hetsched/"

// layerOf places every package of the module (its path inside the
// module). A package missing here fails the test: place it.
var layerOf = map[string]int{
	// 1 foundation
	"internal/errs": 1, "internal/resource": 1, "internal/jsonread": 1, "internal/netaddr": 1, "internal/procs": 1,
	"internal/childproc": 1, "internal/testdisk": 1, "internal/telemetry": 1, "internal/serverlist": 1,
	"internal/series": 1, "internal/ui": 1, "internal/layers": 1,
	// 2 wire
	"internal/api": 2, "internal/agentapi": 2, "internal/hostinfo": 2, "internal/certs": 2, "internal/metrics": 2,
	"internal/kube/kubewire": 2, "internal/loadgen": 2, "internal/loadgen/h2raw": 2,
	// 3 storage and real-parts harnesses
	"internal/store": 3, "internal/store/etcdstore": 3, "internal/store/storetest": 3, "internal/etcdmember": 3,
	"internal/etcdmember/membertest": 3, "internal/kube/kubetest": 3, "internal/metrics/metricstest": 3,
	// 4 models
	"internal/core": 4, "internal/autoscale": 4, "internal/replicas": 4, "internal/probe": 4, "internal/service": 4,
	"internal/nodepool": 4, "internal/sim/trace": 4, "internal/agent/discover": 4, "internal/agent/executor": 4,
	// 5 engine
	"internal/engine": 5, "internal/sim": 5, "internal/sim/report": 5, "internal/sim/elastic": 5, "internal/demo": 5,
	"internal/benchcore": 5,
	// 6 controllers and clients
	"internal/servicectl": 6, "internal/poolctl": 6, "internal/cli": 6, "internal/agent": 6,
	// 7 front ends
	"internal/server": 7, "internal/kube": 7,
	// 8 composition
	"internal/up": 8, "internal/server/servertest": 8, "internal/benchhttp": 8, "internal/benchkube": 8,
	"internal/hatest": 8, "internal/observability": 8, "internal/deploytest": 8, "clients/python": 8,
	// 9 binaries
	"cmd/hetsched": 9, "cmd/hetsched-bench": 9, "tools/release": 9,
}

// frontEnds are the packages that serve the engine to the world.
var frontEnds = []string{"internal/server", "internal/kube"}

// benchmarks import no front end.
var benchmarks = []string{"internal/benchcore", "internal/benchhttp", "internal/benchkube", "cmd/hetsched-bench"}

// coreMayImport is all the core imports of the module.
var coreMayImport = []string{"internal/api", "internal/errs", "internal/resource"}

// imports lists every package of the module with its non-test imports
// inside the module.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the go command is not on PATH: CI must run this test with the Go toolchain installed")
		}
		t.Skip("needs the go command (the Go toolchain: https://go.dev/dl, or the distribution's golang package) on PATH")
	}
	cmd := exec.Command(gocmd, "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	g := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], module) {
			continue
		}
		var in []string
		for _, imp := range f[1:] {
			if p, ok := strings.CutPrefix(imp, module); ok {
				in = append(in, p)
			}
		}
		g[strings.TrimPrefix(f[0], module)] = in
	}
	if len(g) < len(layerOf)/2 {
		t.Fatalf("go list found %d packages, fewer than half the map's %d:\n%s", len(g), len(layerOf), out)
	}
	return g
}

// isFront reports whether p is a front end (its own subpackages, such as
// the Kubernetes wire client or the test server, are not).
func isFront(p string) bool { return slices.Contains(frontEnds, p) }

// TestLayers keeps the layer map (package doc): every package placed, no
// import pointing up a layer, no front end imported but by a composition
// root, none by a benchmark, and the core's imports the wire's and the
// foundation's only, which also keeps the Kubernetes front end off the
// core (the engine names what it needs: engine/front.go).
func TestLayers(t *testing.T) {
	g := imports(t)
	var bad []string
	pkgs := make([]string, 0, len(g))
	for p := range g {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		lp, ok := layerOf[p]
		if !ok {
			bad = append(bad, fmt.Sprintf("%s has no layer: place it in layers_test.go's map (and README's layout)", p))
			continue
		}
		for _, q := range g[p] {
			lq, ok := layerOf[q]
			switch {
			case !ok:
				continue // reported as a package of its own
			case lq > lp:
				bad = append(bad, fmt.Sprintf("%s (layer %d) imports %s (layer %d): an edge back up", p, lp, q, lq))
			case isFront(q) && lp < 8:
				bad = append(bad, fmt.Sprintf("%s imports the front end %s: only a composition root (layer 8 or 9) may", p, q))
			case isFront(q) && slices.Contains(benchmarks, p):
				bad = append(bad, fmt.Sprintf("the benchmark %s imports the front end %s", p, q))
			case p == "internal/core" && !slices.Contains(coreMayImport, q):
				bad = append(bad, fmt.Sprintf("the core imports %s: it may import only %s", q, strings.Join(coreMayImport, ", ")))
			case strings.HasPrefix(p, "internal/kube") && q == "internal/core":
				bad = append(bad, fmt.Sprintf("%s imports the core: the Kubernetes front end reaches it through the engine", p))
			}
		}
	}
	for p := range layerOf {
		if _, ok := g[p]; !ok {
			bad = append(bad, fmt.Sprintf("layers_test.go places %s, which go list does not know: remove it", p))
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}
