package store

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// storeFiles is what a data dir holds, as far as checking its logs goes.
type storeFiles struct {
	Exists   bool   // a store was created here (it has a MANIFEST)
	Manifest string // the current MANIFEST's file name
	// MinLog is the smallest log number Pebble replays on open: logs below
	// it were flushed to tables and are obsolete (kept for recycling).
	// MinLogKnown is false when the MANIFEST could not be decoded; every log
	// then counts as live.
	MinLog      uint64
	MinLogKnown bool
	ManifestErr string // why MinLog is unknown, or damage at its tail
	Logs        []logFile
}

// logFile is one write-ahead log in the data dir.
type logFile struct {
	Name string
	Num  uint64
}

// readStore lists the data dir's logs and reads the MANIFEST's log number.
func readStore(fs vfs.FS, dir string) (storeFiles, error) {
	var sf storeFiles
	names, err := fs.List(dir)
	if err != nil {
		return sf, err
	}
	for _, n := range names {
		num, idx, ok := wal.ParseLogFilename(n)
		if ok && idx == 0 {
			sf.Logs = append(sf.Logs, logFile{Name: n, Num: uint64(num)})
		}
	}
	slices.SortFunc(sf.Logs, func(a, b logFile) int { return cmpU64(a.Num, b.Num) })
	desc, err := pebble.Peek(dir, fs)
	if err != nil {
		sf.ManifestErr = err.Error()
		return sf, nil
	}
	sf.Exists = desc.Exists
	if !desc.Exists {
		return sf, nil
	}
	sf.Manifest = fs.PathBase(desc.ManifestFilename)
	sf.MinLog, sf.MinLogKnown, sf.ManifestErr = manifestMinLog(fs, desc.ManifestFilename)
	return sf, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// live returns the logs Pebble replays on open, oldest first.
func (sf *storeFiles) live() []logFile {
	var out []logFile
	for _, l := range sf.Logs {
		if !sf.MinLogKnown || l.Num >= sf.MinLog {
			out = append(out, l)
		}
	}
	return out
}

// maxManifestRecord bounds one MANIFEST record (a version edit).
const maxManifestRecord = 256 << 20

// manifestMinLog reads every version edit of a MANIFEST and returns the last
// "log number" one set (Pebble's minUnflushedLogNum). Like Pebble, it stops
// at an invalid record at the MANIFEST's tail (a torn write), noting it.
func manifestMinLog(fs vfs.FS, path string) (minLog uint64, known bool, note string) {
	f, err := fs.Open(path)
	if err != nil {
		return 0, false, err.Error()
	}
	defer f.Close()
	rr := record.NewReader(f, 0)
	for n := 0; ; n++ {
		r, err := rr.Next()
		if err == nil {
			var num uint64
			var set bool
			num, set, err = editLogNum(bufio.NewReader(io.LimitReader(r, maxManifestRecord)))
			if err == nil && set {
				minLog = num
			}
		}
		switch {
		case err == io.EOF:
			return minLog, true, ""
		case errors.Is(err, record.ErrInvalidChunk) || errors.Is(err, record.ErrZeroedChunk) || errors.Is(err, record.ErrUnexpectedEOF):
			return minLog, true, fmt.Sprintf("MANIFEST record %d is incomplete (ignored, as Pebble does)", n)
		case err != nil:
			return 0, false, fmt.Sprintf("MANIFEST record %d: %v", n, err)
		}
	}
}

// Version edit tags (pebble/v2 internal/manifest, v2.1.7).
const (
	tagComparator          = 1
	tagLogNumber           = 2
	tagNextFileNumber      = 3
	tagLastSequence        = 4
	tagCompactPointer      = 5
	tagDeletedFile         = 6
	tagNewFile             = 7
	tagPrevLogNumber       = 9
	tagNewFile2            = 100
	tagNewFile3            = 102
	tagNewFile4            = 103
	tagNewFile5            = 104
	tagCreatedBackingTable = 105
	tagRemovedBackingTable = 106
	tagNewBlobFile         = 107
	tagDeletedBlobFile     = 108

	customTagTerminate      = 1
	customTagPathID         = 65
	customTagVirtual        = 66
	customTagBlobReferences = 69
	customTagNonSafeIgnore  = 1 << 6
)

// editDecoder reads the fields of one version edit.
type editDecoder struct{ r *bufio.Reader }

func (d editDecoder) uvarint() (uint64, error) {
	v, err := binary.ReadUvarint(d.r)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return v, err
}

// uvarints reads n uvarints.
func (d editDecoder) uvarints(n int) error {
	for range n {
		if _, err := d.uvarint(); err != nil {
			return err
		}
	}
	return nil
}

// skipBytes skips a length-prefixed byte string.
func (d editDecoder) skipBytes() error {
	n, err := d.uvarint()
	if err != nil {
		return err
	}
	if n > maxManifestRecord {
		return fmt.Errorf("a field of %d bytes", n)
	}
	_, err = d.r.Discard(int(n))
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// editLogNum decodes one version edit and returns its log number, if it
// sets one. It mirrors VersionEdit.Decode, skipping every other field.
func editLogNum(r *bufio.Reader) (logNum uint64, set bool, err error) {
	d := editDecoder{r}
	for {
		tag, err := binary.ReadUvarint(r)
		if err == io.EOF {
			return logNum, set, nil
		}
		if err != nil {
			return 0, false, err
		}
		switch tag {
		case tagLogNumber:
			if logNum, err = d.uvarint(); err != nil {
				return 0, false, err
			}
			set = true
		case tagNextFileNumber, tagLastSequence, tagPrevLogNumber, tagRemovedBackingTable:
			err = d.uvarints(1)
		case tagComparator:
			err = d.skipBytes()
		case tagCompactPointer:
			if err = d.uvarints(1); err == nil {
				err = d.skipBytes()
			}
		case tagDeletedFile, tagCreatedBackingTable, tagDeletedBlobFile:
			err = d.uvarints(2)
		case tagNewBlobFile:
			err = d.uvarints(5)
		case tagNewFile, tagNewFile2, tagNewFile3, tagNewFile4, tagNewFile5:
			err = d.skipNewFile(tag)
		default:
			return 0, false, fmt.Errorf("unknown version edit tag %d", tag)
		}
		if err != nil {
			return 0, false, err
		}
	}
}

// skipNewFile skips a new-table entry.
func (d editDecoder) skipNewFile(tag uint64) error {
	n := 3 // level, file number, size
	if tag == tagNewFile3 {
		n++ // path id
	}
	if err := d.uvarints(n); err != nil {
		return err
	}
	keys := 2 // smallest and largest point keys
	if tag == tagNewFile5 {
		marker, err := d.r.ReadByte()
		if err != nil {
			return io.ErrUnexpectedEOF
		}
		keys = 2 // range key bounds
		if marker&1 != 0 {
			keys += 2 // point key bounds too
		}
	}
	for range keys {
		if err := d.skipBytes(); err != nil {
			return err
		}
	}
	if tag != tagNewFile {
		if err := d.uvarints(2); err != nil { // smallest and largest seqnum
			return err
		}
	}
	if tag != tagNewFile4 && tag != tagNewFile5 {
		return nil
	}
	for range maxManifestRecord {
		ct, err := d.uvarint()
		if err != nil {
			return err
		}
		switch {
		case ct == customTagTerminate:
			return nil
		case ct == customTagPathID:
			return errors.New("new-file4: path-id field not supported")
		case ct == customTagVirtual:
			err = d.uvarints(1)
		case ct == customTagBlobReferences:
			err = d.skipBlobRefs()
		case ct&customTagNonSafeIgnore != 0:
			return fmt.Errorf("new-file4: custom field %d not supported", ct)
		default:
			err = d.skipBytes()
		}
		if err != nil {
			return err
		}
	}
	return errors.New("new-file4: too many custom fields")
}

// skipBlobRefs skips a table's blob references: depth, count, then count
// (file id, value size) pairs.
func (d editDecoder) skipBlobRefs() error {
	if err := d.uvarints(1); err != nil {
		return err
	}
	n, err := d.uvarint()
	if err != nil {
		return err
	}
	if n > maxManifestRecord {
		return fmt.Errorf("%d blob references", n)
	}
	return d.uvarints(2 * int(n))
}
