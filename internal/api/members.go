package api

import (
	"strconv"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/jsonread"
)

// The object readers (taskjson.go) share one table-driven shape: a kind
// of object is its members' names (members) and a memberReader, and
// readInto reads one such object member by member, so that each reader
// says only what each member is. readList reads a list of them (or
// of strings).

// members are the member names of one kind of JSON object, at most 64.
type members struct {
	names  []string
	dotted []string       // "." + each name: a member's path is its object's path + dotted
	index  map[string]int // for more than smallMembers names; nil: names is scanned
}

// smallMembers is the most names looked up by a scan: a few string
// compares cost less than hashing the key.
const smallMembers = 8

func newMembers(names ...string) members {
	if len(names) > 64 {
		panic("api: an object kind of more than 64 members")
	}
	m := members{names: names, dotted: make([]string, len(names))}
	for i, n := range names {
		m.dotted[i] = "." + n
	}
	if len(names) > smallMembers {
		m.index = make(map[string]int, len(names))
		for i, n := range names {
			m.index[n] = i
		}
	}
	return m
}

// lookup is k's index among the names, ok false when k is none of them.
func (m *members) lookup(k string) (int, bool) {
	if m.index != nil {
		i, ok := m.index[k]
		return i, ok
	}
	for i, n := range m.names {
		if n == k {
			return i, true
		}
	}
	return 0, false
}

// memberReader reads member k of an object into v, at path; it is
// called only for known members.
type memberReader[T any] func(r *jsonread.Reader, v *T, k, path string) error

// readInto reads the object at field (its path, "" for a top-level
// object) into v: a null is absent (ok false, no error); another type is
// refused naming want; each member goes to read with its name and its
// path, once (a second time is "given twice"); an unknown member is
// refused with the closest known name.
func readInto[T any](r *jsonread.Reader, field, want string, m *members, v *T, read memberReader[T]) (ok bool, err error) {
	obj, err := openObject(r, field, want)
	if obj == nil {
		return false, err
	}
	var seen uint64
	for obj.Next() {
		k := obj.Key()
		path, err := m.take(&seen, field, k)
		if err == nil {
			err = read(r, v, k, path)
		}
		if err != nil {
			return false, err
		}
	}
	if err := obj.Err(); err != nil {
		return false, syntax(field, err)
	}
	return true, nil
}

// take checks member k of the object at field (its path, "" for a
// top-level object): known, and not given before (seen holds the members
// given so far); it returns the member's path.
func (m *members) take(seen *uint64, field, k string) (string, error) {
	i, known := m.lookup(k)
	if !known {
		return "", UnknownField(joinField(field, truncate(k)), k, m.names)
	}
	path := k
	if field != "" {
		path = field + m.dotted[i]
	}
	if *seen&(1<<i) != 0 {
		return "", errs.Invalid(path, "given twice")
	}
	*seen |= 1 << i
	return path, nil
}

// readNew reads the object at field into a new T, nil for a null.
func readNew[T any](r *jsonread.Reader, field string, m *members, read memberReader[T]) (*T, error) {
	v := new(T)
	if ok, err := readInto(r, field, "an object", m, v, read); !ok {
		return nil, err
	}
	return v, nil
}

// readValue reads the object at field into a T, the zero T for a null.
func readValue[T any](r *jsonread.Reader, field string, m *members, read memberReader[T]) (T, error) {
	var v T
	_, err := readInto(r, field, "an object", m, &v, read)
	return v, err
}

// joinField is member k's path inside field.
func joinField(field, k string) string {
	if field == "" {
		return k
	}
	return field + "." + k
}

// readList reads a list at field of at most max elements (what names
// them in the error), each with read at its path (field[i]); a null list
// is nil, another type is refused naming want.
func readList[T any](r *jsonread.Reader, field, want, what string, max int, read func(r *jsonread.Reader, path string) (T, error)) ([]T, error) {
	arr, err := openArray(r, field, want)
	if arr == nil {
		return nil, err
	}
	out := []T{}
	for arr.Next() {
		if len(out) >= max {
			return nil, errs.Invalid(field, "at most %d %s", max, what)
		}
		v, err := read(r, field+"["+strconv.Itoa(arr.Index())+"]")
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := arr.Err(); err != nil {
		return nil, syntax(field, err)
	}
	return out, nil
}
