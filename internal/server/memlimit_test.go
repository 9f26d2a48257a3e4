package server

import (
	"errors"
	"runtime/debug"
	"strings"
	"testing"
)

func TestParseMemoryLimit(t *testing.T) {
	total := func() (int64, error) { return 20 << 30, nil }
	for _, c := range []struct {
		spec string
		want int64
	}{
		{"off", 0}, {"90%", 18 << 30}, {"100%", 20 << 30}, {"50%", 10 << 30}, {"20Gi", 20 << 30}, {"512Mi", 512 << 20}, {" 1Gi ", 1 << 30},
	} {
		got, err := parseMemoryLimit(c.spec, total)
		if err != nil || got != c.want {
			t.Errorf("%q: %d, %v; want %d", c.spec, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "0%", "101%", "x%", "lots", "1Mi", "-1Gi", "90"} {
		if _, err := parseMemoryLimit(bad, total); err == nil || !strings.Contains(err.Error(), "memory-limit") {
			t.Errorf("%q: %v, want an error naming memory-limit", bad, err)
		}
	}
	broken := func() (int64, error) { return 0, errors.New("no /proc") }
	if _, err := parseMemoryLimit("90%", broken); err == nil || !strings.Contains(err.Error(), "no /proc") {
		t.Errorf("a share without the machine's memory: %v", err)
	}
}

// TestApplyMemoryLimit: the flag sets the runtime's limit, "off" leaves it,
// and GOMEMLIMIT in the environment wins over the flag.
func TestApplyMemoryLimit(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	t.Setenv("GOMEMLIMIT", "")
	if got, from, err := applyMemoryLimit("3Gi"); err != nil || got != 3<<30 || debug.SetMemoryLimit(-1) != 3<<30 || !strings.Contains(from, "3Gi") {
		t.Fatalf("3Gi: %d from %q, %v; runtime limit %d", got, from, err, debug.SetMemoryLimit(-1))
	}
	if got, from, err := applyMemoryLimit("off"); err != nil || got != 0 || from != "off" || debug.SetMemoryLimit(-1) != 3<<30 {
		t.Fatalf("off: %d from %q, %v; runtime limit changed to %d", got, from, err, debug.SetMemoryLimit(-1))
	}
	if got, _, err := applyMemoryLimit(""); err != nil || got <= 0 {
		t.Fatalf("default: %d, %v", got, err)
	}
	t.Setenv("GOMEMLIMIT", "5GiB")
	debug.SetMemoryLimit(5 << 30) // what the runtime read from it at start
	if got, from, err := applyMemoryLimit("1Gi"); err != nil || from != "GOMEMLIMIT" || got != 5<<30 || debug.SetMemoryLimit(-1) != 5<<30 {
		t.Fatalf("with GOMEMLIMIT: %d from %q, %v", got, from, err)
	}
}
