package jsonread

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestStrings(t *testing.T) {
	for _, in := range []string{
		`"plain"`, `""`, `"a\"b\\c\/d"`, `"\b\f\n\r\t"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00"`,
		`"\ud800"`, `"\ud800x"`, `"\udc00\ud800"`, `"é中😀"`, `"<&>"`,
	} {
		r := New([]byte(in))
		got, err := r.ReadString()
		if err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		var want string
		if err := json.Unmarshal([]byte(in), &want); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: got %q, encoding/json %q", in, got, want)
		}
		if err := r.Finish(); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
	for _, in := range []string{`"open`, `"bad \x"`, "\"ctl \x01\"", "\"\xff\"", `"\u12"`, `x`, `"\`} {
		_, err := New([]byte(in)).ReadString()
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: want a syntax error, got %v", in, err)
		}
	}
}

func TestNumbers(t *testing.T) {
	for _, in := range []string{`0`, `-0`, `12`, `1.5`, `-1e3`, `2E+10`, `3e-2`} {
		got, err := New([]byte(in)).ReadNumber()
		if err != nil || got != in {
			t.Errorf("%s: got %q, %v", in, got, err)
		}
	}
	for _, in := range []string{`01x`, `-`, `1.`, `1e`, `.5`, `+1`, `1e+`} {
		r := New([]byte(in))
		n, err := r.ReadNumber()
		if err == nil {
			err = r.Finish()
		}
		if err == nil {
			t.Errorf("%s: accepted as %q", in, n)
		}
	}
}

func TestContainers(t *testing.T) {
	r := New([]byte(` { "a" : [1, 2 ,3], "b": {}, "c": true, "d": null } `))
	obj, err := r.ReadObject()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	sum := 0
	for obj.Next() {
		keys = append(keys, obj.Key())
		switch r.Peek() {
		case Array:
			arr, _ := r.ReadArray()
			for arr.Next() {
				n, err := r.ReadNumber()
				if err != nil {
					t.Fatal(err)
				}
				sum += int(n[0] - '0')
			}
			if arr.Err() != nil {
				t.Fatal(arr.Err())
			}
		case Object:
			o, _ := r.ReadObject()
			if o.Next() || o.Err() != nil {
				t.Fatal("empty object")
			}
		case Bool:
			if v, err := r.ReadBool(); !v || err != nil {
				t.Fatal("bool")
			}
		case Null:
			if err := r.ReadNull(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if obj.Err() != nil || r.Finish() != nil {
		t.Fatal(obj.Err(), r.Finish())
	}
	if len(keys) != 4 || sum != 6 {
		t.Fatalf("keys %v sum %d", keys, sum)
	}
	for _, in := range []string{`{"a" 1}`, `{"a":1 "b":2}`, `{"a":1,}`, `{1:2}`, `{"a":1`, `{"a":1}}`} {
		if err := walkNumbers(New([]byte(in)), true); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
	for _, in := range []string{`[1 2]`, `[1,]`, `[1`, `[1]]`} {
		if err := walkNumbers(New([]byte(in)), false); err == nil {
			t.Errorf("%s: no error", in)
		}
	}
	if err := walkNumbers(New([]byte(`{"a":1,"b":2}`)), true); err != nil {
		t.Error(err)
	}
}

// walkNumbers reads an object or array of numbers and the end of input,
// returning the first error.
func walkNumbers(r *Reader, object bool) error {
	var next func() bool
	var iterErr func() error
	if object {
		obj, err := r.ReadObject()
		if err != nil {
			return err
		}
		next, iterErr = obj.Next, obj.Err
	} else {
		arr, err := r.ReadArray()
		if err != nil {
			return err
		}
		next, iterErr = arr.Next, arr.Err
	}
	for next() {
		if _, err := r.ReadNumber(); err != nil {
			return err
		}
	}
	if err := iterErr(); err != nil {
		return err
	}
	return r.Finish()
}

// TestReadRaw: the bytes of one value of any kind, the reader left after
// it; too deep a nesting and bad values are errors.
func TestReadRaw(t *testing.T) {
	for _, c := range []struct{ in, want, rest string }{
		{`"a\"b" ,1`, `"a\"b"`, ` ,1`},
		{` -1.5e3]`, `-1.5e3`, `]`},
		{`true,`, `true`, `,`},
		{`null`, `null`, ``},
		{`{"a":[1,{"b":null}],"c":"}"} x`, `{"a":[1,{"b":null}],"c":"}"}`, ` x`},
		{`[]`, `[]`, ``},
	} {
		r := New([]byte(c.in))
		got, err := r.ReadRaw()
		if err != nil || string(got) != c.want || c.in[r.Offset():] != c.rest {
			t.Errorf("ReadRaw(%q) = %q, %v, rest %q; want %q, rest %q", c.in, got, err, c.in[r.Offset():], c.want, c.rest)
		}
	}
	deep := strings.Repeat("[", MaxRawDepth+2) + strings.Repeat("]", MaxRawDepth+2)
	for _, in := range []string{deep, `{"a":}`, `[1,]`, `x`, `"open`, ``} {
		if got, err := New([]byte(in)).ReadRaw(); err == nil {
			t.Errorf("ReadRaw(%q) = %q, want an error", in, got)
		}
	}
}
