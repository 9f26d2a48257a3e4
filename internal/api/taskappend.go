package api

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/resource"
)

// AppendJSON appends t's JSON encoding to b: byte for byte what
// json.Marshal(t) writes, built by hand for the fields of ordinary tasks
// (it runs for every submitted task and every task in a response). A task
// with alternatives, a locality or inputs, or a string that encoding/json
// would escape, is handed to json.Marshal.
func (t *Task) AppendJSON(b []byte) ([]byte, error) {
	start := len(b)
	if out, ok := t.appendFast(b); ok {
		return out, nil
	}
	j, err := json.Marshal(t)
	if err != nil {
		return b[:start], err
	}
	return append(b[:start], j...), nil
}

// appendFast is AppendJSON's hand-written path; false means "use
// encoding/json" (what it appended is then to be dropped).
func (t *Task) appendFast(b []byte) ([]byte, bool) {
	if len(t.Alternatives) > 0 || t.Locality != nil || len(t.Inputs) > 0 || t.Service != "" ||
		t.Liveness != nil || t.Readiness != nil || t.Startup != nil {
		return b, false
	}
	ok := true
	b = append(b, '{')
	first := true
	key := func(k string) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = append(b, '"')
		b = append(b, k...)
		b = append(b, '"', ':')
	}
	str := func(k, v string) {
		if v != "" {
			key(k)
			b, ok = appendPlainString(b, v, ok)
		}
	}
	strs := func(k string, v []string) {
		if len(v) == 0 {
			return
		}
		key(k)
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b, ok = appendPlainString(b, s, ok)
		}
		b = append(b, ']')
	}
	strMap := func(k string, m map[string]string) {
		if len(m) == 0 {
			return
		}
		key(k)
		b, ok = appendStringMap(b, m, ok)
	}
	dur := func(k string, d Duration) {
		switch {
		case d == NoExpiry:
			key(k)
			b, ok = appendPlainString(b, "never", ok)
		case d != 0:
			key(k)
			b, ok = appendPlainString(b, time.Duration(d).String(), ok)
		}
	}
	boolPtr := func(k string, v *bool) {
		if v != nil {
			key(k)
			b = strconv.AppendBool(b, *v)
		}
	}
	str("id", t.ID)
	str("name", t.Name)
	str("queue", t.Queue)
	str("user", t.User)
	if t.Priority != nil {
		key("priority")
		b = strconv.AppendInt(b, int64(*t.Priority), 10)
	}
	if len(t.Resources) > 0 {
		key("resources")
		b, ok = appendResources(b, t.Resources, ok)
	}
	strMap("deviceClasses", t.DeviceClasses)
	strMap("nodeSelector", t.NodeSelector)
	strs("nodeAffinity", t.NodeAffinity)
	strs("tolerations", t.Tolerations)
	strs("command", t.Command)
	strMap("env", t.Env)
	dur("duration", t.Duration)
	dur("timeout", t.Timeout)
	dur("queueTimeout", t.QueueTimeout)
	dur("lease", t.Lease)
	strs("depends", t.Depends)
	boolPtr("preemptible", t.Preemptible)
	boolPtr("requeue", t.Requeue)
	dur("localityWait", t.LocalityWait)
	if t.Shards != 0 {
		key("shards")
		b = strconv.AppendInt(b, int64(t.Shards), 10)
	}
	strMap("metadata", t.Metadata)
	// The placement constraints, rare and nested, through encoding/json.
	for _, m := range []struct {
		name string
		v    any
		set  bool
	}{
		{"hostPorts", t.HostPorts, len(t.HostPorts) > 0},
		{"affinity", t.Affinity, len(t.Affinity) > 0},
		{"antiAffinity", t.AntiAffinity, len(t.AntiAffinity) > 0},
		{"spread", t.Spread, len(t.Spread) > 0},
		{"preferredNodeAffinity", t.PreferredNodeAffinity, len(t.PreferredNodeAffinity) > 0},
	} {
		if m.set {
			key(m.name)
			v, err := json.Marshal(m.v)
			if err != nil {
				return b, false
			}
			b = append(b, v...)
		}
	}
	str("preemptionPolicy", t.PreemptionPolicy)
	if t.PriorityValue != 0 {
		key("priorityValue")
		b = strconv.AppendInt(b, int64(t.PriorityValue), 10)
	}
	if c := t.Checkpoint; c != nil {
		key("checkpoint")
		b = append(b, '{')
		first = true // the members of the nested object
		str("signal", c.Signal)
		dur("grace", c.Grace)
		str("dir", c.Dir)
		b = append(b, '}')
		first = false
	}
	return append(b, '}'), ok
}

// plainByte reports whether encoding/json writes byte c of a string as
// itself (printable ASCII that is neither a quote, a backslash nor one of
// the HTML characters it escapes).
func plainByte(c byte) bool {
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
}

// appendPlainString appends s quoted when every byte is plain; otherwise it
// reports false (ok is carried through, so a false stays false).
func appendPlainString(b []byte, s string, ok bool) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if !plainByte(s[i]) {
			return b, false
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"'), ok
}

// AppendJSONString appends s exactly as encoding/json writes a string:
// plain strings by hand, any other through json.Marshal.
func AppendJSONString(b []byte, s string) []byte {
	if out, ok := appendPlainString(b, s, true); ok {
		return out
	}
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

// appendResources appends what resource.List.MarshalJSON writes (names
// sorted, quantities in their readable form), which encoding/json copies
// as it is when every byte is plain.
func appendResources(b []byte, l resource.List, ok bool) ([]byte, bool) {
	var buf [8]string
	names := buf[:0]
	for n := range l {
		names = append(names, string(n))
	}
	sortStrings(names)
	b = append(b, '{')
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b, ok = appendPlainString(b, n, ok)
		b = append(b, ':')
		b, ok = appendPlainString(b, resource.Name(n).Format(l[resource.Name(n)]), ok)
	}
	return append(b, '}'), ok
}

// appendStringMap appends m with its keys sorted, as encoding/json does.
func appendStringMap(b []byte, m map[string]string, ok bool) ([]byte, bool) {
	var buf [8]string
	keys := buf[:0]
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b, ok = appendPlainString(b, k, ok)
		b = append(b, ':')
		b, ok = appendPlainString(b, m[k], ok)
	}
	return append(b, '}'), ok
}

// sortStrings sorts s; a few strings (the usual case) by insertion, in
// this frame: on HTTP/2 every response is written on a fresh goroutine,
// whose small stack the deeper generic sort had to grow by copying.
func sortStrings(s []string) {
	if len(s) > 12 {
		slices.Sort(s)
		return
	}
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
