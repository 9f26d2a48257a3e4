package server

import (
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/hostinfo"
	"github.com/hetsched/hetsched/internal/resource"
)

// DefaultMemoryLimit is --memory-limit's default: the Go runtime's soft
// memory limit as a share of the machine's (or the cgroup's) memory.
const DefaultMemoryLimit = "90%"

// parseMemoryLimit resolves --memory-limit: "off" (0: leave the runtime
// alone), a share of total ("1%".."100%"), or a size ("20Gi"). total is
// the host's memory in bytes, read only for a share.
func parseMemoryLimit(spec string, total func() (int64, error)) (int64, error) {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "off":
		return 0, nil
	case strings.HasSuffix(spec, "%"):
		pct, err := strconv.ParseFloat(strings.TrimSuffix(spec, "%"), 64)
		if err != nil || pct < 1 || pct > 100 {
			return 0, errs.Invalid("memory-limit", "a share must be 1%% to 100%%, got %q", spec)
		}
		t, err := total()
		if err != nil {
			return 0, errs.Wrap(errs.Unavailable, "memory-limit", fmt.Errorf("reading the machine's memory for a share: %w", err))
		}
		return int64(float64(t) * pct / 100), nil
	default:
		b, err := resource.ParseQuantity(spec, resource.Units)
		if err != nil || b < 64<<20 {
			return 0, errs.Invalid("memory-limit", `must be "off", a share like 90%%, or a size of at least 64Mi like 20Gi, got %q`, spec)
		}
		return b, nil
	}
}

// applyMemoryLimit sets the Go runtime's soft memory limit from
// --memory-limit unless GOMEMLIMIT is set (the environment wins), so that
// a server holding a million waiting requests collects harder as it nears
// the machine's memory instead of letting its heap double past it. It
// returns the limit in effect and where it came from, for the log.
func applyMemoryLimit(spec string) (int64, string, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), "GOMEMLIMIT", nil
	}
	if spec == "" {
		spec = DefaultMemoryLimit
	}
	limit, err := parseMemoryLimit(spec, hostinfo.Memory)
	if err != nil || limit == 0 {
		return 0, "off", err
	}
	debug.SetMemoryLimit(limit)
	return limit, "--memory-limit " + spec, nil
}
