package server

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/testdisk"
)

// issue 15 §5, on a real small filesystem: below --disk-reserve new work
// gets 507 with Retry-After while reads, cancels, agents, /healthz go on
// and /readyz says why; when space is freed, writes resume without a
// restart.
func TestDiskReserveRefusesNewWork(t *testing.T) {
	mnt := testdisk.MountTmpfs(t, 256<<20) // the store itself takes about 70 MiB (its preallocated log)
	s := startWith(t, Options{DataDir: filepath.Join(mnt, "data"), DiskReserve: "64Mi"})
	defer s.stop(t)
	api := s.base + "/api/v1"
	if code, m := call(t, "POST", api+"/tasks", `{"id":"before","resources":{"cpu":"1"},"lease":"1h"}`); code != 201 {
		t.Fatalf("submit with room: %d %v", code, m)
	}
	filler := testdisk.Fill(t, mnt, 32<<20)
	var code int
	var m map[string]any
	var retry string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, _, hdr := send(t, "POST", api+"/tasks", "", map[string]string{"Content-Type": "application/json"}, `{"resources":{"cpu":"1"}}`)
		code, m = call(t, "POST", api+"/tasks", `{"id":"below","resources":{"cpu":"1"}}`)
		retry = hdr.Get("Retry-After")
		if code == 507 || time.Now().After(deadline) {
			break
		}
	}
	if code != 507 || errCode(m) != "insufficient_storage" || retry == "" || !strings.Contains(errMsg(m), "reserve") {
		t.Fatalf("submit below the reserve: %d %v (Retry-After %q)", code, m, retry)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/v1/jobs", `{"tasks":[{"id":"a","resources":{"cpu":"1"}}]}`},
		{"POST", "/api/v1/schedule", `{"resources":{"cpu":"1"}}`},
		{"PUT", "/api/v1/queues/q1", `{"weight":2}`},
	} {
		if code, m := call(t, c.method, s.base+c.path, c.body); code != 507 {
			t.Errorf("%s %s below the reserve: %d %v", c.method, c.path, code, m)
		}
	}
	// What reads, frees or keeps agents alive goes on.
	if code, _ := call(t, "GET", api+"/tasks/before", ""); code != 200 {
		t.Errorf("read below the reserve: %d", code)
	}
	if code, _ := call(t, "GET", s.base+"/healthz", ""); code != 200 {
		t.Errorf("healthz below the reserve: %d", code)
	}
	if code, m := call(t, "GET", s.base+"/readyz", ""); code != 507 || !strings.Contains(errMsg(m), "reserve") {
		t.Errorf("readyz below the reserve: %d %v", code, m)
	}
	if code, m := call(t, "POST", api+"/agents/register", regBody("agn-1", "agn-1")); code != 200 {
		t.Errorf("agent register below the reserve: %d %v", code, m)
	}
	if code, m := call(t, "POST", api+"/agents/agn-1/heartbeat", `{"nodes":[{"node":"agn-1","cpu":0.5}]}`); code != 200 {
		t.Errorf("heartbeat below the reserve: %d %v", code, m)
	}
	if code, m := call(t, "DELETE", api+"/tasks/before", ""); code != 200 || m["state"] != "cancelled" {
		t.Errorf("cancel below the reserve: %d %v", code, m)
	}
	if !strings.Contains(string(scrape(t, s.base)), `hetsched_refused_total{reason="insufficient_storage"}`) {
		t.Error("no refusal counted")
	}
	// Space is freed: writes resume by themselves.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, m = call(t, "POST", api+"/tasks", `{"id":"after","resources":{"cpu":"1"}}`); code == 201 || time.Now().After(deadline) {
			break
		}
	}
	if code != 201 {
		t.Fatalf("submit after space was freed: %d %v", code, m)
	}
	if code, _ := call(t, "GET", s.base+"/readyz", ""); code != 200 {
		t.Errorf("readyz after space was freed: %d", code)
	}
}

// issue 15 §5: a server started on a full disk exits within seconds with
// one clear error (it used to spin a core, log 109 MB and ignore SIGTERM).
func TestStartOnFullDiskFailsFast(t *testing.T) {
	mnt := testdisk.MountTmpfs(t, 8<<20)
	dir := filepath.Join(mnt, "data")
	// A store that was written, then the disk filled.
	s := startWith(t, Options{DataDir: dir})
	if code, _ := call(t, "POST", s.base+"/api/v1/tasks", `{"id":"t1","resources":{"cpu":"1"}}`); code != 201 {
		t.Fatal("submit")
	}
	s.stop(t)
	testdisk.Fill(t, mnt, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	err := Run(ctx, io.Discard, Options{DataDir: dir, Listen: "127.0.0.1:0", Logger: quiet})
	took := time.Since(t0)
	if err == nil || !strings.Contains(err.Error(), "full") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("start on a full disk: %v", err)
	}
	if took > 5*time.Second {
		t.Errorf("start on a full disk failed after %v, want within seconds", took)
	}
	t.Logf("start on a full disk: %v after %v", err, took.Round(time.Millisecond))
}
