package cli

import (
	"testing"

	"github.com/hetsched/hetsched/internal/metrics"
)

func TestVersionText(t *testing.T) {
	got := versionText(metrics.Build{Version: "v1.2.0", Commit: "abc123", Time: "2026-11-30T10:00:00Z", Dirty: true, GoVersion: "go1.26.8"})
	want := "hetsched v1.2.0\ncommit:  abc123 (dirty: uncommitted changes)\ntime:    2026-11-30T10:00:00Z\ngo:      go1.26.8\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	got = versionText(metrics.Build{Version: "(devel)", GoVersion: "go1.26.8"})
	want = "hetsched (devel)\ncommit:  unknown (built without VCS information)\ntime:    unknown\ngo:      go1.26.8\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
