package api

import (
	"strconv"

	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/jsonread"
)

// The object readers (taskjson.go) share one table-driven shape: a kind
// of object is its members' names (members), and readObject reads one
// such object member by member, so that each reader says only what each
// member is. readObjects reads a list of them.

// members are the member names of one kind of JSON object, at most 64.
type members struct {
	names []string
	index map[string]int
}

func newMembers(names ...string) members {
	if len(names) > 64 {
		panic("api: an object kind of more than 64 members")
	}
	m := members{names: names, index: make(map[string]int, len(names))}
	for i, n := range names {
		m.index[n] = i
	}
	return m
}

// readObject reads the object at field (its path, "" for a top-level
// object): a null is absent (ok false, no error); another type is refused
// naming want; each member goes to read with its name and its path, once
// (a second time is "given twice"); an unknown member is refused with the
// closest known name. read is called only for known members.
func (m *members) readObject(r *jsonread.Reader, field, want string, read func(k, path string) error) (ok bool, err error) {
	obj, err := openObject(r, field, want)
	if obj == nil {
		return false, err
	}
	var seen uint64
	for obj.Next() {
		k := obj.Key()
		i, known := m.index[k]
		if !known {
			return false, UnknownField(joinField(field, truncate(k)), k, m.names)
		}
		if seen&(1<<i) != 0 {
			return false, errs.Invalid(joinField(field, k), "given twice")
		}
		seen |= 1 << i
		if err := read(k, joinField(field, k)); err != nil {
			return false, err
		}
	}
	if err := obj.Err(); err != nil {
		return false, syntax(field, err)
	}
	return true, nil
}

// readNew reads the object at field into a new T, nil for a null; read
// sets member k of v.
func readNew[T any](r *jsonread.Reader, field string, m *members, read func(v *T, k, path string) error) (*T, error) {
	v := new(T)
	ok, err := m.readObject(r, field, "an object", func(k, path string) error { return read(v, k, path) })
	if !ok {
		return nil, err
	}
	return v, nil
}

// joinField is member k's path inside field.
func joinField(field, k string) string {
	if field == "" {
		return k
	}
	return field + "." + k
}

// readObjects reads a list at field of at most max elements (what names
// them in the error), each with read at its path (field[i]); a null list
// is nil, another type is refused naming want.
func readObjects[T any](r *jsonread.Reader, field, want, what string, max int, read func(path string) (T, error)) ([]T, error) {
	if null(r) {
		return nil, nil
	}
	if r.Peek() != jsonread.Array {
		return nil, wrongType(r, field, want)
	}
	arr, err := r.ReadArray()
	if err != nil {
		return nil, syntax(field, err)
	}
	out := []T{}
	for arr.Next() {
		if len(out) >= max {
			return nil, errs.Invalid(field, "at most %d %s", max, what)
		}
		v, err := read(field + "[" + strconv.Itoa(arr.Index()) + "]")
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
