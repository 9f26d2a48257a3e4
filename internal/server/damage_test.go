package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/testdisk"
)

// fillStore runs a server on dir, acknowledges n tasks in batches of 50
// (a log record each) and stops it.
func fillStore(t *testing.T, dir string, n int) {
	t.Helper()
	s := startWith(t, Options{DataDir: dir})
	for i := 0; i < n; i += 50 {
		var b strings.Builder
		b.WriteString(`{"tasks":[`)
		for j := i; j < i+50; j++ {
			if j > i {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":"t%05d","resources":{"cpu":"1m"},"lease":"1h"}`, j)
		}
		b.WriteString(`]}`)
		if code, m := call(t, "POST", s.base+"/api/v1/tasks", b.String()); code != 201 {
			t.Fatalf("batch %d: %d %v", i, code, m)
		}
	}
	s.stop(t)
}

// issue 15 §6, the reproductions: a newest log cut to half lost
// acknowledged commits, and the server refuses to start, naming the gap
// (issue 41 §5: it started without them); with ACKED removed (the
// operator accepts the loss) it starts with a Warn line and the
// truncated-tail metric. 21 bytes of garbage in its middle refuse to
// start, naming the file and offset.
func TestDamagedLogIsReported(t *testing.T) {
	t.Run("cut to half", func(t *testing.T) {
		dir := t.TempDir()
		fillStore(t, dir, 2000)
		wal := testdisk.NewestLog(t, dir)
		testdisk.CutToHalf(t, wal)
		marked := t.TempDir() // a copy with its ACKED
		if out, err := exec.Command("cp", "-a", dir+"/.", marked).CombinedOutput(); err != nil {
			t.Fatalf("copy: %v %s", err, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := Run(ctx, io.Discard, Options{DataDir: marked, Listen: "127.0.0.1:0", Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), "acknowledged commit(s) are missing") || !strings.Contains(err.Error(), "ACKED") {
			t.Fatalf("start on a log cut below what was acknowledged: %v", err)
		}
		if err := os.Remove(filepath.Join(dir, "ACKED")); err != nil {
			t.Fatal(err)
		}
		var logs childproc.SyncBuffer
		s := startWith(t, Options{DataDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		defer s.stop(t)
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), filepath.Base(wal)) {
			t.Errorf("no Warn line naming %s:\n%s", filepath.Base(wal), logs.String())
		}
		metrics := string(scrape(t, s.base))
		if strings.Contains(metrics, "hetsched_store_wal_truncated_bytes 0\n") || !strings.Contains(metrics, "hetsched_store_wal_truncated_bytes ") {
			t.Errorf("the truncated tail is not in the metrics")
		}
		_, m := call(t, "GET", s.base+"/api/v1/tasks?limit=10000", "")
		kept := len(m["tasks"].([]any))
		if kept == 0 || kept >= 2000 {
			t.Errorf("%d of 2000 tasks after cutting the log to half", kept)
		}
		t.Logf("cut to half: %d of 2000 tasks kept; log: %s", kept, strings.TrimSpace(logs.String()))
	})
	t.Run("garbage in the middle", func(t *testing.T) {
		dir := t.TempDir()
		fillStore(t, dir, 2000)
		wal := testdisk.NewestLog(t, dir)
		testdisk.Damage(t, wal, []byte("twenty-one bytes, bad"))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := Run(ctx, io.Discard, Options{DataDir: dir, Listen: "127.0.0.1:0", Logger: quiet})
		if err == nil || !strings.Contains(err.Error(), filepath.Base(wal)) || !strings.Contains(err.Error(), "offset") || !strings.Contains(err.Error(), "store check") {
			t.Fatalf("start on a log with garbage in its middle: %v", err)
		}
		t.Logf("refused: %v", err)
	})
}
