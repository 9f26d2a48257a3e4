package resource

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"

	"github.com/hetsched/hetsched/internal/errs"
)

func TestValidateName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"cpu", true},
		{"memory", true},
		{"ephemeral-storage", true},
		{"nvidia.com/gpu", true},
		{"google.com/tpu", true},
		{"example.com/a_b.c", true},
		{"amd.com/GPU", true},
		{"a/b", true},
		{"example.com/" + strings.Repeat("x", 63), true},

		{"", false},
		{"gpu", false},
		{"CPU", false},
		{"/gpu", false},
		{"nvidia.com/", false},
		{"Nvidia.com/gpu", false},
		{"a/b/c", false},
		{"nvidia.com/-x", false},
		{"nvidia.com/x-", false},
		{"nvidia.com/_x", false},
		{"-nvidia.com/gpu", false},
		{"nvidia..com/gpu", false},
		{"nvidia.com./gpu", false},
		{"nvidia_x.com/gpu", false},
		{"nvidia.com/g pu", false},
		{"example.com/" + strings.Repeat("x", 64), false},
		{strings.Repeat("a", 254) + "/gpu", false},
	} {
		err := ValidateName(c.name)
		if c.ok && err != nil {
			t.Errorf("ValidateName(%q) = %v, want nil", c.name, err)
		}
		if !c.ok && err == nil {
			t.Errorf("ValidateName(%q) = nil, want an error", c.name)
		}
	}
}

func TestNameScale(t *testing.T) {
	for _, c := range []struct {
		n        Name
		scale    Scale
		extended bool
	}{
		{CPU, Milli, false},
		{Memory, Units, false},
		{EphemeralStorage, Units, false},
		{"nvidia.com/gpu", Milli, true},
	} {
		if got := c.n.Scale(); got != c.scale {
			t.Errorf("%s.Scale() = %v, want %v", c.n, got, c.scale)
		}
		if got := c.n.IsExtended(); got != c.extended {
			t.Errorf("%s.IsExtended() = %v, want %v", c.n, got, c.extended)
		}
	}
}

func TestParseList(t *testing.T) {
	got, err := ParseList(map[string]any{
		"cpu":               "500m",
		"memory":            "16Gi",
		"ephemeral-storage": json.Number("1000"),
		"nvidia.com/gpu":    json.Number("2"),
		"google.com/tpu":    float64(0.5),
		"example.com/a":     int(3),
		"example.com/b":     int64(4),
	})
	if err != nil {
		t.Fatalf("ParseList: %v", err)
	}
	want := List{
		CPU:              500,
		Memory:           16 << 30,
		EphemeralStorage: 1000,
		"nvidia.com/gpu": 2000,
		"google.com/tpu": 500,
		"example.com/a":  3000,
		"example.com/b":  4000,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParseList (-want +got):\n%s", d)
	}
}

func TestParseListErrors(t *testing.T) {
	for _, c := range []struct {
		raw   map[string]any
		field string
	}{
		{map[string]any{"cpu": "500m", "memory": "lots"}, "memory"},
		{map[string]any{"nvidia.com/gpu": true}, "nvidia.com/gpu"},
		{map[string]any{"cpu": nil}, "cpu"},
		{map[string]any{"cpu": []any{"1"}}, "cpu"},
		{map[string]any{"cpu": "-1"}, "cpu"},
		{map[string]any{"nvidia.com/gpu": "1n"}, "nvidia.com/gpu"},
		{map[string]any{"nvidia.com/gpu": float64(-2)}, "nvidia.com/gpu"},
		{map[string]any{"memory": "10Ei"}, "memory"},
		{map[string]any{"gpu": 1}, "gpu"},
		{map[string]any{"Nvidia.com/gpu": 1}, "Nvidia.com/gpu"},
	} {
		l, err := ParseList(c.raw)
		if err == nil {
			t.Errorf("ParseList(%v) = %v, want an error", c.raw, l)
			continue
		}
		if got := errs.FieldOf(err); got != c.field {
			t.Errorf("ParseList(%v): field %q, want %q (error %v)", c.raw, got, c.field, err)
		}
		if got := errs.CodeOf(err); got != errs.InvalidArgument {
			t.Errorf("ParseList(%v): code %q, want %q", c.raw, got, errs.InvalidArgument)
		}
	}

	tooMany := map[string]any{}
	for i := range MaxDims + 1 {
		tooMany[fmt.Sprintf("example.com/r%d", i)] = 1
	}
	if _, err := ParseList(tooMany); err == nil || errs.CodeOf(err) != errs.InvalidArgument {
		t.Errorf("ParseList of %d names = %v, want an invalid_argument error", len(tooMany), err)
	}
}

func TestListJSONRoundTrip(t *testing.T) {
	var l List
	if err := json.Unmarshal([]byte(`{"cpu":"500m","memory":"16Gi","nvidia.com/gpu":2}`), &l); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	want := List{CPU: 500, Memory: 16 << 30, "nvidia.com/gpu": 2000}
	if d := cmp.Diff(want, l); d != "" {
		t.Fatalf("Unmarshal (-want +got):\n%s", d)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	if got, want := string(b), `{"cpu":"0.5","memory":"16Gi","nvidia.com/gpu":"2"}`; got != want {
		t.Errorf("Marshal = %s, want %s", got, want)
	}
	var back List
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("Unmarshal(%s): %v", b, err)
	}
	if d := cmp.Diff(l, back); d != "" {
		t.Errorf("round trip (-first +second):\n%s", d)
	}
}

func TestListJSONRoundTripProperty(t *testing.T) {
	names := []Name{CPU, Memory, EphemeralStorage, "nvidia.com/gpu", "google.com/tpu", "example.com/a_b.c"}
	rapid.Check(t, func(t *rapid.T) {
		l := List{}
		for _, n := range names {
			if rapid.Bool().Draw(t, "has "+string(n)) {
				l[n] = rapid.Int64Range(0, MaxValue).Draw(t, string(n))
			}
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatalf("Marshal(%v): %v", l, err)
		}
		var back List
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("Unmarshal(%s): %v", b, err)
		}
		if d := cmp.Diff(l, back); d != "" {
			t.Fatalf("round trip through %s (-want +got):\n%s", b, d)
		}
	})
}

func TestListUnmarshalErrors(t *testing.T) {
	for _, c := range []struct {
		in    string
		field string
	}{
		{`[]`, ""},
		{`"cpu"`, ""},
		{`{"cpu":`, ""},
		{`{"cpu":true}`, "cpu"},
		{`{"memory":"1Gb"}`, "memory"},
		{`{"nvidia.com/gpu":-1}`, "nvidia.com/gpu"},
		{`{"nvidia.com/gpu":1e400}`, "nvidia.com/gpu"},
	} {
		l := List{"keep": 1}
		err := json.Unmarshal([]byte(c.in), &l)
		if err == nil {
			t.Errorf("Unmarshal(%s) = nil error, want one", c.in)
			continue
		}
		if got := errs.FieldOf(err); got != c.field {
			t.Errorf("Unmarshal(%s): field %q, want %q (error %v)", c.in, got, c.field, err)
		}
		if d := cmp.Diff(List{"keep": 1}, l); d != "" {
			t.Errorf("failed Unmarshal(%s) changed the list (-want +got):\n%s", c.in, d)
		}
	}
}

func TestListString(t *testing.T) {
	l := List{"nvidia.com/gpu": 1000, CPU: 2500, Memory: 4 << 30}
	if got, want := l.String(), "cpu=2.5,memory=4Gi,nvidia.com/gpu=1"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (List{}).String(); got != "" {
		t.Errorf("empty String() = %q, want \"\"", got)
	}
}

func TestDimsFixedIndexes(t *testing.T) {
	d := NewDims()
	if d.Len() != 2 {
		t.Fatalf("NewDims().Len() = %d, want 2", d.Len())
	}
	for _, c := range []struct {
		n Name
		i int
	}{{CPU, DimCPU}, {Memory, DimMemory}} {
		if c.i != map[Name]int{CPU: 0, Memory: 1}[c.n] {
			t.Fatalf("index constant for %s is %d", c.n, c.i)
		}
		if i, ok := d.Lookup(c.n); !ok || i != c.i {
			t.Errorf("Lookup(%s) = %d, %v; want %d, true", c.n, i, ok, c.i)
		}
		if i, err := d.Intern(c.n); err != nil || i != c.i {
			t.Errorf("Intern(%s) = %d, %v; want %d, nil", c.n, i, err, c.i)
		}
		if got := d.Name(c.i); got != c.n {
			t.Errorf("Name(%d) = %s, want %s", c.i, got, c.n)
		}
	}
	if _, ok := d.Lookup("nvidia.com/gpu"); ok {
		t.Errorf("Lookup of an uninterned name succeeded")
	}
}

func TestDimsIntern(t *testing.T) {
	d := NewDims()
	i, err := d.Intern("nvidia.com/gpu")
	if err != nil || i != 2 {
		t.Fatalf("Intern(nvidia.com/gpu) = %d, %v; want 2, nil", i, err)
	}
	j, err := d.Intern("google.com/tpu")
	if err != nil || j != 3 {
		t.Fatalf("Intern(google.com/tpu) = %d, %v; want 3, nil", j, err)
	}
	if again, err := d.Intern("nvidia.com/gpu"); err != nil || again != i {
		t.Errorf("second Intern(nvidia.com/gpu) = %d, %v; want %d, nil", again, err, i)
	}
	if d.Len() != 4 {
		t.Errorf("Len() = %d, want 4", d.Len())
	}

	for k := d.Len(); k < MaxDims; k++ {
		n := Name(fmt.Sprintf("example.com/r%d", k))
		if got, err := d.Intern(n); err != nil || got != k {
			t.Fatalf("Intern(%s) = %d, %v; want %d, nil", n, got, err, k)
		}
	}
	if d.Len() != MaxDims {
		t.Fatalf("Len() = %d, want %d", d.Len(), MaxDims)
	}
	if _, err := d.Intern("example.com/one-too-many"); err == nil {
		t.Errorf("Intern past MaxDims succeeded")
	}
	if d.Len() != MaxDims {
		t.Errorf("failed Intern changed Len() to %d", d.Len())
	}
	if _, ok := d.Lookup("example.com/one-too-many"); ok {
		t.Errorf("failed Intern left the name interned")
	}
	// Known names still resolve when the table is full.
	if got, err := d.Intern("google.com/tpu"); err != nil || got != j {
		t.Errorf("Intern of a known name on a full table = %d, %v; want %d, nil", got, err, j)
	}
}

func TestDimsVectorDeterministic(t *testing.T) {
	l := List{CPU: 1, "nvidia.com/gpu": 2, "google.com/tpu": 3, "amd.com/gpu": 4, "example.com/x": 5}
	var first []Name
	for run := range 20 {
		d := NewDims()
		if _, err := d.Vector(l); err != nil {
			t.Fatalf("Vector: %v", err)
		}
		var names []Name
		for i := range d.Len() {
			names = append(names, d.Name(i))
		}
		if run == 0 {
			first = names
			want := []Name{CPU, Memory, "amd.com/gpu", "example.com/x", "google.com/tpu", "nvidia.com/gpu"}
			if d := cmp.Diff(want, names); d != "" {
				t.Fatalf("interned order (-want +got):\n%s", d)
			}
			continue
		}
		if d := cmp.Diff(first, names); d != "" {
			t.Fatalf("run %d interned differently (-first +this):\n%s", run, d)
		}
	}
}

func TestDimsVectorListRoundTrip(t *testing.T) {
	d := NewDims()
	l := List{CPU: 2000, Memory: 16 << 30, "nvidia.com/gpu": 1000, "google.com/tpu": 500}
	v, err := d.Vector(l)
	if err != nil {
		t.Fatalf("Vector: %v", err)
	}
	if v[DimCPU] != 2000 || v[DimMemory] != 16<<30 {
		t.Errorf("Vector = %v: cpu or memory at the wrong index", v)
	}
	for n, q := range l {
		i, ok := d.Lookup(n)
		if !ok || v[i] != q {
			t.Errorf("Vector[%s] = %d (index %d, %v), want %d", n, v[i], i, ok, q)
		}
	}
	if got := d.List(&v); !cmp.Equal(l, got) {
		t.Errorf("List(Vector(l)) (-want +got):\n%s", cmp.Diff(l, got))
	}
	if got, want := d.Format(&v), "cpu=2,google.com/tpu=0.5,memory=16Gi,nvidia.com/gpu=1"; got != want {
		t.Errorf("Format = %q, want %q", got, want)
	}

	// Zero entries are dropped by List.
	zero := List{CPU: 0, "nvidia.com/gpu": 1000}
	v, err = d.Vector(zero)
	if err != nil {
		t.Fatalf("Vector: %v", err)
	}
	if got, want := d.List(&v), (List{"nvidia.com/gpu": 1000}); !cmp.Equal(want, got) {
		t.Errorf("List drops zeros (-want +got):\n%s", cmp.Diff(want, got))
	}
	if v.IsZero() {
		t.Errorf("IsZero() of a non-zero vector")
	}
	if empty := (Vector{}); !empty.IsZero() {
		t.Errorf("IsZero() of the zero vector is false")
	}
}

func TestDimsVectorListRoundTripProperty(t *testing.T) {
	pool := []Name{CPU, Memory, EphemeralStorage}
	for i := range 20 {
		pool = append(pool, Name(fmt.Sprintf("example.com/r%d", i)))
	}
	rapid.Check(t, func(t *rapid.T) {
		d := NewDims()
		for range rapid.IntRange(0, 4).Draw(t, "lists") {
			names := rapid.SliceOfNDistinct(rapid.SampledFrom(pool), 0, 6, func(n Name) Name { return n }).Draw(t, "names")
			l := List{}
			for _, n := range names {
				l[n] = rapid.Int64Range(1, MaxValue).Draw(t, string(n))
			}
			before := d.Len()
			v, err := d.Vector(l)
			if err != nil {
				if d.Len() != before {
					t.Fatalf("failed Vector(%v) changed Len from %d to %d", l, before, d.Len())
				}
				if f := errs.FieldOf(err); l[Name(f)] == 0 {
					t.Fatalf("Vector error field %q is not a name of the list: %v", f, err)
				}
				continue
			}
			if got := d.List(&v); !cmp.Equal(l, got) {
				t.Fatalf("List(Vector(l)) (-want +got):\n%s", cmp.Diff(l, got))
			}
			for i := d.Len(); i < MaxDims; i++ {
				if v[i] != 0 {
					t.Fatalf("Vector entry %d beyond Len %d is %d", i, d.Len(), v[i])
				}
			}
		}
	})
}

func TestDimsVectorFullIsAtomic(t *testing.T) {
	d := NewDims()
	for k := d.Len(); k < MaxDims-1; k++ {
		if _, err := d.Intern(Name(fmt.Sprintf("example.com/r%02d", k))); err != nil {
			t.Fatal(err)
		}
	}
	// One slot left; the list names two new resources.
	l := List{CPU: 1, "example.com/a": 1, "example.com/b": 1}
	if _, err := d.Vector(l); err == nil {
		t.Fatalf("Vector of a list overflowing the table succeeded")
	} else if f := errs.FieldOf(err); f != "example.com/a" && f != "example.com/b" {
		t.Errorf("Vector error field = %q, want one of the new names (%v)", f, err)
	}
	if d.Len() != MaxDims-1 {
		t.Errorf("rejected Vector interned names: Len() = %d, want %d", d.Len(), MaxDims-1)
	}
	// The remaining slot is still usable.
	if _, err := d.Vector(List{"example.com/b": 1}); err != nil {
		t.Errorf("Vector into the last slot: %v", err)
	}
}

// Property tests for Vector arithmetic. Entries are in [0, MaxValue/4], so
// sums of two or three vectors stay far from int64 overflow.

func genVector(max int64) *rapid.Generator[Vector] {
	return rapid.Custom(func(t *rapid.T) Vector {
		var v Vector
		for i := range v {
			v[i] = rapid.Int64Range(0, max).Draw(t, fmt.Sprintf("e%d", i))
		}
		return v
	})
}

// genBelow returns a vector that fits in free: each entry in [0, free[i]].
func genBelow(t *rapid.T, free Vector, label string) Vector {
	var v Vector
	for i := range v {
		v[i] = rapid.Int64Range(0, free[i]).Draw(t, fmt.Sprintf("%s%d", label, i))
	}
	return v
}

func TestVectorAddSub(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genVector(MaxValue/4).Draw(t, "a")
		b := genVector(MaxValue/4).Draw(t, "b")
		c := a
		c.Add(&b)
		for i := range c {
			if c[i] != a[i]+b[i] {
				t.Fatalf("(a+b)[%d] = %d, want %d", i, c[i], a[i]+b[i])
			}
		}
		c.Sub(&b)
		if c != a {
			t.Fatalf("(a+b)-b = %v, want %v", c, a)
		}
		ab, ba := a, b
		ab.Add(&b)
		ba.Add(&a)
		if ab != ba {
			t.Fatalf("a+b = %v but b+a = %v", ab, ba)
		}
	})
}

func TestVectorFitsReflexive(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genVector(MaxValue/4).Draw(t, "a")
		if !a.Fits(&a) {
			t.Fatalf("%v does not fit itself", a)
		}
		if s := a.FirstShort(&a); s != -1 {
			t.Fatalf("FirstShort(a, a) = %d", s)
		}
	})
}

func TestVectorFitsThenSubNonNegative(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		free := genVector(MaxValue/4).Draw(t, "free")
		req := genBelow(t, free, "req")
		if rapid.Bool().Draw(t, "overshoot") {
			req[rapid.IntRange(0, MaxDims-1).Draw(t, "at")]++
		}
		if !req.Fits(&free) {
			return
		}
		left := free
		left.Sub(&req)
		if !left.NonNegative() {
			t.Fatalf("req %v fits free %v, but free-req = %v is negative", req, free, left)
		}
	})
}

func TestVectorFitsIffNoShort(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		free := genVector(MaxValue/4).Draw(t, "free")
		var req Vector
		if rapid.Bool().Draw(t, "related") {
			req = genBelow(t, free, "req")
			if rapid.Bool().Draw(t, "overshoot") {
				req[rapid.IntRange(0, MaxDims-1).Draw(t, "at")] += rapid.Int64Range(1, 10).Draw(t, "by")
			}
		} else {
			req = genVector(MaxValue/4).Draw(t, "req")
		}
		fits := req.Fits(&free)
		short := req.FirstShort(&free)
		if fits != (short == -1) {
			t.Fatalf("Fits = %v but FirstShort = %d for req %v, free %v", fits, short, req, free)
		}
		// FirstShort is the first short index, and it is short.
		for i := range req {
			over := req[i] > free[i]
			if over && i < short {
				t.Fatalf("FirstShort = %d but index %d is already short", short, i)
			}
			if i == short && !over {
				t.Fatalf("FirstShort = %d but req %d <= free %d there", short, req[i], free[i])
			}
			if over && short == -1 {
				t.Fatalf("FirstShort = -1 but index %d is short", i)
			}
		}
	})
}

func TestVectorFitsMonotone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		free := genVector(MaxValue/4).Draw(t, "free")
		req := genBelow(t, free, "req")
		extra := genVector(MaxValue/4).Draw(t, "extra")
		free2 := free
		free2.Add(&extra)
		if !req.Fits(&free) {
			t.Fatalf("req %v built below free %v does not fit", req, free)
		}
		if !req.Fits(&free2) {
			t.Fatalf("req %v fits %v but not the larger %v", req, free, free2)
		}
		// The contrapositive on a vector that does not fit.
		at := rapid.IntRange(0, MaxDims-1).Draw(t, "at")
		big := free2
		big[at]++
		if big.Fits(&free2) {
			t.Fatalf("%v fits %v although entry %d is larger", big, free2, at)
		}
		if big.Fits(&free) {
			t.Fatalf("%v fits the smaller %v", big, free)
		}
	})
}

func TestVectorFitsSum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		a := genVector(MaxValue/4).Draw(t, "a")
		b := genVector(MaxValue/4).Draw(t, "b")
		sum := a
		sum.Add(&b)
		if !a.Fits(&sum) {
			t.Fatalf("a %v does not fit a+b %v", a, sum)
		}
		if !sum.NonNegative() {
			t.Fatalf("a+b %v is negative", sum)
		}
	})
}

func TestVectorNonNegative(t *testing.T) {
	var v Vector
	if !v.NonNegative() {
		t.Fatalf("zero vector is not NonNegative")
	}
	for i := range v {
		w := v
		w[i] = -1
		if w.NonNegative() {
			t.Errorf("vector with -1 at %d is NonNegative", i)
		}
	}
}

// TestNameMatchersAreTheRegexps: the written-out checks accept exactly
// what the regular expressions of Kubernetes' validation accept, on
// strings drawn from the characters that matter.
func TestNameMatchersAreTheRegexps(t *testing.T) {
	dnsSubdomain := regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	qualified := regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	alphabet := []rune("az09AZ-._/é ")
	rapid.Check(t, func(t *rapid.T) {
		s := string(rapid.SliceOfN(rapid.SampledFrom(alphabet), 0, 12).Draw(t, "s"))
		if got, want := isDNSSubdomain(s), dnsSubdomain.MatchString(s); got != want {
			t.Fatalf("isDNSSubdomain(%q) = %v, the regexp says %v", s, got, want)
		}
		if got, want := isQualifiedName(s), qualified.MatchString(s); got != want {
			t.Fatalf("isQualifiedName(%q) = %v, the regexp says %v", s, got, want)
		}
	})
	for _, s := range []string{"nvidia.com", "a", "a-b.c", "example.com."} {
		if isDNSSubdomain(s) != dnsSubdomain.MatchString(s) {
			t.Errorf("isDNSSubdomain(%q) disagrees", s)
		}
	}
}
