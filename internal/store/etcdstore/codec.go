package etcdstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"

	"github.com/hetsched/hetsched/internal/store"
)

// A stream is a sequence of records, each:
//
//	uvarint len(kind) | kind | uvarint len(key) | key | op byte | [uvarint len(value) | value]
//
// op is opPut or opDelete (no value). A log entry's stream is the records
// of one Commit, in order; a snapshot's is every live record, put, in
// kind and key order. Streams are cut into chunks of at most ChunkBytes
// (a record may span chunks); each chunk value starts with a flag byte.
const (
	opDelete byte = 0
	opPut    byte = 1
)

// Chunk flags: a log entry is complete (committed) once its last chunk,
// flagged chunkLast, exists. chunkS2 says the chunks' payloads, put end to
// end, are the stream compressed with S2 (klauspost/compress/s2): one S2
// block for a log entry, the framed S2 stream (with its checksums) for a
// snapshot. Task records are JSON, which S2 shrinks: 6.1× for 5,000
// synthetic task-like records in TestCommitsAreCompressed (which asserts
// at least 3×); etcd's own database and raft log sizes were not measured. Entries without chunkS2
// (none are written now) are read as they are.
const (
	chunkMore  byte = 0
	chunkLast  byte = 1 << 0
	chunkS2    byte = 1 << 1
	chunkFlags      = chunkLast | chunkS2
)

// last reports whether chunk c is its entry's (or snapshot's) last.
func last(c []byte) bool { return c[0]&chunkLast != 0 }

// appendRecord appends r's encoding to b.
func appendRecord(b []byte, r store.Record) []byte {
	b = binary.AppendUvarint(b, uint64(len(r.Kind)))
	b = append(b, r.Kind...)
	b = binary.AppendUvarint(b, uint64(len(r.Key)))
	b = append(b, r.Key...)
	if r.Value == nil {
		return append(b, opDelete)
	}
	b = append(b, opPut)
	b = binary.AppendUvarint(b, uint64(len(r.Value)))
	return append(b, r.Value...)
}

// cut splits stream into chunk values of at most size bytes each, flag
// byte (flags, and chunkLast on the last) included. An empty stream is
// one chunk.
func cut(stream []byte, size int, flags byte) [][]byte {
	per := size - 1
	var out [][]byte
	for {
		n := min(per, len(stream))
		last := n == len(stream)
		c := make([]byte, 1+n)
		c[0] = flags
		if last {
			c[0] |= chunkLast
		}
		copy(c[1:], stream[:n])
		out = append(out, c)
		stream = stream[n:]
		if last {
			return out
		}
	}
}

// errDamaged marks a stream that does not decode.
var errDamaged = errors.New("damaged stream")

// decodeStream reads records from r until EOF, calling fn for each; the
// value is fresh memory (nil for a delete).
func decodeStream(r io.ByteReader, rd io.Reader, fn func(kind, key string, value []byte) error) error {
	for {
		kind, err := readString(r, rd, store.MaxKindLen)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		key, err := readString(r, rd, store.MaxKeyLen)
		if err != nil {
			return unexpected(err)
		}
		op, err := r.ReadByte()
		if err != nil {
			return unexpected(err)
		}
		var value []byte
		switch op {
		case opDelete:
		case opPut:
			n, err := binary.ReadUvarint(r)
			if err != nil || n > store.MaxValueLen {
				return fmt.Errorf("%w: value of %s/%s: length %d", errDamaged, kind, key, n)
			}
			value = make([]byte, n)
			if _, err := io.ReadFull(rd, value); err != nil {
				return unexpected(err)
			}
		default:
			return fmt.Errorf("%w: record %s/%s has op %d", errDamaged, kind, key, op)
		}
		if err := fn(kind, key, value); err != nil {
			return err
		}
	}
}

// readString reads a uvarint length and that many bytes (at most max); a
// clean EOF before the length is io.EOF.
func readString(r io.ByteReader, rd io.Reader, max int) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	if n == 0 || n > uint64(max) {
		return "", fmt.Errorf("%w: a name of %d bytes", errDamaged, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(rd, b); err != nil {
		return "", unexpected(err)
	}
	return string(b), nil
}

func unexpected(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: it ends inside a record", errDamaged)
	}
	return err
}

// chunkReader reads the payloads (flag byte removed) of a sequence of
// chunks as one stream; next returns the following chunk or io.EOF.
type chunkReader struct {
	next func() ([]byte, error)
	cur  []byte
}

func (c *chunkReader) Read(p []byte) (int, error) {
	for len(c.cur) == 0 {
		b, err := c.next()
		if err != nil {
			return 0, err
		}
		if len(b) == 0 {
			return 0, fmt.Errorf("%w: an empty chunk", errDamaged)
		}
		c.cur = b[1:]
	}
	n := copy(p, c.cur)
	c.cur = c.cur[n:]
	return n, nil
}

// decodeChunks decodes the stream the chunks make, fn per record.
// A snapshot's stream is S2-framed when its first chunk says so.
func decodeChunks(next func() ([]byte, error), fn func(kind, key string, value []byte) error) error {
	first, err := next()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	if len(first) == 0 || first[0]&^chunkFlags != 0 {
		return fmt.Errorf("%w: a chunk with flags %v", errDamaged, first[:min(1, len(first))])
	}
	cr := &chunkReader{next: next, cur: first[1:]}
	var r io.Reader = cr
	if first[0]&chunkS2 != 0 {
		r = s2.NewReader(cr)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	return decodeStream(br, br, fn)
}

// decodeEntry decodes a log entry's chunks (all of them, in order). A
// one-chunk entry (most commits) is read in place, not copied.
func decodeEntry(chunks [][]byte, fn func(kind, key string, value []byte) error) (payload int64, err error) {
	var b []byte
	for _, c := range chunks {
		if len(c) == 0 || c[0]&^chunkFlags != 0 {
			return 0, fmt.Errorf("%w: a chunk with bad flags", errDamaged)
		}
	}
	if len(chunks) == 1 {
		b = chunks[0][1:]
	} else {
		for _, c := range chunks {
			b = append(b, c[1:]...)
		}
	}
	payload = int64(len(b))
	if len(chunks) > 0 && chunks[0][0]&chunkS2 != 0 {
		if b, err = s2.Decode(nil, b); err != nil {
			return 0, fmt.Errorf("%w: %v", errDamaged, err)
		}
	}
	r := bytes.NewReader(b)
	return payload, decodeStream(r, r, fn)
}

// chunkSink cuts what is written to it into chunks of at most size bytes
// (flag byte included), handing each to emit; Close emits the last.
type chunkSink struct {
	size  int
	flags byte
	buf   []byte
	emit  func(c []byte) error
}

func (k *chunkSink) Write(p []byte) (int, error) {
	per := k.size - 1
	k.buf = append(k.buf, p...)
	for len(k.buf) > per { // keep at least one byte back for the last chunk
		c := make([]byte, 1+per)
		c[0] = k.flags
		copy(c[1:], k.buf[:per])
		if err := k.emit(c); err != nil {
			return 0, err
		}
		k.buf = append(k.buf[:0], k.buf[per:]...)
	}
	return len(p), nil
}

// Close emits the last chunk (perhaps with an empty payload).
func (k *chunkSink) Close() error {
	c := make([]byte, 1+len(k.buf))
	c[0] = k.flags | chunkLast
	copy(c[1:], k.buf)
	k.buf = k.buf[:0]
	return k.emit(c)
}
