package benchhttp

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// buildBinary builds cmd/hetsched: these benchmarks run it as children.
func buildBinary(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go tool is needed to build the server for this test: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "hetsched")
	out, err := exec.Command(goBin, "build", "-o", bin, "github.com/hetsched/hetsched/cmd/hetsched").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestPendingAndCompareSmall runs both whole-server benchmarks at a tiny
// size: tasks survive the SIGKILL and restart, memory is read, and the
// side-by-side run gets answers from both servers without errors.
func TestPendingAndCompareSmall(t *testing.T) {
	bin := buildBinary(t)
	var log strings.Builder
	p, err := Pending(context.Background(), PendingOptions{Bin: bin, Tasks: 2500, Batch: 1000, Clients: 2, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	if p.Restored != 2500 || p.Memory.RSS <= 0 || p.Memory.Peak < p.Memory.RSS || p.RestartSeconds <= 0 {
		t.Fatalf("pending result %+v", p)
	}
	if !strings.Contains(p.RestartLine, "2500 tasks restored") {
		t.Fatalf("restart line %q", p.RestartLine)
	}
	rs, err := Compare(context.Background(), CompareOptions{Bin: bin, Nodes: 20, Connections: []int{4}, Duration: 300 * time.Millisecond, Mix: [4]int{1, 1, 1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].Hetsched.Errors != 0 || rs[0].Echo.Errors != 0 || rs[0].Hetsched.Scheduled == 0 || rs[0].Echo.Scheduled == 0 || rs[0].Ratio <= 0 {
		t.Fatalf("compare %+v", rs)
	}
}

func TestReadMemoryOfSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("process memory is read from Linux's /proc")
	}
	m, err := ReadMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.Peak < m.RSS {
		t.Fatalf("%+v", m)
	}
}
