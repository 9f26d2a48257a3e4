package store

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The write-ahead log's wire format (pebble/v2 record package, v2.1.7): the
// file is a sequence of 32 KiB blocks; a block holds tightly packed chunks
// and no chunk crosses a block boundary. A chunk is a header then a payload:
//
//	legacy:     CRC (4) | length (2) | type (1)                                  | payload
//	recyclable: CRC (4) | length (2) | type (1) | log number (4)                 | payload
//	WAL sync:   CRC (4) | length (2) | type (1) | log number (4) | synced offset (8) | payload
//
// The CRC (Castagnoli, rotated and offset) covers everything from the type
// byte to the end of the payload. A record (one committed batch) is one full
// chunk or a first chunk, middle chunks and a last chunk. Pebble's LogWriter
// writes recyclable (or WAL sync) chunks carrying the file's log number, so
// the stale content of a recycled file is recognisable: its chunks carry an
// older log number. Closing a log writes an EOF trailer: a recyclable header
// whose log number is the file's plus one. Unused block space is zero.
const (
	walBlockSize     = 32 << 10
	legacyHeaderLen  = 7
	recycleHeaderLen = 11
	syncHeaderLen    = 19
	maxChunkType     = 12
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// chunkCRC is Pebble's checksum (internal/crc): CRC-32C, rotated right by
// 15 bits, plus a constant.
func chunkCRC(b []byte) uint32 {
	c := crc32.Update(0, crcTable, b)
	return (c>>15 | c<<17) + 0xa282ead8
}

// chunkPos is where a chunk sits in its record.
type chunkPos int

const (
	posFull chunkPos = iota
	posFirst
	posMiddle
	posLast
)

// chunkHeaderLen returns the header length of chunk type t (1-12) and its
// position.
func chunkHeaderLen(t byte) (int, chunkPos) {
	pos := chunkPos((t - 1) % 4)
	switch {
	case t <= 4:
		return legacyHeaderLen, pos
	case t <= 8:
		return recycleHeaderLen, pos
	default:
		return syncHeaderLen, pos
	}
}

// walEnd says how a log ends.
type walEnd int

const (
	// endTrailer: the log was closed; its EOF trailer is there.
	endTrailer walEnd = iota
	// endEOF: the file ends right after a complete record.
	endEOF
	// endStale: a complete record is followed by zeros or by an older log's
	// chunks (a recycled file). Nothing of this log is lost.
	endStale
	// endTorn: an incomplete record of this log ends the file and nothing
	// valid of this log follows it: the normal result of a crash mid-write.
	endTorn
	// endCorrupt: an invalid chunk is followed by valid chunks of this log:
	// something after the damage was written, so the damage is not a torn
	// tail, and a replay that stopped there would silently drop commits.
	endCorrupt
	// endUnreadable: reading the file failed (I/O error).
	endUnreadable
)

func (e walEnd) String() string {
	return [...]string{"closed cleanly", "ends after a complete record", "ends after a complete record (followed by recycled space)",
		"torn tail", "corrupt", "unreadable"}[e]
}

// walScan is what reading one write-ahead log found.
type walScan struct {
	Name string // file name in the data dir, e.g. 000012.log
	Num  uint64 // log number
	Size int64

	Records  int   // complete records before any damage
	ValidEnd int64 // end offset of the last complete record
	End      walEnd

	// Where parsing stopped (End is endStale, endTorn, endCorrupt or
	// endUnreadable): the offset of the first chunk that is not part of a
	// complete record, and what is wrong with it.
	DamageAt int64
	Detail   string

	// endTorn: the bytes of this log after ValidEnd (the incomplete record)
	// and how many records they belonged to (0 or 1).
	TornBytes   int64
	TornRecords int

	// endCorrupt: the offset of the first valid chunk of this log after the
	// damage, and about how many complete records follow it (records
	// spanning the damage are not counted).
	ResumeAt     int64
	RecordsAfter int
}

// damaged reports whether the log lost something that was written: its end
// is neither clean nor a torn tail.
func (w *walScan) damaged() bool { return w.End == endCorrupt || w.End == endUnreadable }

// clean reports whether the log ends where its writer stopped: trailer or
// end of file right after a complete record.
func (w *walScan) clean() bool { return w.End == endTrailer || w.End == endEOF }

// walReader reads a log block by block.
type walReader struct {
	r     io.Reader
	buf   [walBlockSize]byte
	n     int   // valid bytes in buf
	off   int64 // file offset of buf[0]
	eof   bool
	err   error
	block int64 // blocks read
}

// next loads the next block; it returns false at the end of the file or on
// an error (r.err).
func (r *walReader) next() bool {
	if r.eof || r.err != nil {
		return false
	}
	if r.block > 0 {
		r.off += walBlockSize
	}
	n, err := io.ReadFull(r.r, r.buf[:])
	r.n = n
	r.block++
	switch {
	case err == io.EOF:
		r.eof = true
		return false
	case err == io.ErrUnexpectedEOF:
		r.eof = true // a short last block
	case err != nil:
		r.err = err
		return false
	}
	return true
}

// chunk is one parsed chunk header.
type chunk struct {
	start, end int // payload end; within the block
	pos        chunkPos
	typ        byte
	logNum     uint32
}

// parseChunk reads the chunk at b[p:]. ok is false when the bytes there
// are not a valid chunk; why says what they are instead, and mine says
// whether the header names this log (so the bytes are this log's).
func parseChunk(b []byte, p int, logNum uint32) (c chunk, ok, mine bool, why string) {
	c.start = p
	if p+legacyHeaderLen > len(b) {
		if allZero(b[p:]) {
			return c, false, false, "zeros"
		}
		return c, false, true, fmt.Sprintf("a %d-byte fragment of a chunk header", len(b)-p)
	}
	sum := binary.LittleEndian.Uint32(b[p:])
	length := int(binary.LittleEndian.Uint16(b[p+4:]))
	c.typ = b[p+6]
	if c.typ == 0 || c.typ > maxChunkType {
		if sum == 0 && length == 0 && c.typ == 0 {
			return c, false, false, "zeros"
		}
		return c, false, false, fmt.Sprintf("bytes that are not a chunk header (type %d)", c.typ)
	}
	hl, pos := chunkHeaderLen(c.typ)
	c.pos = pos
	// Only a header carrying this log's number is this log's; the writer
	// never writes legacy headers, so those are another file's bytes too.
	mine = hl > legacyHeaderLen
	if p+hl > len(b) { // at the end of a short last block: a torn write
		return c, false, len(b) < walBlockSize, "a chunk header cut short by the end of the file"
	}
	if mine {
		c.logNum = binary.LittleEndian.Uint32(b[p+7:])
		if c.logNum != logNum {
			return c, false, false, fmt.Sprintf("a chunk of log %d (an older log's data in a recycled file)", c.logNum)
		}
	}
	c.end = p + hl + length
	if c.end > len(b) {
		return c, false, mine, fmt.Sprintf("a chunk of %d payload bytes, cut short after %d", length, len(b)-p-hl)
	}
	if chunkCRC(b[p+6:c.end]) != sum {
		return c, false, mine, "a chunk whose checksum does not match"
	}
	return c, true, mine, ""
}

// isTrailer reports whether b[p:] is the EOF trailer of log logNum.
func isTrailer(b []byte, p int, logNum uint32) bool {
	if p+recycleHeaderLen > len(b) {
		return false
	}
	t := b[p+6]
	return t >= 5 && t <= maxChunkType && binary.LittleEndian.Uint32(b[p+7:]) == logNum+1
}

// allZero reports whether b is all zeros.
func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// scanWAL reads the log name (number num) in dir and classifies how it ends.
// Every loop is bounded by the file's size.
func scanWAL(fs vfs.FS, dir, name string, num uint64) walScan {
	w := walScan{Name: name, Num: num, ResumeAt: -1}
	f, err := fs.Open(fs.PathJoin(dir, name))
	if err != nil {
		w.End, w.Detail = endUnreadable, err.Error()
		return w
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil {
		w.Size = st.Size()
	}
	r := &walReader{r: f}
	logNum := uint32(num)
	inRecord, recStart := false, int64(0)
	for r.next() {
		b := r.buf[:r.n]
		for p := 0; p < len(b); {
			rest := len(b) - p
			// Space at the end of a block too small for a chunk is padding.
			if rest < legacyHeaderLen && r.n == walBlockSize {
				break
			}
			if !inRecord && isTrailer(b, p, logNum) {
				w.End = endTrailer
				return w
			}
			if rest < syncHeaderLen && r.n == walBlockSize && allZero(b[p:]) {
				break // zero padding where no further chunk fits
			}
			c, ok, mine, why := parseChunk(b, p, logNum)
			if ok && inRecord != (c.pos == posMiddle || c.pos == posLast) {
				ok, mine = false, true
				why = "a chunk out of place (a record's middle without its start, or a new record inside one)"
			}
			if !ok {
				w.DamageAt, w.Detail = r.off+int64(p), why
				tornEnd := r.off + int64(p)
				if mine {
					tornEnd = r.off + int64(min(max(c.end, p+legacyHeaderLen), len(b)))
				}
				w.finish(r, inRecord, recStart, tornEnd, mine, p)
				return w
			}
			if c.pos == posFirst {
				inRecord, recStart = true, r.off+int64(p)
			}
			if c.pos == posFull || c.pos == posLast {
				inRecord = false
				w.Records++
				w.ValidEnd = r.off + int64(c.end)
			}
			p = c.end
		}
	}
	if r.err != nil {
		w.End, w.DamageAt, w.Detail = endUnreadable, r.off, r.err.Error()
		return w
	}
	if inRecord { // the file ends inside a record
		w.DamageAt, w.Detail = w.Size, "the end of the file inside a record"
		w.End, w.TornBytes, w.TornRecords = endTorn, w.Size-recStart, 1
		return w
	}
	w.End = endEOF
	if w.Size-w.ValidEnd >= syncHeaderLen { // zeros after the last record
		w.End, w.DamageAt, w.Detail = endStale, w.ValidEnd, "zeros"
	}
	return w
}

// finish classifies a log whose parse stopped at block offset p of r's
// current block: it looks for valid chunks of this log further on.
func (w *walScan) finish(r *walReader, inRecord bool, recStart, tornEnd int64, mine bool, p int) {
	resume, after := findResume(r, p+1, uint32(w.Num))
	switch {
	case r.err != nil:
		w.End, w.Detail = endUnreadable, r.err.Error()
	case resume >= 0:
		w.End, w.ResumeAt, w.RecordsAfter = endCorrupt, resume, after
	case inRecord:
		w.End, w.TornBytes, w.TornRecords = endTorn, tornEnd-recStart, 1
	case mine:
		w.End, w.TornBytes, w.TornRecords = endTorn, tornEnd-w.DamageAt, 1
	default:
		w.End = endStale
	}
}

// findResume looks for a valid chunk of log logNum from offset p of r's
// current block to the end of the file, byte by byte (a recyclable chunk
// header carries the log number at offset 7; legacy chunks are looked for
// at block starts). It returns the file offset of the first one (-1: none)
// and about how many complete records follow from there.
func findResume(r *walReader, p int, logNum uint32) (resume int64, records int) {
	var pat [4]byte
	binary.LittleEndian.PutUint32(pat[:], logNum)
	resume = -1
	first := true
	for {
		b := r.buf[:r.n]
		if !first {
			p = 0
		}
		first = false
		start := -1
		if resume < 0 {
			start = findChunkFrom(b, p, logNum, pat[:])
			if start >= 0 {
				resume = r.off + int64(start)
			}
		} else {
			start = 0
		}
		if start >= 0 {
			records += countRecords(b, start, logNum)
		}
		if !r.next() {
			return resume, records
		}
	}
}

// findChunkFrom returns the first offset >= p in block b where a valid
// chunk of log logNum starts, or -1.
func findChunkFrom(b []byte, p int, logNum uint32, pat []byte) int {
	if p == 0 {
		if _, ok, _, _ := parseChunk(b, 0, logNum); ok {
			return 0
		}
	}
	for q := p + 7; q+4 <= len(b); {
		i := bytes.Index(b[q:], pat)
		if i < 0 {
			return -1
		}
		s := q + i - 7
		if s >= p && b[s+6] >= 5 {
			if _, ok, _, _ := parseChunk(b, s, logNum); ok {
				return s
			}
		}
		q += i + 1
	}
	return -1
}

// countRecords follows the chunk chain of block b from offset p and
// counts the records it completes (full or last chunks).
func countRecords(b []byte, p int, logNum uint32) int {
	n := 0
	for p < len(b) {
		c, ok, _, _ := parseChunk(b, p, logNum)
		if !ok {
			return n
		}
		if c.pos == posFull || c.pos == posLast {
			n++
		}
		p = c.end
	}
	return n
}
