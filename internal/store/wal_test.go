package store_test

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/store"
	"github.com/hetsched/hetsched/internal/testdisk"
)

// walOf returns the report of the log named like path.
func walOf(t *testing.T, r store.Report, path string) store.WALReport {
	t.Helper()
	for _, w := range r.WALs {
		if w.File == filepath.Base(path) {
			return w
		}
	}
	t.Fatalf("no report for %s in %+v", path, r.WALs)
	return store.WALReport{}
}

// TestTornTailIsTruncatedAndReported cuts the newest log to half, its
// high-water mark removed (as after a crash before the mark counted those
// commits; TestLogCutBelowAcknowledgedRefuses keeps it): the store opens,
// Recovery and a Warn line say what was dropped, and exactly the commits
// whose records lie before the cut are there.
func TestTornTailIsTruncatedAndReported(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir)
	keys := commitN(t, s, "torn", 300, 300)
	s.Close()
	path := testdisk.NewestLog(t, dir)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	r, err := store.Check(dir, store.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := walOf(t, r, path)
	if !r.Opens || w.Problem || w.TornBytes <= 0 {
		t.Fatalf("a torn tail must open, not be a problem, and show its bytes:\n%s", r)
	}
	if w.ValidEnd == st.Size()/2 {
		t.Fatalf("the cut fell on a record boundary; pick another record size:\n%s", r)
	}
	if err := os.Remove(filepath.Join(dir, "ACKED")); err != nil {
		t.Fatal(err)
	}
	rec := &logRecorder{}
	d, err := store.OpenDisk(dir, store.DiskOptions{Logger: slog.New(rec)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	got := d.Recovery()
	want := store.Recovery{TornTail: true, File: filepath.Base(path), Offset: w.ValidEnd, BytesDropped: w.TornBytes, RecordsDropped: 1}
	if got != want {
		t.Errorf("Recovery() = %+v, want %+v", got, want)
	}
	if got.BytesDropped != st.Size()/2-w.ValidEnd {
		t.Errorf("BytesDropped %d, want the %d bytes after the last complete record", got.BytesDropped, st.Size()/2-w.ValidEnd)
	}
	if n := len(rec.find(slog.LevelWarn, "torn")); n != 1 {
		t.Errorf("%d Warn lines about the torn tail, want 1", n)
	}
	checkPrefix(t, loadTasks(t, d), keys, w.Records)
	if w.Records < 100 || w.Records > 200 {
		t.Errorf("%d records before a cut at half of 300", w.Records)
	}
}

// TestLogCutBelowAcknowledgedRefuses (issue 41 §5) cuts the newest log
// of a closed store at a record boundary, to nothing and to a half: the
// commits lost were acknowledged, and the store refuses to open, naming
// the gap, instead of opening without them (it did, with no warning for
// the empty log). Removing ACKED, as the message says, opens it with what
// the log holds. (TestOpenCloseCyclesNoFalseAlarm reopens without a cut.)
func TestLogCutBelowAcknowledgedRefuses(t *testing.T) {
	for _, cut := range []string{"empty", "half"} {
		t.Run(cut, func(t *testing.T) {
			dir := t.TempDir()
			s := openDisk(t, dir)
			keys := commitN(t, s, "acked", 300, 300)
			s.Close()
			path := testdisk.NewestLog(t, dir)
			size := int64(0)
			if cut == "half" {
				st, _ := os.Stat(path)
				// The record boundary before the middle (the log scan
				// finds a cut elsewhere without the mark).
				if err := os.Truncate(path, st.Size()/2); err != nil {
					t.Fatal(err)
				}
				r, err := store.Check(dir, store.CheckOptions{SkipTables: true})
				if err != nil {
					t.Fatal(err)
				}
				size = walOf(t, r, path).ValidEnd
			}
			if err := os.Truncate(path, size); err != nil {
				t.Fatal(err)
			}
			_, err := store.OpenDisk(dir, store.DiskOptions{})
			if err == nil || !strings.Contains(err.Error(), "acknowledged commit(s) are missing") || !strings.Contains(err.Error(), "commits up to 300 were acknowledged") {
				t.Fatalf("a log cut to %d bytes below what was acknowledged: %v", size, err)
			}
			if err := os.Remove(filepath.Join(dir, "ACKED")); err != nil {
				t.Fatal(err)
			}
			d, err := store.OpenDisk(dir, store.DiskOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if n := len(loadTasks(t, d)); n >= len(keys) {
				t.Fatalf("%d records after the cut; the test cut nothing", n)
			}
		})
	}
}

// corruptMiddle writes 21 bytes of garbage in the middle of path.
func corruptMiddle(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := int64(len(b) / 2)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range int64(21) {
		b[off+i] = byte(rng.UintN(256))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return off
}

// TestGarbageInNewestLog writes 21 bytes of garbage in the middle of the
// newest log: OpenDisk refuses, naming the file and offset; Check reports
// it; Repair without consent changes nothing; Repair with consent keeps the
// records before the damage and the original aside, and the store opens.
func TestGarbageInNewestLog(t *testing.T) {
	dir := t.TempDir()
	s := openDisk(t, dir)
	keys := commitN(t, s, "mid", 300, 300)
	s.Close()
	path := testdisk.NewestLog(t, dir)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := corruptMiddle(t, path)
	damaged, _ := os.ReadFile(path)

	start := time.Now()
	_, err = store.OpenDisk(dir, store.DiskOptions{})
	var de *store.DamageError
	if !errors.As(err, &de) {
		t.Fatalf("OpenDisk on a corrupt log: %v, want a DamageError", err)
	}
	t.Logf("OpenDisk refused in %s: %v", time.Since(start), err)
	if de.File != filepath.Base(path) || de.Offset > off || de.Offset < off-2*32<<10 {
		t.Errorf("damage at %s offset %d; garbage was written in %s at %d", de.File, de.Offset, filepath.Base(path), off)
	}
	for _, want := range []string{filepath.Base(path), "offset", "hetsched store check --data-dir " + dir, "hetsched store repair --data-dir " + dir + " --yes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if errs.CodeOf(err) != errs.Unavailable || errs.FieldOf(err) != "data-dir" {
		t.Errorf("error code %s field %q", errs.CodeOf(err), errs.FieldOf(err))
	}

	r, err := store.Check(dir, store.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := walOf(t, r, path)
	if r.Opens || r.OK() || !w.Problem || w.DamageOffset != de.Offset || w.ResumeAt <= de.Offset || w.RecordsAfter == 0 {
		t.Fatalf("Check must report the damage at %d and the records after it:\n%s", de.Offset, r)
	}
	text := r.String()
	for _, want := range []string{"DAMAGED", filepath.Base(path), "NOT open", "keep the first"} {
		if !strings.Contains(text, want) {
			t.Errorf("Check's report lacks %q:\n%s", want, text)
		}
	}
	t.Logf("check:\n%s", text)

	before := dirState(t, dir)
	dry, err := store.Repair(dir, store.RepairOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dry.Repaired || len(dry.Plan) == 0 {
		t.Errorf("Repair without consent: Repaired %v, plan %q", dry.Repaired, dry.Plan)
	}
	if after := dirState(t, dir); !equalState(before, after) {
		t.Fatal("Repair without consent changed the data dir")
	}

	fixed, err := store.Repair(dir, store.RepairOptions{Yes: true, Now: func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	if !fixed.Repaired || !fixed.Opens {
		t.Fatalf("Repair with consent:\n%s", fixed)
	}
	t.Logf("repair:\n%s", fixed)
	aside, err := os.ReadFile(path + ".damaged-20300102T030405Z")
	if err != nil || string(aside) != string(damaged) {
		t.Errorf("the damaged original is not kept aside intact: %v", err)
	}
	salvaged, _ := os.ReadFile(path)
	if int64(len(salvaged)) != w.ValidEnd || string(salvaged) != string(orig[:w.ValidEnd]) {
		t.Errorf("the salvaged log is not the %d bytes before the damage", w.ValidEnd)
	}
	d := openDisk(t, dir)
	defer d.Close()
	checkPrefix(t, loadTasks(t, d), keys, w.Records)
	if _, err := os.Stat(path + ".damaged-20300102T030405Z"); err != nil {
		t.Errorf("opening the repaired store removed the file kept aside: %v", err)
	}
}

func equalState(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestOpenCloseCyclesNoFalseAlarm opens, commits (small and multi-block
// records) and closes a store many times: every open is clean, nothing is
// reported torn or damaged, and every commit is there.
func TestOpenCloseCyclesNoFalseAlarm(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 4))
	var all []string
	for cycle := range 25 {
		d, err := store.OpenDisk(dir, store.DiskOptions{})
		if err != nil {
			t.Fatalf("cycle %d: %v", cycle, err)
		}
		if rec := d.Recovery(); rec != (store.Recovery{}) {
			t.Errorf("cycle %d: Recovery %+v after a clean close", cycle, rec)
		}
		size := []int{10, 300, 5000, 40 << 10, 100 << 10}[rng.IntN(5)]
		all = append(all, commitN(t, d, "c"+string(rune('A'+cycle)), 1+rng.IntN(80), size)...)
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		r, err := store.Check(dir, store.CheckOptions{SkipTables: cycle%5 != 0})
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() || len(r.Plan) != 0 {
			t.Fatalf("cycle %d: a cleanly closed store reported:\n%s", cycle, r)
		}
	}
	d := openDisk(t, dir)
	defer d.Close()
	checkPrefix(t, loadTasks(t, d), all, len(all))
}

// TestCheckRefusesAnOpenStore: Check, Repair and OpenDisk refuse a store
// open in this process or in another one (a running server), naming the
// other process.
func TestCheckRefusesAnOpenStore(t *testing.T) {
	dir := t.TempDir()
	d := openDisk(t, dir)
	for what, err := range map[string]error{
		"Check":    second(store.Check(dir, store.CheckOptions{})),
		"Repair":   second(store.Repair(dir, store.RepairOptions{Yes: true})),
		"OpenDisk": second(store.OpenDisk(dir, store.DiskOptions{})),
	} {
		if errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "already open in this process") {
			t.Errorf("%s on a store open in this process: %v", what, err)
		}
	}
	d.Close()

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, "HETSCHED_STORE_CRASH_RUN=lock")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // the first ack: the store is open
		t.Fatal(err)
	}
	pid := fmt.Sprintf("pid %d", cmd.Process.Pid)
	for what, err := range map[string]error{
		"Check":    second(store.Check(dir, store.CheckOptions{})),
		"Repair":   second(store.Repair(dir, store.RepairOptions{Yes: true})),
		"OpenDisk": second(store.OpenDisk(dir, store.DiskOptions{})),
	} {
		if errs.CodeOf(err) != errs.Conflict || !strings.Contains(err.Error(), "in use by another process ("+pid+")") {
			t.Errorf("%s on a store open in %s: %v", what, pid, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestCheckNeedsAStore: Check and Repair on a missing or empty directory
// say so and create nothing.
func TestCheckNeedsAStore(t *testing.T) {
	empty := t.TempDir()
	for _, dir := range []string{filepath.Join(empty, "missing"), empty} {
		if _, err := store.Check(dir, store.CheckOptions{}); errs.CodeOf(err) != errs.NotFound {
			t.Errorf("Check(%s): %v", dir, err)
		}
		if _, err := store.Repair(dir, store.RepairOptions{Yes: true}); errs.CodeOf(err) != errs.NotFound {
			t.Errorf("Repair(%s): %v", dir, err)
		}
	}
	if st := dirState(t, empty); len(st) != 0 {
		t.Errorf("Check created files in an empty dir: %v", st)
	}
}
