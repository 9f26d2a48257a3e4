package resource

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
)

// Name is a resource name: "cpu", "memory", "ephemeral-storage" or an
// extended resource "domain/name" such as "nvidia.com/gpu".
type Name string

// The built-in resource names.
const (
	CPU              Name = "cpu"
	Memory           Name = "memory"
	EphemeralStorage Name = "ephemeral-storage"
)

// isDNSSubdomain reports whether s matches
// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$: dot-
// separated labels of lower-case letters, digits and '-', each starting
// and ending with a letter or digit. (Written out: a translated pod's
// every resource name is checked, and the regexps were 1.9 % of
// hetsched kube's CPU in a bench window: BENCHMARKS.md, runs AF.)
func isDNSSubdomain(s string) bool {
	if s == "" {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			if c := label[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// isQualifiedName reports whether s matches
// ^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$.
func isQualifiedName(s string) bool {
	if s == "" || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ValidateName checks a resource name's syntax.
func ValidateName(s string) error {
	switch Name(s) {
	case CPU, Memory, EphemeralStorage:
		return nil
	}
	domain, name, ok := strings.Cut(s, "/")
	if !ok {
		return fmt.Errorf("resource name %q: extended resources are written domain/name (for example nvidia.com/gpu)", errs.Clip(s))
	}
	if len(domain) == 0 || len(domain) > 253 || !isDNSSubdomain(domain) {
		return fmt.Errorf("resource name %q: %q is not a DNS subdomain", errs.Clip(s), errs.Clip(domain))
	}
	if len(name) == 0 || len(name) > 63 || !isQualifiedName(name) {
		return fmt.Errorf("resource name %q: %q must be 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit", errs.Clip(s), errs.Clip(name))
	}
	return nil
}

// HugePagesPrefix starts the names of huge-page resources, one per page
// size ("kubernetes.io/hugepages-2Mi" stands for Kubernetes'
// "hugepages-2Mi"): amounts of memory, in bytes.
const HugePagesPrefix = "kubernetes.io/hugepages-"

// Scale is the canonical unit of a resource: bytes for memory, storage and
// huge pages, milli-units for everything else.
func (n Name) Scale() Scale {
	if n == Memory || n == EphemeralStorage || strings.HasPrefix(string(n), HugePagesPrefix) {
		return Units
	}
	return Milli
}

// IsExtended reports whether n is a domain/name resource (a device type or a
// countable pooled resource).
func (n Name) IsExtended() bool { return strings.Contains(string(n), "/") }

// Format renders a canonical value of this resource for people.
func (n Name) Format(v int64) string {
	if n.Scale() == Units {
		return FormatBytes(v)
	}
	return FormatMilli(v)
}

// List is a sparse resource list in canonical units. It is the API-level
// form; the core works on dense Vectors.
type List map[Name]int64

// maxListLen bounds how many resources one list may name.
const maxListLen = MaxDims

// ParseList parses a map of resource name to quantity (a JSON number or a
// quantity string). Errors name the field as the resource name.
func ParseList(raw map[string]any) (List, error) {
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	return parseEntries(keys, func(k string) (string, error) {
		switch x := raw[k].(type) {
		case string:
			return x, nil
		case json.Number:
			return x.String(), nil
		case float64:
			return fmt.Sprintf("%v", x), nil
		case int:
			return fmt.Sprint(x), nil
		case int64:
			return fmt.Sprint(x), nil
		}
		return "", fmt.Errorf("quantity must be a number or a string like \"500m\" or \"16Gi\", got %T", raw[k])
	})
}

// UnmarshalJSON accepts {"cpu": "500m", "nvidia.com/gpu": 2}.
func (l *List) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return errs.Invalid("", "resources must be an object of name to quantity: %v", err)
	}
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	parsed, err := parseEntries(keys, func(k string) (string, error) {
		text, null, err := RawQuantity(raw[k])
		if err == nil && null {
			err = fmt.Errorf("quantity must be a number or a string, got null")
		}
		return text, err
	})
	if err != nil {
		return err
	}
	*l = parsed
	return nil
}

// Entry is one resource of a list as written: its name and quantity text
// (a string's contents or a number's digits).
type Entry struct{ Name, Text string }

// ParseEntries builds a List from entries read by a streaming decoder;
// errors name the resource, as ParseList's do, and the first one in name
// order is reported. Names must be distinct. es is reordered.
func ParseEntries(es []Entry) (List, error) {
	if len(es) > maxListLen {
		return nil, errs.Invalid("", "at most %d resources may be named, got %d", maxListLen, len(es))
	}
	for i := 1; i < len(es); i++ { // insertion sort: lists are short
		for j := i; j > 0 && es[j].Name < es[j-1].Name; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
	l := make(List, len(es))
	for _, e := range es {
		if err := ValidateName(e.Name); err != nil {
			return nil, errs.Invalid(e.Name, "%v", err)
		}
		q, err := ParseQuantity(e.Text, Name(e.Name).Scale())
		if err != nil {
			return nil, errs.Invalid(e.Name, "%v", err)
		}
		l[Name(e.Name)] = q
	}
	return l, nil
}

// parseEntries builds a List from names and a function giving each name's
// quantity text. Names are taken in sorted order, so that the first error
// reported does not depend on map order; errors name the resource.
func parseEntries(keys []string, text func(name string) (string, error)) (List, error) {
	if len(keys) > maxListLen {
		return nil, errs.Invalid("", "at most %d resources may be named, got %d", maxListLen, len(keys))
	}
	sort.Strings(keys)
	l := make(List, len(keys))
	for _, k := range keys {
		if err := ValidateName(k); err != nil {
			return nil, errs.Invalid(k, "%v", err)
		}
		s, err := text(k)
		if err != nil {
			return nil, errs.Invalid(k, "%v", err)
		}
		q, err := ParseQuantity(s, Name(k).Scale())
		if err != nil {
			return nil, errs.Invalid(k, "%v", err)
		}
		l[Name(k)] = q
	}
	return l, nil
}

// RawQuantity returns the quantity text of one JSON value: a string's
// contents or a number's digits; null reports null.
func RawQuantity(v []byte) (text string, null bool, err error) {
	switch {
	case len(v) > 0 && v[0] == '"':
		if err := json.Unmarshal(v, &text); err != nil {
			return "", false, fmt.Errorf("bad string: %v", err)
		}
		return text, false, nil
	case len(v) > 0 && (v[0] == '-' || (v[0] >= '0' && v[0] <= '9')):
		return string(v), false, nil
	case string(v) == "null":
		return "", true, nil
	}
	return "", false, fmt.Errorf("quantity must be a number or a string like \"500m\" or \"16Gi\", got %s", truncateRaw(v))
}

func truncateRaw(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}

// MarshalJSON writes quantities in their readable form ("500m", "16Gi"),
// keys sorted.
func (l List) MarshalJSON() ([]byte, error) {
	names := make([]string, 0, len(l))
	for k := range l {
		names = append(names, string(k))
	}
	sort.Strings(names)
	for _, k := range names {
		if !plainASCII(k) { // never for validated names; stay correct anyway
			m := make(map[string]string, len(l))
			for n, v := range l {
				m[string(n)] = n.Format(v)
			}
			return json.Marshal(m)
		}
	}
	b := make([]byte, 0, 16*len(l)+2)
	b = append(b, '{')
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, k) // plain ASCII: Go and JSON quoting agree
		b = append(b, ':')
		b = strconv.AppendQuote(b, Name(k).Format(l[Name(k)]))
	}
	return append(b, '}'), nil
}

// String renders the list sorted by name: "cpu=2,memory=4Gi".
func (l List) String() string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(Name(k).Format(l[Name(k)]))
	}
	return b.String()
}

// MaxDims is how many distinct resource names one Dims table holds.
const MaxDims = 16

// Vector is a dense resource vector indexed by a Dims table. Only the first
// Dims.Len() entries are meaningful; the rest are zero.
type Vector [MaxDims]int64

// Dims interns resource names into vector indexes. cpu is 0 and memory is 1.
// A Dims is owned by one core (no global table); it is not safe for
// concurrent mutation.
type Dims struct {
	names []Name
	index map[Name]int
}

// Fixed indexes.
const (
	DimCPU    = 0
	DimMemory = 1
)

// NewDims returns a table holding cpu and memory.
func NewDims() *Dims {
	d := &Dims{index: map[Name]int{}}
	d.names = append(d.names, CPU, Memory)
	d.index[CPU] = DimCPU
	d.index[Memory] = DimMemory
	return d
}

// Len is the number of interned names.
func (d *Dims) Len() int { return len(d.names) }

// Name returns the name at index i.
func (d *Dims) Name(i int) Name { return d.names[i] }

// Lookup returns the index of n.
func (d *Dims) Lookup(n Name) (int, bool) {
	i, ok := d.index[n]
	return i, ok
}

// Intern returns the index of n, adding it if new.
func (d *Dims) Intern(n Name) (int, error) {
	if i, ok := d.index[n]; ok {
		return i, nil
	}
	if len(d.names) == MaxDims {
		return 0, fmt.Errorf("too many distinct resource names: at most %d, adding %q", MaxDims, errs.Clip(string(n)))
	}
	d.names = append(d.names, n)
	d.index[n] = len(d.names) - 1
	return len(d.names) - 1, nil
}

// Vector converts a List, interning new names.
func (d *Dims) Vector(l List) (Vector, error) {
	var v Vector
	// Sorted so that interning order, and thus indexes, is deterministic.
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	// Check room first, so that a rejected list interns none of its names.
	room := MaxDims - len(d.names)
	for _, k := range keys {
		if _, ok := d.index[Name(k)]; ok {
			continue
		}
		if room == 0 {
			return v, errs.Invalid(k, "too many distinct resource names: at most %d, adding %q", MaxDims, k)
		}
		room--
	}
	for _, k := range keys {
		i, err := d.Intern(Name(k))
		if err != nil {
			return v, errs.Invalid(k, "%v", err)
		}
		v[i] = l[Name(k)]
	}
	return v, nil
}

// List converts v back to a sparse List (zero entries omitted).
func (d *Dims) List(v *Vector) List {
	l := List{}
	for i := 0; i < len(d.names); i++ {
		if v[i] != 0 {
			l[d.names[i]] = v[i]
		}
	}
	return l
}

// Add sets v += o.
func (v *Vector) Add(o *Vector) {
	for i := range v {
		v[i] += o[i]
	}
}

// Sub sets v -= o.
func (v *Vector) Sub(o *Vector) {
	for i := range v {
		v[i] -= o[i]
	}
}

// Fits reports whether req fits in free: req[i] <= free[i] for every i.
func (v *Vector) Fits(free *Vector) bool {
	for i := range v {
		if v[i] > free[i] {
			return false
		}
	}
	return true
}

// FirstShort returns the first index where v exceeds free, or -1.
func (v *Vector) FirstShort(free *Vector) int {
	for i := range v {
		if v[i] > free[i] {
			return i
		}
	}
	return -1
}

// IsZero reports whether every entry is zero.
func (v *Vector) IsZero() bool { return *v == Vector{} }

// NonNegative reports whether every entry is >= 0.
func (v *Vector) NonNegative() bool {
	for i := range v {
		if v[i] < 0 {
			return false
		}
	}
	return true
}

// Format renders v with d's names: "cpu=2,nvidia.com/gpu=1".
func (d *Dims) Format(v *Vector) string { return d.List(v).String() }

// plainASCII reports whether s needs no escaping in JSON or Go quoting.
func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
