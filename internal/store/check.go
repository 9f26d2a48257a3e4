package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hetsched/hetsched/internal/errs"
)

// CheckOptions tune Check.
type CheckOptions struct {
	// SkipTables skips reading every table (a full read of the store).
	SkipTables bool
	// FS is the filesystem (nil: the real disk).
	FS vfs.FS
}

// RepairOptions tune Repair.
type RepairOptions struct {
	// Yes is the operator's consent: without it Repair only reports what it
	// would do and changes nothing.
	Yes bool
	// FS is the filesystem (nil: the real disk).
	FS vfs.FS
	// Now stamps the names of the files set aside (nil: time.Now).
	Now func() time.Time
}

// Report is what `hetsched store check` and `hetsched store repair` print:
// each write-ahead log, its records, where damage is, and what a repair
// would drop (Plan) or has dropped (Repaired).
type Report struct {
	Dir          string
	Manifest     string // the current MANIFEST's file name
	MinLog       uint64 // logs numbered below it are obsolete (flushed)
	MinLogKnown  bool
	ManifestNote string // trouble reading the MANIFEST, if any
	WALs         []WALReport
	Tables       TablesReport
	// Opens is whether OpenDisk would open the store as it is (it truncates
	// a torn tail of the newest log itself).
	Opens bool
	// Plan is what Repair does (or, without consent, would do), in order.
	Plan     []string
	Repaired bool
}

// WALReport describes one write-ahead log.
type WALReport struct {
	File    string
	Size    int64
	Live    bool // replayed on open (not yet flushed to tables)
	Newest  bool
	Records int    // complete records before any damage
	End     string // how the log ends
	// ValidEnd is the end of the last complete record; bytes after it are
	// dropped by a truncation.
	ValidEnd int64
	// Damage: where parsing stopped and why (when the log does not end
	// cleanly), and, for a corrupt log, where valid records resume.
	DamageOffset int64
	Detail       string
	TornBytes    int64
	TornRecords  int
	ResumeAt     int64 // -1: nothing valid after the damage
	RecordsAfter int
	// Problem: this log keeps the store from opening.
	Problem bool

	end walEnd
}

// TablesReport is the result of reading every table.
type TablesReport struct {
	Checked bool
	Files   int
	Points  int64  // point entries read (all versions)
	Err     string // the damage found, if any
	Skipped string // why the tables were not checked
}

// OK reports whether the store opens and nothing damaged was found.
func (r *Report) OK() bool { return r.Opens && r.Tables.Err == "" }

// Check reads a store that no process has open and reports its state: every
// log (OpenDisk's checks, and obsolete logs too) and, unless SkipTables, every
// table (Pebble's CheckLevels, which verifies block checksums). It changes
// nothing. It refuses a store open by a running server.
func Check(dir string, opt CheckOptions) (Report, error) {
	fs := opt.FS
	if fs == nil {
		fs = vfs.Default
	}
	lock, r, sf, err := analyze(fs, dir)
	if err != nil {
		return r, err
	}
	defer lock.Close()
	r.plan(sf, nil)
	if opt.SkipTables {
		r.Tables.Skipped = "not checked (skipped)"
	} else {
		r.checkTables(fs, dir, lock)
	}
	return r, nil
}

// Repair salvages a store whose logs are damaged: it keeps every valid
// record up to the first damage and sets aside what follows it. Replaying
// past a gap would apply later commits without an earlier one, so the rest
// of the damaged log and every newer log are set aside too. Nothing is
// deleted: each file changed or set aside is kept as <file>.damaged-<time>.
// Without opt.Yes it only reports the plan. Table damage is reported, not
// repaired.
func Repair(dir string, opt RepairOptions) (Report, error) {
	fs := opt.FS
	if fs == nil {
		fs = vfs.Default
	}
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	lock, r, sf, err := analyze(fs, dir)
	if err != nil {
		return r, err
	}
	var acts []repairAction
	r.plan(sf, &acts)
	r.Tables.Skipped = "not checked by repair (run check)"
	if !opt.Yes || len(acts) == 0 {
		lock.Close()
		return r, nil
	}
	stamp := now().UTC().Format("20060102T150405Z")
	for _, a := range acts {
		if err := a.apply(fs, dir, stamp); err != nil {
			lock.Close()
			return r, errs.Wrap(errs.Unavailable, "data-dir", fmt.Errorf("%s: repair stopped at %q: %w; files already set aside are kept", dir, a.desc, err))
		}
	}
	r.Repaired = true
	lock.Close()
	after, err := Check(dir, CheckOptions{SkipTables: true, FS: fs})
	if err == nil {
		r.Opens = after.Opens
	}
	return r, err
}

// analyze locks the store and reads its logs.
func analyze(fs vfs.FS, dir string) (*pebble.Lock, Report, storeFiles, error) {
	r := Report{Dir: dir}
	st, err := fs.Stat(dir)
	switch {
	case err != nil && errors.Is(err, os.ErrNotExist):
		return nil, r, storeFiles{}, errs.New(errs.NotFound, "data-dir", "%s does not exist", dir)
	case err != nil:
		return nil, r, storeFiles{}, dirErr(dir, "read", err, nil)
	case !st.IsDir():
		return nil, r, storeFiles{}, errs.Invalid("data-dir", "%s is not a directory", dir)
	}
	if sf, err := readStore(fs, dir); err != nil {
		return nil, r, sf, dirErr(dir, "read", err, nil)
	} else if !sf.Exists && len(sf.Logs) == 0 {
		return nil, r, sf, errs.New(errs.NotFound, "data-dir", "%s holds no store (no MANIFEST and no log)", dir)
	}
	lock, err := lockDir(fs, dir)
	if err != nil {
		return nil, r, storeFiles{}, err
	}
	sf, err := readStore(fs, dir) // again, now that nothing else can change it
	if err != nil {
		lock.Close()
		return nil, r, sf, dirErr(dir, "read", err, nil)
	}
	r.Manifest, r.MinLog, r.MinLogKnown, r.ManifestNote = sf.Manifest, sf.MinLog, sf.MinLogKnown, sf.ManifestErr
	live := sf.live()
	for _, l := range sf.Logs {
		w := scanWAL(fs, dir, l.Name, l.Num)
		wr := WALReport{File: w.Name, Size: w.Size, Records: w.Records, End: w.End.String(), ValidEnd: w.ValidEnd,
			DamageOffset: w.DamageAt, Detail: w.Detail, TornBytes: w.TornBytes, TornRecords: w.TornRecords,
			ResumeAt: w.ResumeAt, RecordsAfter: w.RecordsAfter, end: w.End}
		wr.Live = !sf.MinLogKnown || l.Num >= sf.MinLog
		wr.Newest = len(live) > 0 && l.Num == live[len(live)-1].Num
		if wr.Live {
			wr.Problem = w.damaged() || (!wr.Newest && !w.clean())
		}
		r.WALs = append(r.WALs, wr)
	}
	return lock, r, sf, nil
}

// repairAction is one step of a repair.
type repairAction struct {
	desc     string
	file     string
	keep     int64 // bytes to keep; -1: set the whole file aside
	aside    bool  // keep the original as <file>.damaged-<stamp>
	optional bool  // the file may not exist (then there is nothing to do)
}

func (a repairAction) apply(fs vfs.FS, dir, stamp string) error {
	path := fs.PathJoin(dir, a.file)
	if a.keep < 0 {
		err := fs.Rename(path, asideName(fs, path, stamp))
		if a.optional && errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if a.aside {
		if err := keepAside(fs, path, asideName(fs, path, stamp)); err != nil {
			return err
		}
	}
	return copyPrefix(fs, path, path, a.keep)
}

// asideName picks an unused <path>.damaged-<stamp>[-n].
func asideName(fs vfs.FS, path, stamp string) string {
	name := path + ".damaged-" + stamp
	for i := 2; i < 1000; i++ {
		if _, err := fs.Stat(name); err != nil {
			break
		}
		name = fmt.Sprintf("%s.damaged-%s-%d", path, stamp, i)
	}
	return name
}

// keepAside makes aside a second name of path's current content (a hard
// link, or a copy where links are not supported), synced.
func keepAside(fs vfs.FS, path, aside string) error {
	if err := fs.Link(path, aside); err != nil {
		st, serr := fs.Stat(path)
		if serr != nil {
			return serr
		}
		if err := copyPrefix(fs, path, aside, st.Size()); err != nil {
			return err
		}
	}
	return syncDir(fs, fs.PathDir(path))
}

// plan fills r.Opens and r.Plan (and acts, for Repair).
func (r *Report) plan(sf storeFiles, acts *[]repairAction) {
	add := func(a repairAction) {
		r.Plan = append(r.Plan, a.desc)
		if acts != nil {
			*acts = append(*acts, a)
		}
	}
	first := -1
	for i, w := range r.WALs {
		if w.Problem {
			first = i
			break
		}
	}
	r.Opens = first < 0
	if first < 0 {
		for _, w := range r.WALs {
			if w.Live && w.Newest && (w.end == endTorn || w.end == endStale) {
				add(repairAction{file: w.File, keep: w.ValidEnd, desc: fmt.Sprintf(
					"truncate %s at byte offset %d, after its %d complete records (a torn tail: %d bytes, %d record never acknowledged; OpenDisk does this itself)",
					w.File, w.ValidEnd, w.Records, w.TornBytes, w.TornRecords)})
			}
		}
		return
	}
	// Newer logs first: should the repair stop half-way, the damaged log is
	// still damaged and the store still refuses to open.
	for i := len(r.WALs) - 1; i > first; i-- {
		w := r.WALs[i]
		if !w.Live {
			continue
		}
		add(repairAction{file: w.File, keep: -1, desc: fmt.Sprintf(
			"set %s aside (%d records, all newer than the damage in %s: replaying them without the records lost there would apply later commits without earlier ones)",
			w.File, w.Records, r.WALs[first].File)})
	}
	w := r.WALs[first]
	lost := "the damaged record"
	if w.end == endCorrupt {
		lost = fmt.Sprintf("the damaged record and the about %d valid records after it (from offset %d)", w.RecordsAfter, w.ResumeAt)
	} else if w.TornRecords > 0 {
		lost = fmt.Sprintf("%d incomplete record(s)", w.TornRecords)
	}
	add(repairAction{file: w.File, keep: w.ValidEnd, aside: true, desc: fmt.Sprintf(
		"keep the first %d records of %s (bytes 0-%d) and drop %s; the original is kept as %s.damaged-<time>",
		w.Records, w.File, w.ValidEnd, lost, w.File)})
	// What is dropped was acknowledged: the store would refuse to open
	// below its high-water mark (hwm.go), which the repair accepts.
	add(repairAction{file: hwmName, keep: -1, optional: true, desc: fmt.Sprintf(
		"set %s aside (the acknowledged commits' high-water mark: the records dropped were acknowledged, and the store opens with what the logs keep)", hwmName)})
}

// checkTables opens the store read-only (replaying its logs into memory,
// writing nothing) and reads every table with Pebble's CheckLevels.
func (r *Report) checkTables(fs vfs.FS, dir string, lock *pebble.Lock) {
	names, _ := fs.List(dir)
	for _, n := range names {
		if strings.HasSuffix(n, ".sst") {
			r.Tables.Files++
		}
	}
	fail := newFailure(slog.New(slog.DiscardHandler))
	lg := pebbleLogger{l: slog.New(slog.DiscardHandler), lim: newLimiter(), fail: fail}
	opts := &pebble.Options{ReadOnly: true, FS: fs, Lock: lock, Logger: lg, EventListener: eventListener(lg, nil)}
	type result struct {
		points int64
		err    error
	}
	done := make(chan result, 1)
	go func() {
		db, err := pebble.Open(dir, opts)
		if err != nil {
			done <- result{err: fmt.Errorf("open read-only: %w", err)}
			return
		}
		var stats pebble.CheckLevelsStats
		err = db.CheckLevels(&stats)
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		done <- result{stats.NumPoints, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-fail.ch: // Pebble found corruption (or called Fatalf, and parked)
		res.err = fail.err.Err
	}
	r.Tables.Checked, r.Tables.Points = true, res.points
	if res.err != nil {
		r.Tables.Err = res.err.Error()
	}
}

// WriteText prints the report for a person.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "store %s\n", r.Dir)
	switch {
	case r.Manifest == "":
		fmt.Fprintf(&b, "  no MANIFEST%s\n", note(r.ManifestNote))
	case r.MinLogKnown && r.MinLog == 0:
		fmt.Fprintf(&b, "  %s: every log is replayed on open%s\n", r.Manifest, note(r.ManifestNote))
	case r.MinLogKnown:
		fmt.Fprintf(&b, "  %s: logs numbered %d and up are replayed on open%s\n", r.Manifest, r.MinLog, note(r.ManifestNote))
	default:
		fmt.Fprintf(&b, "  %s could not be read%s: every log is treated as replayed\n", r.Manifest, note(r.ManifestNote))
	}
	fmt.Fprintf(&b, "write-ahead logs (%d):\n", len(r.WALs))
	for _, l := range r.WALs {
		writeWAL(&b, l)
	}
	switch t := r.Tables; {
	case !t.Checked:
		fmt.Fprintf(&b, "tables: %d files, %s\n", t.Files, t.Skipped)
	case t.Err != "":
		fmt.Fprintf(&b, "tables: %d files, DAMAGED: %s (not repairable by this tool)\n", t.Files, t.Err)
	default:
		fmt.Fprintf(&b, "tables: %d files; all data read back (%d entries, with the logs' records)\n", t.Files, t.Points)
	}
	if r.Tables.Err != "" {
		fmt.Fprintf(&b, "verdict: tables are damaged: reads of the damaged data fail and a server marks the store failed when it meets it; restore the data dir from a backup.\n")
	}
	switch {
	case r.Repaired:
		fmt.Fprintf(&b, "repaired:\n")
	case !r.Opens:
		fmt.Fprintf(&b, "verdict: the store will NOT open as it is.\nrepair (`hetsched store repair --data-dir %s --yes`) would:\n", r.Dir)
	case len(r.Plan) > 0:
		fmt.Fprintf(&b, "verdict: the store opens (OpenDisk truncates the torn tail itself). repair would:\n")
	case r.Tables.Err == "":
		fmt.Fprintf(&b, "verdict: the store opens; nothing to repair.\n")
	}
	for _, p := range r.Plan {
		fmt.Fprintf(&b, "  - %s\n", p)
	}
	if r.Repaired {
		fmt.Fprintf(&b, "after the repair the store %s.\n", map[bool]string{true: "opens", false: "still does NOT open: run check again"}[r.Opens])
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String is WriteText to a string.
func (r Report) String() string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

func writeWAL(b *strings.Builder, l WALReport) {
	role := "obsolete (flushed to tables; not replayed)"
	if l.Live {
		role = "live"
		if l.Newest {
			role = "live, newest"
		}
	}
	fmt.Fprintf(b, "  %s  %d bytes  %s: %d records, %s", l.File, l.Size, role, l.Records, l.End)
	if l.end != endTrailer && l.end != endEOF {
		fmt.Fprintf(b, " at byte offset %d (%s)", l.DamageOffset, l.Detail)
	}
	switch {
	case l.ResumeAt >= 0:
		fmt.Fprintf(b, "; valid records resume at offset %d (about %d more)", l.ResumeAt, l.RecordsAfter)
	case l.TornBytes > 0:
		fmt.Fprintf(b, "; %d bytes of %d incomplete record(s) after offset %d", l.TornBytes, l.TornRecords, l.ValidEnd)
	}
	if l.Problem {
		b.WriteString("  <- DAMAGED")
	}
	b.WriteString("\n")
}

func note(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
