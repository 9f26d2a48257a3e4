package store

import (
	"fmt"
	"io"
	"log/slog"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hetsched/hetsched/internal/errs"
)

// DamageError names the damage that keeps the store from opening.
type DamageError struct {
	File   string // file name in the data dir
	Offset int64  // byte offset of the damage
	Detail string // what is there instead of a valid record
}

func (e *DamageError) Error() string {
	return fmt.Sprintf("%s is damaged at byte offset %d: %s", e.File, e.Offset, e.Detail)
}

// checkLogs reads every log Pebble will replay. It truncates the newest
// log's torn tail or recycled space (returning the Recovery) and refuses
// any other damage. replay is the bytes of log data Pebble will replay.
func checkLogs(fs vfs.FS, dir string, lg *slog.Logger) (rec Recovery, replay uint64, err error) {
	sf, err := readStore(fs, dir)
	if err != nil {
		return rec, 0, dirErr(dir, "read", err, nil)
	}
	live := sf.live()
	for i, l := range live {
		w := scanWAL(fs, dir, l.Name, l.Num)
		replay += uint64(max(w.ValidEnd, 0))
		newest := i == len(live)-1
		switch {
		case w.End == endUnreadable:
			return rec, 0, errs.New(errs.Unavailable, "data-dir", "%s: cannot read the write-ahead log %s: %s", dir, w.Name, w.Detail)
		case w.clean():
		case newest && (w.End == endTorn || w.End == endStale):
			if err := truncateFile(fs, fs.PathJoin(dir, w.Name), w.ValidEnd); err != nil {
				return rec, 0, dirErr(dir, "truncate the torn log in", err, nil)
			}
			if w.End == endTorn {
				rec = Recovery{TornTail: true, File: w.Name, Offset: w.ValidEnd, BytesDropped: w.TornBytes, RecordsDropped: w.TornRecords}
				lg.Warn("store: the newest write-ahead log ends in a torn write (the normal result of a crash mid-write; it was never acknowledged): truncated",
					"dir", dir, "file", w.Name, "offset", w.ValidEnd, "bytes_dropped", w.TornBytes, "records_dropped", w.TornRecords, "records_kept", w.Records)
			} else {
				lg.Debug("store: truncated the newest log after its last record (zeros or a recycled log's data)",
					"dir", dir, "file", w.Name, "offset", w.ValidEnd, "size", w.Size)
			}
		default:
			return rec, 0, damageErr(dir, &w, newest, len(live)-1-i)
		}
	}
	return rec, replay, nil
}

// damageErr is the error OpenDisk returns for a damaged log.
func damageErr(dir string, w *walScan, newest bool, later int) error {
	lost := ""
	switch {
	case w.End == endCorrupt:
		lost = fmt.Sprintf("; valid records follow at offset %d (about %d), and Pebble's replay would silently stop at the damage and drop them", w.ResumeAt, w.RecordsAfter)
	case !newest:
		lost = fmt.Sprintf("; it is not the newest log, so it should end with an end marker, and %d newer log(s) depend on it", later)
	}
	return &errs.Error{Code: errs.Unavailable, Field: "data-dir", Err: &DamageError{File: w.Name, Offset: w.DamageAt, Detail: w.Detail},
		Message: fmt.Sprintf("%s: the write-ahead log %s is damaged at byte offset %d (%s, after %d valid records)%s. "+
			"The store does not start rather than lose acknowledged commits: run `hetsched store check --data-dir %s` for a report, "+
			"then `hetsched store repair --data-dir %s --yes` to keep every record before the damage (the damaged file is kept aside)",
			dir, w.Name, w.DamageAt, w.Detail, w.Records, lost, dir, dir)}
}

// truncateFile cuts path to size and syncs it; on a filesystem without
// truncate it copies the first size bytes to a new file renamed over it.
func truncateFile(fs vfs.FS, path string, size int64) error {
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	if t, ok := f.(interface{ Truncate(int64) error }); ok {
		err = t.Truncate(size)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	f.Close()
	return copyPrefix(fs, path, path, size)
}

// copyPrefix writes the first size bytes of src to dst through a temporary
// file renamed into place, and syncs the directory.
func copyPrefix(fs vfs.FS, src, dst string, size int64) error {
	in, err := fs.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp-salvage"
	out, err := fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	_, err = io.CopyN(out, in, size)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fs.Rename(tmp, dst)
	}
	if err != nil {
		fs.Remove(tmp)
		return err
	}
	return syncDir(fs, fs.PathDir(dst))
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
