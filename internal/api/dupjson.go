package api

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
)

// CheckDuplicates reports a member given twice in the JSON value b, which
// is to be decoded into v (a pointer to the Go value, as for
// json.Unmarshal): encoding/json keeps the last of them, where every
// decoder of API.md refuses it, as ReadTask does. The error is an
// *errs.Error on the member's path ("name", "devices[1].memory",
// "labels.zone", "tasks[0].id").
//
// Members of a struct are matched as encoding/json matches them (the
// field's name, then the same name in another case), so "name" and "Name"
// are the same member; keys of a map are compared exactly.
//
// Call it on input that decoded: malformed JSON is the decoder's to
// report (the walk stops at the first syntax error, having reported only
// a repeat it met before it). The walk keeps its own stack (no recursion)
// and stops past encoding/json's nesting limit, which decoding enforces.
func CheckDuplicates(b []byte, v any) error {
	type frame struct {
		t       reflect.Type    // what the value fills: a struct, a map, a slice; nil: unknown
		obj     bool            // an object (else an array)
		path    string          // the value's own path
		seen    map[string]bool // members so far (struct members by field name)
		wantKey bool            // an object's next token is a key (or its end)
		key     string          // the member whose value is next, as its path names it
		vt      reflect.Type    // that member's type
		n       int             // an array's next index
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var stack []frame
	fields := map[reflect.Type][]jsonField{} // struct members, by type, for this call
	root := reflect.TypeOf(v)
	for {
		if n := len(stack); n > 0 && rawNext(dec, &stack[n-1].obj, &stack[n-1].wantKey, stack[n-1].vt, stack[n-1].t) {
			// A json.RawMessage is decoded by its own decoder, which
			// checks its members: skip it whole (the scanner is far
			// faster than Token, and a job's tasks are most of its body).
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return nil
			}
			if top := &stack[n-1]; top.obj {
				top.wantKey = true
			} else {
				top.n++
			}
			continue
		}
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if n := len(stack); n > 0 && stack[n-1].obj && stack[n-1].wantKey {
			top := &stack[n-1]
			k, ok := tok.(string)
			if !ok { // the object's end
				if stack = stack[:n-1]; len(stack) == 0 {
					return nil
				}
				continue
			}
			name, ft := memberOf(top.t, k, fields)
			if top.seen == nil {
				top.seen = map[string]bool{}
			}
			if top.seen[name] {
				return errs.Invalid(joinPath(top.path, truncate(name)), "given twice")
			}
			top.seen[name] = true
			top.key, top.vt, top.wantKey = truncate(name), ft, false
			continue
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') { // an array's end
			if stack = stack[:len(stack)-1]; len(stack) == 0 {
				return nil
			}
			continue
		}
		// A value: a scalar, or an object or array that opens here.
		d, opens := tok.(json.Delim)
		path, vt := "", root
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			if top.obj {
				vt, top.wantKey = top.vt, true
				if opens {
					path = joinPath(top.path, top.key)
				}
			} else {
				vt = elemOf(top.t)
				if opens {
					path = top.path + "[" + strconv.Itoa(top.n) + "]"
				}
				top.n++
			}
		}
		switch {
		case !opens && len(stack) == 0:
			return nil
		case !opens:
		case len(stack) >= maxJSONDepth:
			return nil
		default:
			stack = append(stack, frame{t: deref(vt), obj: d == '{', path: path, wantKey: d == '{'})
		}
	}
}

var rawMessage = reflect.TypeFor[json.RawMessage]()

// rawNext reports whether the next value in the open object or array
// fills a json.RawMessage: an object's member value (its key read), or an
// element of an array of them.
func rawNext(dec *json.Decoder, obj, wantKey *bool, vt, t reflect.Type) bool {
	if *obj {
		return !*wantKey && vt == rawMessage
	}
	return elemOf(t) == rawMessage && dec.More()
}

// maxJSONDepth is encoding/json's nesting limit.
const maxJSONDepth = 10000

func joinPath(parent, k string) string {
	if parent == "" {
		return k
	}
	return parent + "." + k
}

func deref(t reflect.Type) reflect.Type {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// elemOf is the type of an array's elements.
func elemOf(t reflect.Type) reflect.Type {
	if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
		return t.Elem()
	}
	return nil
}

// memberOf resolves member k of an object filling t: for a struct, the
// field's JSON name and type, found as encoding/json finds it; for a map,
// k itself and the element type; otherwise k and nil. cache holds the
// structs' members listed so far.
func memberOf(t reflect.Type, k string, cache map[reflect.Type][]jsonField) (string, reflect.Type) {
	if t == nil {
		return k, nil
	}
	switch t.Kind() {
	case reflect.Map:
		return k, t.Elem()
	case reflect.Struct:
		fs, ok := cache[t]
		if !ok {
			fs = jsonFieldsOf(t)
			cache[t] = fs
		}
		for _, f := range fs {
			if f.name == k {
				return f.name, f.t
			}
		}
		for _, f := range fs {
			if strings.EqualFold(f.name, k) {
				return f.name, f.t
			}
		}
	}
	return k, nil
}

type jsonField struct {
	name string
	t    reflect.Type
}

// jsonFieldsOf lists the JSON members of struct t, those of embedded
// structs after t's own (a shallower field hides a deeper one).
func jsonFieldsOf(t reflect.Type) []jsonField {
	var out []jsonField
	level := []reflect.Type{t}
	for depth := 0; len(level) > 0 && depth < 8; depth++ {
		var next []reflect.Type
		for _, st := range level {
			for i := 0; i < st.NumField(); i++ {
				f := st.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				switch {
				case name == "-":
				case f.Anonymous && name == "" && deref(f.Type).Kind() == reflect.Struct:
					next = append(next, deref(f.Type))
				case !f.IsExported():
				default:
					if name == "" {
						name = f.Name
					}
					out = append(out, jsonField{name, f.Type})
				}
			}
		}
		level = next
	}
	// A deeper field of the same name is hidden by the first one listed.
	seen := map[string]bool{}
	kept := out[:0]
	for _, f := range out {
		if !seen[f.name] {
			seen[f.name] = true
			kept = append(kept, f)
		}
	}
	return kept
}
