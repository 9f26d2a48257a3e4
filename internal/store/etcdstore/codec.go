package etcdstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

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
// flagged chunkLast, exists.
const (
	chunkMore byte = 0
	chunkLast byte = 1
)

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
// byte included; the last is flagged chunkLast. An empty stream is one
// chunk.
func cut(stream []byte, size int) [][]byte {
	per := size - 1
	var out [][]byte
	for {
		n := min(per, len(stream))
		last := n == len(stream)
		c := make([]byte, 1+n)
		c[0] = chunkMore
		if last {
			c[0] = chunkLast
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
func decodeChunks(next func() ([]byte, error), fn func(kind, key string, value []byte) error) error {
	br := bufio.NewReaderSize(&chunkReader{next: next}, 64<<10)
	return decodeStream(br, br, fn)
}
