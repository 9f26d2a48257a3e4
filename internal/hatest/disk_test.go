package hatest

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/testdisk"
)

// TestDiskFullOnOneMember fills the disk of one server's data directory
// (its etcd member's WAL and database) while clients write: the other two
// keep acknowledging, nothing acknowledged is lost, and once space is
// freed the server comes back as a standby (restarted if it stopped).
func TestDiskFullOnOneMember(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts three servers")
	}
	c := newCluster(t, 3)
	c.dirs[2] = testdisk.MountTmpfs(t, 512<<20)
	c.startAll()
	l := c.leader(time.Minute)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	w := startWriters(ctx, c, 3)
	time.Sleep(time.Second)
	filler := testdisk.Fill(t, c.dirs[2], 0)
	t.Logf("filled %s's disk (the leader is %s)", c.names[2], c.names[l])
	// Writes go on, whatever the full member does.
	for k := range 3 {
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		id, at, err := probe(pctx, c.client(), "full-"+string(rune('a'+k))+"-")
		cancel()
		if err != nil {
			t.Fatalf("no write acknowledged with one member's disk full: %v\n%s", err, c.logs())
		}
		w.set(id, "pending")
		t.Logf("a write acknowledged %s after the fill", time.Since(at).Round(time.Millisecond))
		time.Sleep(time.Second)
	}
	p := c.proc(2)
	exited := false
	select {
	case <-waitExit(p):
		exited = true
	case <-time.After(2 * time.Second):
	}
	t.Logf("%s with a full disk: exited=%v\n%s", c.names[2], exited, tail(p.Stderr(), 2000))
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if exited {
		c.mu.Lock()
		c.procs[2] = nil
		c.mu.Unlock()
		if err := c.start(2); err != nil {
			t.Fatal(err)
		}
	}
	c.waitReady(2, time.Minute)
	stop()
	w.wg.Wait()
	c.leader(30 * time.Second)
	w.check(t, listAll(t, c.client()))
	t.Logf("%d writes acknowledged in all", w.count())
}

// waitExit is closed once p has exited (a zombie, not reaped yet).
func waitExit(p interface{ Pid() int }) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p.Pid()) + "/stat")
			if err != nil {
				return
			}
			s := string(b)
			if i := strings.LastIndexByte(s, ')'); i >= 0 && len(s) > i+2 && s[i+2] == 'Z' {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return done
}
