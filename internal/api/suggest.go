package api

import (
	"reflect"
	"sort"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
)

// UnknownField is the error for an unknown member k at field (a dotted
// path ending in k), with a "did you mean" when a known member is within
// two edits of it or differs only in case.
func UnknownField(field, k string, known []string) error {
	if s := Suggest(k, known); s != "" {
		return errs.Invalid(field, "unknown field; did you mean %q?", s)
	}
	return errs.Invalid(field, "unknown field")
}

// Suggest returns the known name closest to k, if one is within two edits
// (or equal ignoring case); "" otherwise. Long names are not compared.
func Suggest(k string, known []string) string {
	if len(k) > 64 {
		return ""
	}
	best, bestD := "", 3
	for _, n := range known {
		if strings.EqualFold(n, k) {
			return n
		}
		if d := editDistance(k, n, bestD); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, or limit when it
// is limit or more (it stops early).
func editDistance(a, b string, limit int) int {
	if d := len(a) - len(b); d >= limit || -d >= limit {
		return limit
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		rowMin := cur[0]
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			rowMin = min(rowMin, cur[j])
		}
		if rowMin >= limit {
			return limit
		}
		prev, cur = cur, prev
	}
	return min(prev[len(b)], limit)
}

// JSONFields lists the JSON member names of a struct type (embedded
// structs' included), for UnknownField.
func JSONFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case name == "-":
			case f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct:
				walk(f.Type)
			case name != "":
				out = append(out, name)
			case f.IsExported():
				out = append(out, f.Name)
			}
		}
	}
	if t.Kind() == reflect.Struct {
		walk(t)
	}
	sort.Strings(out)
	return out
}
