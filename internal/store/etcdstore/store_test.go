package etcdstore_test

import (
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"context"
	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/v3/concurrency"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/hetsched/hetsched/internal/etcdmember/membertest"
	"github.com/hetsched/hetsched/internal/store"
	"github.com/hetsched/hetsched/internal/store/etcdstore"
	"github.com/hetsched/hetsched/internal/store/storetest"
)

// opener opens a leading store whose prefix is dir, on cli.
func opener(cli *clientv3.Client, opt etcdstore.Options) storetest.Opener {
	return func(t *testing.T, dir string) store.Store {
		t.Helper()
		o := opt
		o.Prefix = dir + "/"
		s, err := etcdstore.Open(context.Background(), cli, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Lead(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		return s
	}
}

func TestContract(t *testing.T) {
	cli := membertest.Start(t)
	t.Run("Defaults", func(t *testing.T) { storetest.Run(t, opener(cli, etcdstore.Options{})) })
	// Tiny chunks and snapshots: every commit spans chunks, every few
	// commits write a snapshot, compact and read back through it.
	t.Run("SmallChunksAndSnapshots", func(t *testing.T) {
		storetest.Run(t, opener(cli, etcdstore.Options{ChunkBytes: 64, SnapshotMinBytes: 256, DefragMinFree: -1}))
	})
}

func open(t *testing.T, cli *clientv3.Client, prefix string, opt etcdstore.Options) *etcdstore.Store {
	t.Helper()
	opt.Prefix = prefix
	s, err := etcdstore.Open(context.Background(), cli, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func lead(t *testing.T, s *etcdstore.Store, f *etcdstore.Fence) {
	t.Helper()
	if err := s.Lead(context.Background(), f); err != nil {
		t.Fatal(err)
	}
}

func put(kind, key, value string) store.Record {
	return store.Record{Kind: kind, Key: key, Value: []byte(value)}
}

func count(t *testing.T, s store.Store, kind string) int {
	t.Helper()
	n := 0
	if err := s.Load(context.Background(), kind, func(string, []byte) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func keysUnder(t *testing.T, cli *clientv3.Client, prefix string) int {
	t.Helper()
	resp, err := cli.Get(context.Background(), prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return int(resp.Count)
}

// A 5,000-task commit is larger than etcd's request limit: it is written
// in several chunks and is wholly there after a reopen.
func TestLargeCommitSpansChunks(t *testing.T) {
	cli := membertest.Start(t)
	s := open(t, cli, "/big/", etcdstore.Options{})
	lead(t, s, nil)
	// Random values: compression cannot make 2 MB fit one chunk.
	rng := rand.New(rand.NewPCG(1, 2))
	var recs []store.Record
	for i := range 5000 {
		v := make([]byte, 200)
		for k := range v {
			v[k] = byte(rng.Uint32())
		}
		recs = append(recs, put("task", fmt.Sprintf("t%05d", i), hex.EncodeToString(v)))
	}
	if err := s.Commit(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if n := keysUnder(t, cli, "/big/log/"); n < 2 {
		t.Fatalf("a 2 MB commit was written as %d chunk(s)", n)
	}
	s.Close()
	s2 := open(t, cli, "/big/", etcdstore.Options{})
	if n := count(t, s2, "task"); n != 5000 {
		t.Fatalf("after reopen: %d of 5000 tasks", n)
	}
}

// An entry without its last chunk (a writer that died mid-commit) is not
// read, is dropped by the next leader, and the log goes on after it.
func TestInterruptedCommitIsDropped(t *testing.T) {
	cli := membertest.Start(t)
	ctx := context.Background()
	s := open(t, cli, "/torn/", etcdstore.Options{})
	lead(t, s, nil)
	if err := s.Commit(ctx, []store.Record{put("task", "a", "1")}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// Entry 2's chunks 0 and 2, flagged "more", chunk 1 missing: what a
	// crash during a commit's parallel chunk writes leaves.
	for _, i := range []int{0, 2} {
		if _, err := cli.Put(ctx, fmt.Sprintf("/torn/log/%016x/%06d", 2, i), "\x00garbage"); err != nil {
			t.Fatal(err)
		}
	}
	s2 := open(t, cli, "/torn/", etcdstore.Options{})
	if _, ok, _ := s2.Get(ctx, "task", "a"); !ok {
		t.Fatal("the committed record is gone")
	}
	lead(t, s2, nil)
	if n := keysUnder(t, cli, fmt.Sprintf("/torn/log/%016x/", 2)); n != 0 {
		t.Fatalf("the interrupted entry still has %d chunk(s)", n)
	}
	if err := s2.Commit(ctx, []store.Record{put("task", "b", "2")}); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	s3 := open(t, cli, "/torn/", etcdstore.Options{})
	if n := count(t, s3, "task"); n != 2 {
		t.Fatalf("after the interrupted commit: %d records, want 2", n)
	}
}

// Snapshots replace the log: after many commits, what etcd holds is a
// snapshot plus a short log, and a reopen reads the same records.
func TestSnapshotReplacesTheLog(t *testing.T) {
	cli := membertest.Start(t)
	ctx := context.Background()
	opt := etcdstore.Options{ChunkBytes: 1024, SnapshotMinBytes: 8 << 10, DefragMinFree: -1}
	s := open(t, cli, "/snap/", opt)
	lead(t, s, nil)
	for i := range 400 {
		recs := []store.Record{put("task", fmt.Sprintf("t%03d", i%100), fmt.Sprintf("%0100d", i))}
		if i%7 == 0 {
			recs = append(recs, store.Record{Kind: "task", Key: fmt.Sprintf("t%03d", (i+50)%100)})
		}
		if err := s.Commit(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{}
	if err := s.Load(ctx, "task", func(k string, v []byte) error { want[k] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	s.Close() // waits for a snapshot in progress
	if n := keysUnder(t, cli, "/snap/snapshot"); n != 1 {
		t.Fatal("no snapshot pointer after 400 commits of 8 KiB snapshots")
	}
	if n := keysUnder(t, cli, "/snap/log/"); n >= 400 {
		t.Fatalf("the log still has %d chunks: snapshots did not replace it", n)
	}
	// etcd's history of what the snapshots replaced was compacted.
	if _, err := cli.Get(ctx, "/snap/log/", clientv3.WithPrefix(), clientv3.WithRev(2)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("reading revision 2 after the snapshots: %v, want compacted", err)
	}
	s2 := open(t, cli, "/snap/", opt)
	got := map[string]string{}
	if err := s2.Load(ctx, "task", func(k string, v []byte) error { got[k] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("after reopen through the snapshot (-want +got):\n%s", diff)
	}
}

// waitRevision waits until s has seen rev.
func waitRevision(t *testing.T, s *etcdstore.Store, rev int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.Revision() < rev {
		if time.Now().After(deadline) {
			t.Fatalf("the standby reached revision %d, not %d", s.Revision(), rev)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A standby follows the leader's commits, refuses its own, and takes over
// with everything; the deposed leader's writes are refused by its fence.
func TestStandbyTailsAndTakesOverFenced(t *testing.T) {
	cli := membertest.Start(t)
	ctx := context.Background()
	s1, e1 := campaign(t, cli, "/ha/", "s1")
	opt := etcdstore.Options{ChunkBytes: 256}
	leader := open(t, cli, "/ha/", opt)
	lead(t, leader, &etcdstore.Fence{Key: e1.Key(), Rev: e1.Rev()})
	standby := open(t, cli, "/ha/", opt)
	if err := standby.Commit(ctx, []store.Record{put("task", "x", "1")}); !errors.Is(err, etcdstore.ErrStandby) {
		t.Fatalf("a standby's commit: %v", err)
	}
	for i := range 20 {
		if err := leader.Commit(ctx, []store.Record{put("task", fmt.Sprint(i), strings.Repeat("v", i*40))}); err != nil {
			t.Fatal(err)
		}
	}
	waitRevision(t, standby, leader.Revision())
	if n := count(t, standby, "task"); n != 20 {
		t.Fatalf("the standby has %d of 20 records", n)
	}
	// The leader's lease ends (as when it is paused past its TTL): the
	// standby wins and leads; the old leader's next commit is refused.
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	_, e2 := campaign(t, cli, "/ha/", "s2")
	lead(t, standby, &etcdstore.Fence{Key: e2.Key(), Rev: e2.Rev()})
	if err := leader.Commit(ctx, []store.Record{put("task", "late", "1")}); !errors.Is(err, etcdstore.ErrFenced) {
		t.Fatalf("the deposed leader's commit: %v", err)
	}
	if err := leader.Commit(ctx, []store.Record{put("task", "later", "1")}); !errors.Is(err, etcdstore.ErrFenced) || leader.Err() == nil {
		t.Fatalf("the deposed leader's second commit: %v (Err %v)", err, leader.Err())
	}
	if err := standby.Commit(ctx, []store.Record{put("task", "new", "1")}); err != nil {
		t.Fatal(err)
	}
	fresh := open(t, cli, "/ha/", opt)
	if n := count(t, fresh, "task"); n != 21 {
		t.Fatalf("after the takeover: %d records, want 21", n)
	}
	if _, ok, _ := fresh.Get(ctx, "task", "late"); ok {
		t.Fatal("a fenced commit was written")
	}
}

func campaign(t *testing.T, cli *clientv3.Client, prefix, name string) (*concurrency.Session, *concurrency.Election) {
	t.Helper()
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	e := concurrency.NewElection(sess, prefix+"election/")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := e.Campaign(ctx, name); err != nil {
		t.Fatal(err)
	}
	return sess, e
}

// Records are compressed: 5,000 records like task records (JSON, much
// alike) take a fraction of their size in etcd, and read back the same.
func TestCommitsAreCompressed(t *testing.T) {
	cli := membertest.Start(t)
	ctx := context.Background()
	s := open(t, cli, "/s2/", etcdstore.Options{})
	lead(t, s, nil)
	var recs []store.Record
	raw := 0
	for i := range 5000 {
		v := fmt.Sprintf(`{"spec":{"id":"t%05d","priority":%d,"resources":{"cpu":"1","memory":"256Mi"}},"tenant":"default","seq":%d,"state":"pending","chosen":-1,"attempt":0,"submitted":"2026-12-01T15:%02d:%02d.%09dZ"}`, i, i%4, i+1, i%60, (i/60)%60, i*7919)
		raw += len(v)
		recs = append(recs, put("task", fmt.Sprintf("t%05d", i), v))
	}
	if err := s.Commit(ctx, recs); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "/s2/log/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, kv := range resp.Kvs {
		stored += len(kv.Value)
	}
	if stored*3 > raw {
		t.Errorf("%d bytes of records take %d bytes in etcd: not compressed", raw, stored)
	}
	s.Close()
	s2 := open(t, cli, "/s2/", etcdstore.Options{})
	got := map[string]string{}
	if err := s2.Load(ctx, "task", func(k string, v []byte) error { got[k] = string(v); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5000 || got["t00042"] != string(recs[42].Value) {
		t.Fatalf("read back %d records; t00042 = %q", len(got), got["t00042"])
	}
	t.Logf("%d bytes of records stored in %d (%.1f×)", raw, stored, float64(raw)/float64(stored))
}
