package server

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/childproc"
	"github.com/hetsched/hetsched/internal/testdisk"
)

// TestFullDiskRecoversWhenSpaceReturns (issue 41 §4): the store's disk
// fills up while the scheduler commits on its own (lease expiries), the
// write fails and the store stops; once space is freed, the server starts
// again by itself in a fresh process (the same PID and address), and it
// serves every acknowledged task and takes new ones. Before, it stayed
// stopped until someone restarted it.
func TestFullDiskRecoversWhenSpaceReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs a server process on a tmpfs it fills")
	}
	mnt := testdisk.MountTmpfs(t, 24<<20)
	bin, err := childproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "data")
	nodes := filepath.Join(t.TempDir(), "nodes.yaml")
	if err := os.WriteFile(nodes, []byte(nodesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := childproc.Start(bin, time.Minute, "server", "--listen", "127.0.0.1:0", "--data-dir", dir, "--nodes", nodes, "--disk-reserve", "1Ki")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Kill()
	pid := srv.Pid()
	// Acknowledged work: tasks that stay, and short leases whose expiries
	// the scheduler commits on its own once the disk is full.
	acked := map[string]bool{}
	for b := range 20 {
		var body strings.Builder
		body.WriteString(`{"tasks":[`)
		for i := range 100 {
			id := fmt.Sprintf("t%02d-%03d", b, i)
			lease := "1h"
			if b >= 10 {
				lease = "2s"
			}
			if i > 0 {
				body.WriteByte(',')
			}
			fmt.Fprintf(&body, `{"id":%q,"resources":{"cpu":"1m"},"lease":%q}`, id, lease)
			acked[id] = true
		}
		body.WriteString(`]}`)
		if code, m := call(t, "POST", srv.URL+"/api/v1/tasks", body.String()); code != 201 {
			t.Fatalf("batch %d: %d %v", b, code, m)
		}
	}
	filler := filepath.Join(mnt, "filler")
	fill(t, filler)
	waitFor(t, time.Minute, "the store to stop on the full disk", func() bool {
		code, m := call(t, "GET", srv.URL+"/readyz", "")
		return code == 503 && strings.Contains(errMsg(m), "store")
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the server to serve again", func() bool {
		resp, err := client.Get(srv.URL + "/readyz") // refused while it starts again
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if got := srv.Pid(); got != pid || syscall.Kill(pid, 0) != nil {
		t.Fatalf("the server process is %d (alive: %v), want %d started again in place", got, syscall.Kill(pid, 0), pid)
	}
	if !strings.Contains(srv.Stderr(), "starting again in a fresh process") {
		t.Errorf("no log line says why the server started again:\n%s", tailString(srv.Stderr(), 3000))
	}
	_, m := call(t, "GET", srv.URL+"/api/v1/tasks?limit=10000", "")
	got := map[string]bool{}
	for _, x := range m["tasks"].([]any) {
		got[x.(map[string]any)["id"].(string)] = true
	}
	for id := range acked {
		if !got[id] {
			t.Fatalf("acknowledged task %s is missing after the restart (%d of %d there)", id, len(got), len(acked))
		}
	}
	if code, m := call(t, "POST", srv.URL+"/api/v1/tasks", `{"tasks":[{"id":"after","resources":{"cpu":"1m"},"lease":"1h"}]}`); code != 201 {
		t.Fatalf("a submission after the restart: %d %v", code, m)
	}
}

// fill writes path until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{'x'}, 64<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// waitFor polls cond every 100 ms until it holds, failing after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %s", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
