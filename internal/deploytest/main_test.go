package deploytest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Paths from this package's directory.
const (
	chartDir   = "../../deploy/helm/hetsched"
	plainDir   = "../../deploy/kubernetes"
	toolModule = "../../tools/helm"
)

// generateCommand is what the generated files and a failure name.
const generateCommand = "go -C tools/helm run . generate"

// buildTimeout bounds a build of tools/helm (its cold build compiles
// Helm's SDK and Kubernetes' client libraries: about 80 s on 2 cores with
// the main module's build cache, more from nothing) and of cmd/hetsched.
const buildTimeout = 10 * time.Minute

// binDir holds the binaries this test binary builds.
var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "deploytest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// builds are the two binaries, built at once (both) the first time a test
// needs either: tools/helm is the long one, and cmd/hetsched links
// meanwhile.
var builds struct {
	once, logged        sync.Once
	helm, hetsched      string
	helmErr, schedErr   error
	helmTook, schedTook time.Duration
}

func build() {
	builds.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			builds.helmErr, builds.schedErr = err, err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
		defer cancel()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			builds.helm = filepath.Join(binDir, "helm-tool")
			builds.helmTook, builds.helmErr = goBuild(ctx, goBin, "-C", toolModule, "-o", builds.helm, ".")
		}()
		go func() {
			defer wg.Done()
			builds.hetsched = filepath.Join(binDir, "hetsched")
			builds.schedTook, builds.schedErr = goBuild(ctx, goBin, "-o", builds.hetsched, "github.com/hetsched/hetsched/cmd/hetsched")
		}()
		wg.Wait()
	})
}

func goBuild(ctx context.Context, goBin string, args ...string) (time.Duration, error) {
	start := time.Now()
	out, err := exec.CommandContext(ctx, goBin, append([]string{"build"}, args...)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return time.Since(start), nil
}

// helmTool is tools/helm's binary.
func helmTool(t *testing.T) string {
	t.Helper()
	build()
	if builds.helmErr != nil {
		t.Fatalf("tools/helm: %v", builds.helmErr)
	}
	builds.logged.Do(func() {
		t.Logf("tools/helm built in %v, cmd/hetsched in %v (once per test binary)",
			builds.helmTook.Round(time.Millisecond), builds.schedTook.Round(time.Millisecond))
	})
	return builds.helm
}

// hetschedBinary is cmd/hetsched's binary.
func hetschedBinary(t *testing.T) string {
	t.Helper()
	build()
	if builds.schedErr != nil {
		t.Fatalf("cmd/hetsched: %v", builds.schedErr)
	}
	return builds.hetsched
}

// runTool runs tools/helm with args and returns its output and error.
func runTool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, helmTool(t), args...).CombinedOutput()
	return string(out), err
}

// rendering is one set of values and the release it is rendered for.
type rendering struct {
	name, release, namespace string
	values                   []string // files, after the chart's values.yaml
}

// renderings are the chart's default values and each ci values file.
func renderings(t *testing.T) []rendering {
	t.Helper()
	rs := []rendering{{name: "default", release: "hetsched", namespace: "hetsched-system"}}
	files, err := filepath.Glob(filepath.Join(chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no ci values files in %s/ci (%v)", chartDir, err)
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), "-values.yaml")
		// Each its own release and namespace, as a second install would be.
		rs = append(rs, rendering{name: name, release: "ci-" + name, namespace: "hetsched-" + name, values: []string{f}})
	}
	return rs
}

// render renders r with tools/helm into a new directory.
func render(t *testing.T, r rendering) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), r.name)
	args := []string{"template", "--chart", chartDir, "--release", r.release, "--namespace", r.namespace, "--out", out}
	for _, v := range r.values {
		args = append(args, "--values", v)
	}
	if msg, err := runTool(t, args...); err != nil {
		t.Fatalf("rendering %s: %v\n%s", r.name, err, msg)
	}
	return out
}
