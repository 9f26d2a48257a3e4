package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/store"
	"github.com/hetsched/hetsched/internal/testdisk"
)

// `hetsched store check|repair` on a store with 21 bytes of garbage in the
// middle of its newest log (issue 15 §6): check reports the file and offset
// and exits 1; repair without --yes changes nothing; with --yes the store
// opens again with every record before the damage, the original kept.
func TestStoreCheckAndRepair(t *testing.T) {
	dir := t.TempDir()
	st, err := store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		val := bytes.Repeat([]byte{'v'}, 500)
		if err := st.Commit(context.Background(), []store.Record{{Kind: "task", Key: fmt.Sprintf("k%04d", i), Value: val}}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	wal := testdisk.NewestLog(t, dir)
	testdisk.Damage(t, wal, []byte("twenty-one bytes, bad"))
	damaged, _ := os.ReadFile(wal)

	out, err := run(t, "store", "check", "--data-dir", dir)
	if err == nil || !strings.Contains(out, filepath.Base(wal)) || !strings.Contains(out, "offset") || !strings.Contains(out, "will NOT open") {
		t.Fatalf("check: %v\n%s", err, out)
	}
	out, err = run(t, "store", "repair", "--data-dir", dir)
	if err == nil || !strings.Contains(out, "nothing was changed") {
		t.Fatalf("repair without --yes: %v\n%s", err, out)
	}
	if now, _ := os.ReadFile(wal); !bytes.Equal(now, damaged) {
		t.Fatal("repair without --yes changed the log")
	}
	if out, err = run(t, "store", "repair", "--data-dir", dir, "--yes"); err != nil || !strings.Contains(out, "repaired") {
		t.Fatalf("repair --yes: %v\n%s", err, out)
	}
	if aside, _ := filepath.Glob(wal + ".damaged-*"); len(aside) != 1 {
		t.Errorf("the damaged original is not kept aside: %v", aside)
	}
	if out, err = run(t, "store", "check", "--data-dir", dir); err != nil {
		t.Fatalf("check after repair: %v\n%s", err, out)
	}
	st, err = store.OpenDisk(dir, store.DiskOptions{})
	if err != nil {
		t.Fatalf("open after repair: %v", err)
	}
	defer st.Close()
	n := 0
	_ = st.Load(context.Background(), "task", func(string, []byte) error { n++; return nil })
	if n == 0 || n >= 400 {
		t.Errorf("%d of 400 records after the repair, want those before the damage", n)
	}
	t.Logf("repair kept %d of 400 records", n)
	if _, err := run(t, "store", "check"); err == nil || !strings.Contains(err.Error(), "data-dir") {
		t.Errorf("check without --data-dir: %v", err)
	}
}
