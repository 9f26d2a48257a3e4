package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestRelease (issue 42 §1) builds this platform's release binary: it says
// the stamped version, commit and time (`hetsched version`), SHA256SUMS
// matches every file, and the SBOM is SPDX 2.3 naming the modules linked.
func TestRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds a release binary")
	}
	out := t.TempDir()
	platform := runtime.GOOS + "/" + runtime.GOARCH
	var log strings.Builder
	if err := run([]string{"--version", "v0.0.0-test.1", "--commit", "0123abc", "--time", "2026-12-06T10:00:00Z", "--platforms", platform, "--out", out}, &log); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(out, "hetsched-v0.0.0-test.1-"+runtime.GOOS+"-"+runtime.GOARCH)
	b, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("%s version: %v\n%s", bin, err, b)
	}
	for _, want := range []string{"hetsched v0.0.0-test.1", "commit:  0123abc\n", "time:    2026-12-06T10:00:00Z"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("version output lacks %q:\n%s", want, b)
		}
	}
	f, err := os.Open(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		got, err := sha256File(filepath.Join(out, name))
		if err != nil || got != sum {
			t.Errorf("%s: sum %s, file's %s (%v)", name, sum, got, err)
		}
		listed++
	}
	if listed != 2 {
		t.Errorf("SHA256SUMS lists %d files, want the binary and its SBOM", listed)
	}
	var doc spdxDoc
	sb, err := os.ReadFile(bin + ".spdx.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sb, &doc); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range doc.Packages {
		names[p.Name] = true
	}
	if doc.SPDXVersion != "SPDX-2.3" || len(doc.Packages) < 50 || !names["github.com/cockroachdb/pebble/v2"] || !names["go.etcd.io/etcd/server/v3"] || len(doc.Relationships) != len(doc.Packages) {
		t.Errorf("SBOM: %s, %d packages, %d relationships", doc.SPDXVersion, len(doc.Packages), len(doc.Relationships))
	}
}
