package api

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A Selector is a label selector in kubectl's syntax: comma-separated
// requirements, all of which must hold:
//
//	k=v, k==v   the label k is v
//	k!=v        k is not v (or absent)
//	k           k is present
//	!k          k is absent
//	k in (a,b)  k is one of the values
//	k notin (a,b) k is none of them (or absent)
//	k>N, k<N    k is an integer greater (less) than the integer N, as in
//	            Kubernetes' node affinity Gt and Lt
//
// The empty selector matches everything.
type Selector struct {
	reqs []requirement
}

type selectorOp int

const (
	opIn selectorOp = iota // = and == are in with one value
	opNotIn
	opExists
	opNotExists
	opGt
	opLt
)

type requirement struct {
	key    string
	op     selectorOp
	values []string
	n      int64 // opGt, opLt
}

// Bounds of a selector (it comes from a query string).
const (
	MaxSelectorLen   = 4096
	MaxSelectorTerms = 64
)

// ParseSelector reads a label selector; an error says what is wrong
// where (the caller names the field).
func ParseSelector(s string) (Selector, error) {
	if len(s) > MaxSelectorLen {
		return Selector{}, fmt.Errorf("longer than %d bytes", MaxSelectorLen)
	}
	var sel Selector
	for rest := strings.TrimSpace(s); rest != ""; {
		if len(sel.reqs) == MaxSelectorTerms {
			return Selector{}, fmt.Errorf("more than %d requirements", MaxSelectorTerms)
		}
		term, tail, err := nextTerm(rest)
		if err != nil {
			return Selector{}, err
		}
		r, err := parseRequirement(term)
		if err != nil {
			return Selector{}, err
		}
		sel.reqs = append(sel.reqs, r)
		rest = tail
	}
	return sel, nil
}

// nextTerm splits off the first requirement: up to a comma outside
// parentheses.
func nextTerm(s string) (term, rest string, err error) {
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
			if depth > 1 {
				return "", "", fmt.Errorf("nested parentheses in %q", s)
			}
		case ')':
			depth--
			if depth < 0 {
				return "", "", fmt.Errorf("unmatched ')' in %q", s)
			}
		case ',':
			if depth == 0 {
				term, rest = strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
				if term == "" || rest == "" {
					return "", "", fmt.Errorf("empty requirement in %q", s)
				}
				return term, rest, nil
			}
		}
	}
	if depth != 0 {
		return "", "", fmt.Errorf("unclosed '(' in %q", s)
	}
	return strings.TrimSpace(s), "", nil
}

func parseRequirement(t string) (requirement, error) {
	if i := strings.IndexAny(t, "<>"); i >= 0 {
		k, v, op := strings.TrimSpace(t[:i]), strings.TrimSpace(t[i+1:]), opGt
		if t[i] == '<' {
			op = opLt
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return requirement{}, fmt.Errorf("%q: %s compares with an integer, got %q", t, t[i:i+1], truncate(v))
		}
		return requirement{key: k, op: op, n: n}, checkSelectorKey(k)
	}
	if k, ok := strings.CutPrefix(t, "!"); ok {
		k = strings.TrimSpace(k)
		return requirement{key: k, op: opNotExists}, checkSelectorKey(k)
	}
	if i := strings.IndexAny(t, "=!"); i >= 0 {
		k, v, op := strings.TrimSpace(t[:i]), t[i+1:], opIn
		switch {
		case t[i] == '!':
			var ok bool
			if v, ok = strings.CutPrefix(v, "="); !ok {
				return requirement{}, fmt.Errorf("%q: '!' must start a key or make '!='", t)
			}
			op = opNotIn
		default:
			v, _ = strings.CutPrefix(v, "=")
		}
		v = strings.TrimSpace(v)
		if err := checkSelectorKey(k); err != nil {
			return requirement{}, err
		}
		if err := checkSelectorValue(v); err != nil {
			return requirement{}, fmt.Errorf("%q: %w", t, err)
		}
		return requirement{key: k, op: op, values: []string{v}}, nil
	}
	if k, set, ok := strings.Cut(t, " "); ok {
		set = strings.TrimSpace(set)
		op := opIn
		switch {
		case strings.HasPrefix(set, "in"):
			set = strings.TrimSpace(set[2:])
		case strings.HasPrefix(set, "notin"):
			set, op = strings.TrimSpace(set[5:]), opNotIn
		default:
			return requirement{}, fmt.Errorf("%q: want key=value, key!=value, key, !key, key in (a,b) or key notin (a,b)", t)
		}
		inner, ok := strings.CutPrefix(set, "(")
		if inner, ok2 := strings.CutSuffix(inner, ")"); ok && ok2 {
			var vals []string
			for _, v := range strings.Split(inner, ",") {
				v = strings.TrimSpace(v)
				if err := checkSelectorValue(v); err != nil {
					return requirement{}, fmt.Errorf("%q: %w", t, err)
				}
				vals = append(vals, v)
			}
			return requirement{key: k, op: op, values: vals}, checkSelectorKey(k)
		}
		return requirement{}, fmt.Errorf("%q: the values of in and notin go in parentheses: key in (a,b)", t)
	}
	return requirement{key: t, op: opExists}, checkSelectorKey(t)
}

func checkSelectorKey(k string) error {
	if k == "" {
		return fmt.Errorf("a requirement has no key")
	}
	if err := ValidateLabelKey(k); err != nil {
		return err
	}
	return nil
}

func checkSelectorValue(v string) error {
	if len(v) > 256 {
		return fmt.Errorf("value longer than 256 bytes")
	}
	if strings.ContainsAny(v, "=!()<> \t") || hasControl(v) {
		return fmt.Errorf("value %q holds a character a selector cannot match ('=', '!', '<', '>', parentheses, spaces or control characters)", truncate(v))
	}
	return nil
}

func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return true
		}
	}
	return false
}

// Empty reports whether the selector matches everything.
func (s Selector) Empty() bool { return len(s.reqs) == 0 }

// Matches reports whether labels satisfy every requirement; get reads a
// label (and whether it is set).
func (s Selector) Matches(get func(key string) (string, bool)) bool {
	for _, r := range s.reqs {
		v, ok := get(r.key)
		switch r.op {
		case opExists:
			if !ok {
				return false
			}
		case opNotExists:
			if ok {
				return false
			}
		case opIn:
			if !ok || !slices.Contains(r.values, v) {
				return false
			}
		case opNotIn:
			if ok && slices.Contains(r.values, v) {
				return false
			}
		case opGt, opLt:
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil || r.op == opGt && n <= r.n || r.op == opLt && n >= r.n {
				return false
			}
		}
	}
	return true
}

// Keys lists the label keys the selector reads.
func (s Selector) Keys() []string {
	out := make([]string, len(s.reqs))
	for i, r := range s.reqs {
		out[i] = r.key
	}
	return out
}

// MatchesMap is Matches over a map.
func (s Selector) MatchesMap(m map[string]string) bool {
	return s.Matches(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
}

// Equality returns the first requirement that names the values a
// matching label must have (k=v, k in (a,b)): the key and its values, for
// an index of selectors by label. ok is false for a selector without one
// (only !=, notin, exists, !k, > or <), which matches labels no index by
// value finds.
func (s Selector) Equality() (key string, values []string, ok bool) {
	for _, r := range s.reqs {
		if r.op == opIn {
			return r.key, r.values, true
		}
	}
	return "", nil, false
}
