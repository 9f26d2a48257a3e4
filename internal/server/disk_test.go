package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
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
	// The disk watcher notices the filler on its own tick: wait for the
	// first refusal, and read its status and Retry-After from that one
	// response (two requests could straddle the flip).
	var code int
	var errName, retry string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var hdr http.Header
		code, errName, hdr = send(t, "POST", api+"/tasks", "", map[string]string{"Content-Type": "application/json"}, `{"id":"below","resources":{"cpu":"1"}}`)
		retry = hdr.Get("Retry-After")
		if code == 507 || time.Now().After(deadline) {
			break
		}
	}
	if code != 507 || errName != "insufficient_storage" || retry == "" {
		t.Fatalf("submit below the reserve: %d %q (Retry-After %q)", code, errName, retry)
	}
	if code, m := call(t, "POST", api+"/tasks", `{"id":"below","resources":{"cpu":"1"}}`); code != 507 || !strings.Contains(errMsg(m), "reserve") {
		t.Fatalf("submit below the reserve, again: %d %v", code, m)
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
	var m map[string]any
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

// issue 15 §5, the reproduction: the data dir on a 20 MiB tmpfs filled
// while submitting. The server does not die: submissions are refused
// (507 below the reserve or for a batch that would not fit above it, 503
// once a write failed), reads and /healthz go on, /readyz says why when
// the store cannot take writes; every acknowledged task is in the store
// when it is opened again with space. (Issue 41 §4: the batch that would
// not fit is refused before it is written, so the disk no longer fills.)
func TestDiskFilledWhileSubmitting(t *testing.T) {
	mnt := testdisk.MountTmpfs(t, 20<<20)
	dir := filepath.Join(mnt, "data")
	s := startWith(t, Options{DataDir: dir, DiskReserve: "1Ki"}) // a tiny reserve: the disk really fills
	acked := map[string]bool{}
	pad := strings.Repeat("p", 2000)
	var last int
	var lastMsg string
	for batch := 0; batch < 400; batch++ {
		var b strings.Builder
		b.WriteString(`{"tasks":[`)
		ids := make([]string, 100)
		for i := range ids {
			ids[i] = fmt.Sprintf("b%03d-%03d", batch, i)
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":%q,"resources":{"cpu":"1m"},"lease":"1h","metadata":{"pad":%q}}`, ids[i], pad)
		}
		b.WriteString(`]}`)
		code, m := call(t, "POST", s.base+"/api/v1/tasks", b.String())
		if code == 201 {
			for _, id := range ids {
				acked[id] = true
			}
			continue
		}
		last, lastMsg = code, errMsg(m)
		break
	}
	if last != 503 && last != 507 {
		t.Fatalf("after %d acknowledged tasks the disk never filled, or the answer was %d %q", len(acked), last, lastMsg)
	}
	t.Logf("%d tasks acknowledged, then %d: %s", len(acked), last, lastMsg)
	if code, _ := call(t, "GET", s.base+"/healthz", ""); code != 200 {
		t.Fatalf("healthz on a full disk: %d", code)
	}
	if code, m := call(t, "GET", s.base+"/api/v1/tasks?limit=1", ""); code != 200 {
		t.Errorf("read on a full disk: %d %v", code, m)
	}
	notFit := last == 507 && strings.Contains(lastMsg, "does not fit")
	if code, m := call(t, "GET", s.base+"/readyz", ""); !notFit && (code == 200 || errMsg(m) == "") {
		t.Errorf("readyz on a full disk: %d %v", code, m)
	}
	s.stop(t)
	// Open the store again where there is space: nothing acknowledged is lost.
	moved := t.TempDir()
	if out, err := exec.Command("cp", "-a", dir, moved).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	s = startWith(t, Options{DataDir: filepath.Join(moved, "data")})
	defer s.stop(t)
	_, m := call(t, "GET", s.base+"/api/v1/tasks?limit=10000", "")
	got := map[string]bool{}
	for _, x := range m["tasks"].([]any) {
		got[x.(map[string]any)["id"].(string)] = true
	}
	lost := 0
	for id := range acked {
		if !got[id] {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged tasks lost", lost, len(acked))
	}
}

// issue 16 §3: a second server (or `up`) on a data dir in use says who
// holds it (it said "resource temporarily unavailable").
func TestSecondServerOnADataDirSaysWho(t *testing.T) {
	dir := t.TempDir()
	s := startWith(t, Options{DataDir: dir})
	defer s.stop(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, io.Discard, Options{DataDir: dir, Listen: "127.0.0.1:0", Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("a second server on %s: %v", dir, err)
	}
}
