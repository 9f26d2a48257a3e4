// Package jsonread is a strict, allocation-light JSON reader for the hot
// request decoders (task batches). It reads one value at a time from a byte
// slice; the caller drives it by the shape it expects, so unknown members
// and wrong types are found where the caller can name the field.
//
// Contracts:
//   - Input is RFC 8259 JSON. Strings must be valid UTF-8 (invalid bytes
//     are an error, not replaced); control characters must be escaped;
//     lone surrogate escapes decode to U+FFFD as in encoding/json.
//   - Errors are *SyntaxError with the byte offset; a Reader never panics.
//   - The Reader does not recurse and cannot skip values: the caller walks
//     exactly the shape it accepts, so nesting is bounded by the caller's
//     own code and untrusted input cannot grow the stack.
package jsonread

import (
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// SyntaxError is malformed JSON at Offset.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("malformed JSON at byte %d: %s", e.Offset, e.Msg)
}

// Kind is the type of the next value.
type Kind byte

const (
	End    Kind = 0 // no more input
	Object Kind = '{'
	Array  Kind = '['
	String Kind = '"'
	Number Kind = '0'
	Bool   Kind = 't'
	Null   Kind = 'n'
	Bad    Kind = '?'
)

func (k Kind) String() string {
	switch k {
	case End:
		return "end of input"
	case Object:
		return "object"
	case Array:
		return "array"
	case String:
		return "string"
	case Number:
		return "number"
	case Bool:
		return "boolean"
	case Null:
		return "null"
	}
	return "invalid value"
}

// Reader reads JSON values from b.
type Reader struct {
	b []byte
	i int
}

// New returns a Reader over b; b must not change while it is read.
func New(b []byte) *Reader { return &Reader{b: b} }

// Offset is the position of the next unread byte.
func (r *Reader) Offset() int { return r.i }

func (r *Reader) errf(format string, args ...any) error {
	return &SyntaxError{Offset: r.i, Msg: fmt.Sprintf(format, args...)}
}

func (r *Reader) space() {
	for r.i < len(r.b) {
		switch r.b[r.i] {
		case ' ', '\t', '\n', '\r':
			r.i++
		default:
			return
		}
	}
}

// Peek returns the kind of the next value without reading it.
func (r *Reader) Peek() Kind {
	r.space()
	if r.i >= len(r.b) {
		return End
	}
	switch c := r.b[r.i]; c {
	case '{', '[', '"':
		return Kind(c)
	case 't', 'f':
		return Bool
	case 'n':
		return Null
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return Number
	}
	return Bad
}

// Finish checks that only whitespace is left.
func (r *Reader) Finish() error {
	if k := r.Peek(); k != End {
		return r.errf("unexpected data after the JSON value")
	}
	return nil
}

func (r *Reader) literal(word string) error {
	if len(r.b)-r.i < len(word) || string(r.b[r.i:r.i+len(word)]) != word {
		return r.errf("invalid literal")
	}
	r.i += len(word)
	return nil
}

// ReadNull consumes null.
func (r *Reader) ReadNull() error {
	r.space()
	return r.literal("null")
}

// ReadBool reads true or false.
func (r *Reader) ReadBool() (bool, error) {
	r.space()
	if r.i < len(r.b) && r.b[r.i] == 't' {
		return true, r.literal("true")
	}
	return false, r.literal("false")
}

// ReadNumber returns the literal text of a number, checked against the
// JSON grammar.
func (r *Reader) ReadNumber() (string, error) {
	r.space()
	start := r.i
	b := r.b
	i := r.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		r.i = i
		return "", r.errf("invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			r.i = i
			return "", r.errf("invalid number: no digits after '.'")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			r.i = i
			return "", r.errf("invalid number: no digits in exponent")
		}
	}
	r.i = i
	return string(b[start:i]), nil
}

// ReadString reads a string value.
func (r *Reader) ReadString() (string, error) {
	r.space()
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return "", r.errf("expected a string")
	}
	r.i++
	start := r.i
	b := r.b
	// Fast path: printable ASCII without escapes.
	for i := start; i < len(b); i++ {
		c := b[i]
		if c == '"' {
			r.i = i + 1
			return string(b[start:i]), nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
	}
	return r.slowString(start)
}

func (r *Reader) slowString(start int) (string, error) {
	b := r.b
	out := make([]byte, 0, 32)
	i := start
	for {
		if i >= len(b) {
			r.i = i
			return "", r.errf("unterminated string")
		}
		c := b[i]
		switch {
		case c == '"':
			r.i = i + 1
			return string(out), nil
		case c < 0x20:
			r.i = i
			return "", r.errf("control character in string")
		case c == '\\':
			if i+1 >= len(b) {
				r.i = i
				return "", r.errf("unterminated escape")
			}
			e := b[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				cp, ok := hex4(b, i)
				if !ok {
					r.i = i
					return "", r.errf("invalid \\u escape")
				}
				i += 4
				ru := rune(cp)
				if utf16.IsSurrogate(ru) {
					ru = utf8.RuneError
					if i+6 <= len(b) && b[i] == '\\' && b[i+1] == 'u' {
						if lo, ok := hex4(b, i+2); ok {
							if dec := utf16.DecodeRune(rune(cp), rune(lo)); dec != utf8.RuneError {
								ru = dec
								i += 6
							}
						}
					}
				}
				out = utf8.AppendRune(out, ru)
			default:
				r.i = i - 1
				return "", r.errf("invalid escape \\%c", e)
			}
		case c < 0x80:
			out = append(out, c)
			i++
		default:
			ru, n := utf8.DecodeRune(b[i:])
			if ru == utf8.RuneError && n <= 1 {
				r.i = i
				return "", r.errf("invalid UTF-8 in string")
			}
			out = append(out, b[i:i+n]...)
			i += n
		}
	}
}

func hex4(b []byte, i int) (uint16, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return uint16(v), err == nil
}

// items walks the items of a container: the separators and the end.
type items struct {
	r     *Reader
	close byte // '}' or ']'
	first bool
	done  bool
	err   error
}

// next consumes the separator before the next item; false at the end or
// on an error.
func (it *items) next() bool {
	if it.done || it.err != nil {
		return false
	}
	r := it.r
	r.space()
	if r.i < len(r.b) && r.b[r.i] == it.close {
		r.i++
		it.done = true
		return false
	}
	if !it.first {
		if r.i >= len(r.b) || r.b[r.i] != ',' {
			it.err = r.errf("expected ',' or '%c'", it.close)
			return false
		}
		r.i++
	}
	it.first = false
	return true
}

// Err is the syntax error that ended the walk, if any.
func (it *items) Err() error { return it.err }

// open consumes the opening byte of a container.
func (r *Reader) open(c byte, what string) (items, error) {
	r.space()
	if r.i >= len(r.b) || r.b[r.i] != c {
		return items{}, r.errf("expected %s", what)
	}
	r.i++
	return items{r: r, close: c + 2, first: true}, nil // '{'+2 = '}', '['+2 = ']'
}

// ObjectIter walks the members of an object.
type ObjectIter struct {
	items
	key string
}

// ReadObject consumes '{' and returns an iterator over the members; the
// caller reads each member's value after Next.
func (r *Reader) ReadObject() (*ObjectIter, error) {
	it, err := r.open('{', "an object")
	if err != nil {
		return nil, err
	}
	return &ObjectIter{items: it}, nil
}

// Next moves to the next member; false at '}' or on an error (see Err).
func (it *ObjectIter) Next() bool {
	if !it.next() {
		return false
	}
	r := it.r
	k, err := r.ReadString()
	if err != nil {
		it.err = err
		return false
	}
	r.space()
	if r.i >= len(r.b) || r.b[r.i] != ':' {
		it.err = r.errf("expected ':' after object key")
		return false
	}
	r.i++
	it.key = k
	return true
}

// Key is the current member's name.
func (it *ObjectIter) Key() string { return it.key }

// ArrayIter walks the elements of an array.
type ArrayIter struct {
	items
	n int
}

// ReadArray consumes '[' and returns an iterator over the elements.
func (r *Reader) ReadArray() (*ArrayIter, error) {
	it, err := r.open('[', "an array")
	if err != nil {
		return nil, err
	}
	return &ArrayIter{items: it, n: -1}, nil
}

// Next moves to the next element; false at ']' or on an error.
func (it *ArrayIter) Next() bool {
	if !it.next() {
		return false
	}
	it.n++
	return true
}

// Index is the current element's position.
func (it *ArrayIter) Index() int { return it.n }

// MaxRawDepth bounds the nesting ReadRaw walks.
const MaxRawDepth = 32

// ReadRaw consumes the next value, whatever its kind, and returns its
// bytes (a slice of the input), for a member a caller decodes another
// way. Nesting deeper than MaxRawDepth is an error.
func (r *Reader) ReadRaw() ([]byte, error) {
	r.space()
	start := r.i
	if err := r.skip(0); err != nil {
		return nil, err
	}
	return r.b[start:r.i], nil
}

// skip consumes one value at nesting depth.
func (r *Reader) skip(depth int) error {
	if depth > MaxRawDepth {
		return r.errf("nested deeper than %d", MaxRawDepth)
	}
	var err error
	switch r.Peek() {
	case String:
		_, err = r.ReadString()
	case Number:
		_, err = r.ReadNumber()
	case Bool:
		_, err = r.ReadBool()
	case Null:
		err = r.ReadNull()
	case Object:
		var it *ObjectIter
		if it, err = r.ReadObject(); err != nil {
			return err
		}
		for it.Next() {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		err = it.Err()
	case Array:
		var it *ArrayIter
		if it, err = r.ReadArray(); err != nil {
			return err
		}
		for it.Next() {
			if err := r.skip(depth + 1); err != nil {
				return err
			}
		}
		err = it.Err()
	default:
		err = r.errf("expected a value")
	}
	return err
}
