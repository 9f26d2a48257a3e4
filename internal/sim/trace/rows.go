package trace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hetsched/hetsched/internal/api"
)

// Limits on untrusted input: every loop over a trace file is bounded by
// them. The published traces are far below (Philly, the largest, has 82,247
// rows of under 60 bytes).
const (
	// MaxRows is the most data rows one file may hold.
	MaxRows = 2_000_000
	// MaxLineBytes is the longest line accepted, in bytes.
	MaxLineBytes = 64 << 10
	// MaxFields is the most fields one line may hold.
	MaxFields = 64
)

// ParseError is a problem with one line of a trace file.
type ParseError struct {
	Line  int    // 1-based line number in the file
	Field string // the column at fault; "" when the whole line is
	Err   error
}

func (e *ParseError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("line %d: %s: %v", e.Line, e.Field, e.Err)
}

func (e *ParseError) Unwrap() error { return e.Err }

// rowReader splits a text table into rows of fields, one line a row.
// Blank lines are skipped; a UTF-8 byte order mark and CR before LF are
// dropped. With sep ',' a field may be quoted ("a,b", "" for a quote) but
// may not span lines; with '\t' quotes are plain characters.
type rowReader struct {
	sc   *bufio.Scanner
	sep  byte
	line int // line number of rec
	rows int // data rows read
	rec  []string
	// cols maps a header's column names to indexes (header files only).
	cols  map[string]int
	width int // fields a row must have; 0: any
}

func newRowReader(r io.Reader, sep byte) *rowReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxLineBytes+1)
	return &rowReader{sc: sc, sep: sep}
}

// next reads the next non-blank line into rr.rec; false at the end.
func (rr *rowReader) next() (bool, error) {
	for {
		if !rr.sc.Scan() {
			err := rr.sc.Err()
			if errors.Is(err, bufio.ErrTooLong) {
				return false, &ParseError{Line: rr.line + 1, Err: fmt.Errorf("longer than %d bytes", MaxLineBytes)}
			}
			if err != nil {
				return false, fmt.Errorf("after line %d: %w", rr.line, err)
			}
			return false, nil
		}
		rr.line++
		text := rr.sc.Text()
		if rr.line == 1 {
			text = strings.TrimPrefix(text, "\uFEFF")
		}
		text = strings.TrimSuffix(text, "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		if !utf8.ValidString(text) {
			return false, &ParseError{Line: rr.line, Err: errors.New("not valid UTF-8")}
		}
		rec, err := splitFields(text, rr.sep, rr.rec[:0])
		if err != nil {
			return false, &ParseError{Line: rr.line, Err: err}
		}
		rr.rec = rec
		if rr.width > 0 && len(rec) != rr.width {
			return false, &ParseError{Line: rr.line, Err: fmt.Errorf("has %d fields, want %d", len(rec), rr.width)}
		}
		return true, nil
	}
}

// eachRow calls row for every data row (nextRow) until the end of the
// input or the first error, which it returns.
func (rr *rowReader) eachRow(row func() error) error {
	for {
		ok, err := rr.nextRow()
		if err != nil || !ok {
			return err
		}
		if err := row(); err != nil {
			return err
		}
	}
}

// nextRow is next for data rows: it counts them against MaxRows.
func (rr *rowReader) nextRow() (bool, error) {
	ok, err := rr.next()
	if ok {
		rr.rows++
		if rr.rows > MaxRows {
			return false, &ParseError{Line: rr.line, Err: fmt.Errorf("more than %d rows", MaxRows)}
		}
	}
	return ok, err
}

// splitFields splits one line into at most MaxFields fields.
func splitFields(s string, sep byte, out []string) ([]string, error) {
	for {
		if len(out) == MaxFields {
			return nil, fmt.Errorf("more than %d fields", MaxFields)
		}
		if sep == ',' && strings.HasPrefix(s, `"`) {
			var b strings.Builder
			i := 1
			for {
				j := strings.IndexByte(s[i:], '"')
				if j < 0 {
					return nil, errors.New("unterminated quoted field")
				}
				b.WriteString(s[i : i+j])
				i += j + 1
				if i < len(s) && s[i] == '"' { // "" is a quote
					b.WriteByte('"')
					i++
					continue
				}
				break
			}
			out = append(out, b.String())
			if i == len(s) {
				return out, nil
			}
			if s[i] != sep {
				return nil, errors.New("text after a quoted field")
			}
			s = s[i+1:]
			continue
		}
		j := strings.IndexByte(s, sep)
		if j < 0 {
			return append(out, s), nil
		}
		out = append(out, s[:j])
		s = s[j+1:]
	}
}

// readHeader reads the first line as column names and checks that every
// required column is there. Rows must then have as many fields.
func (rr *rowReader) readHeader(required ...string) error {
	ok, err := rr.next()
	if err != nil {
		return err
	}
	if !ok {
		return errors.New("empty input: want a header line naming the columns " + strings.Join(required, ","))
	}
	rr.cols = make(map[string]int, len(rr.rec))
	for i, name := range rr.rec {
		name = strings.TrimSpace(name)
		if _, dup := rr.cols[name]; dup {
			return &ParseError{Line: rr.line, Field: truncate(name), Err: errors.New("column named twice in the header")}
		}
		rr.cols[name] = i
	}
	for _, name := range required {
		if _, ok := rr.cols[name]; !ok {
			return &ParseError{Line: rr.line, Err: fmt.Errorf("header lacks column %q (want %s)", name, strings.Join(required, ","))}
		}
	}
	rr.width = len(rr.rec)
	return nil
}

// setColumns names the columns of a file without a header: rows must have
// exactly these fields, in this order.
func (rr *rowReader) setColumns(cols []string) {
	rr.cols = make(map[string]int, len(cols))
	for i, c := range cols {
		rr.cols[c] = i
	}
	rr.width = len(cols)
}

// uniqueID returns column col of the current row, which must be a valid
// ID (api.ValidateID) not in seen; it adds it to seen. what names the
// thing in the error for a duplicate.
func (rr *rowReader) uniqueID(col, what string, seen map[string]bool) (string, error) {
	id := rr.get(col)
	if err := api.ValidateID(col, id); err != nil {
		return "", rr.wrap(col, err)
	}
	if seen[id] {
		return "", rr.errf(col, "duplicate %s %q", what, id)
	}
	seen[id] = true
	return id, nil
}

// get returns the named column of the current row, trimmed; "" when the
// header has no such column.
func (rr *rowReader) get(col string) string {
	i, ok := rr.cols[col]
	if !ok {
		return ""
	}
	return strings.TrimSpace(rr.rec[i])
}

// errf returns a ParseError for the current line and a field.
func (rr *rowReader) errf(field, format string, args ...any) error {
	return &ParseError{Line: rr.line, Field: field, Err: fmt.Errorf(format, args...)}
}

// wrap returns err as a ParseError of the current line and field.
func (rr *rowReader) wrap(field string, err error) error {
	return &ParseError{Line: rr.line, Field: field, Err: err}
}

// parseInt reads a base-10 integer in [lo, hi]; "12.0" is accepted as 12.
func parseInt(s string, lo, hi int64) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, fmt.Errorf("not an integer: %q", truncate(s))
		}
		v = int64(f)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%d is out of range [%d, %d]", v, lo, hi)
	}
	return v, nil
}

// parseFloat reads a finite number in [lo, hi].
func parseFloat(s string, lo, hi float64) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("not a number: %q", truncate(s))
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%v is out of range [%v, %v]", v, lo, hi)
	}
	return v, nil
}

// seconds converts a non-negative number of seconds, at most
// maxSeconds, to a Duration rounded to the nanosecond.
func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

// maxSeconds bounds any time or duration read from a trace (about 31
// years), far inside time.Duration's range.
const maxSeconds = 1e9

// truncate shortens s to at most 80 bytes for a message.
func truncate(s string) string {
	if len(s) <= 80 {
		return s
	}
	i := 80
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

func ptr[T any](v T) *T { return &v }

var errNotPositive = errors.New("must be positive")
