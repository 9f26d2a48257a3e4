// Package metricstest checks a Prometheus scrape in tests: the client
// library's linter on the hetsched_* metrics, and Debian's promtool.
package metricstest

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// Lint runs promlint on text (problems of hetsched_* metrics are errors),
// then `promtool check metrics` when promtool is installed; without it
// the test is skipped, or fails under CI=true.
func Lint(t testing.TB, text string) {
	t.Helper()
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "hetsched_") {
			t.Errorf("lint: %s: %s", p.Metric, p.Text)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is missing under CI=true: apt-get install -y prometheus")
		}
		t.Skip("promtool not installed (apt-get install -y prometheus); the in-process lint above passed")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
