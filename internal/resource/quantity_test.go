package resource

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

type quantityCase struct {
	in    string
	scale Scale
	want  int64
	err   error // nil: must succeed with want
}

var quantityCases = []quantityCase{
	// Plain and suffixed values, milli scale.
	{"500m", Milli, 500, nil},
	{"2", Milli, 2000, nil},
	{"0", Milli, 0, nil},
	{"0.5", Milli, 500, nil},
	{".5", Milli, 500, nil},
	{"5.", Milli, 5000, nil},
	{"+1", Milli, 1000, nil},
	{"+.5", Milli, 500, nil},
	{"0.001", Milli, 1, nil},
	{"1e3", Milli, 1000000, nil},
	{"1E3", Milli, 1000000, nil},
	{"1e+3", Milli, 1000000, nil},
	{"1e-3", Milli, 1, nil},
	{"2.5e-1", Milli, 250, nil},
	{"1000u", Milli, 1, nil},
	{"1000000n", Milli, 1, nil},
	{"1k", Milli, 1000000, nil},
	{"1Ki", Milli, 1024000, nil},
	{"007", Milli, 7000, nil},
	{"-0", Milli, 0, nil},

	// Units (bytes).
	{"16Gi", Units, 17179869184, nil},
	{"1k", Units, 1000, nil},
	{"1Ki", Units, 1024, nil},
	{"100M", Units, 100000000, nil},
	{"1.5Gi", Units, 1610612736, nil},
	{"1e3", Units, 1000, nil},
	{"1E3", Units, 1000, nil},
	{"1E", Units, 0, ErrOverflow}, // exa: 1e18 > MaxValue
	{"1P", Units, 1000000000000000, nil},
	{"8Pi", Units, MaxValue, nil},
	{"0.1", Units, 1, nil}, // rounds up
	{"1.5", Units, 2, nil},
	{"1m", Units, 1, nil},
	{"1n", Units, 1, nil},
	{"1e-99", Units, 1, nil},
	{"0e99", Units, 0, nil},
	{"0.000", Units, 0, nil},

	// Too fine for milli.
	{"1n", Milli, 0, ErrTooFine},
	{"1u", Milli, 0, ErrTooFine},
	{"1.0001", Milli, 0, ErrTooFine},
	{"0.0005", Milli, 0, ErrTooFine},
	{"1e-4", Milli, 0, ErrTooFine},
	{"1e-99", Milli, 0, ErrTooFine},

	// Negative.
	{"-1", Milli, 0, ErrNegative},
	{"-500m", Milli, 0, ErrNegative},
	{"-1", Units, 0, ErrNegative},
	{"-0.5", Units, 0, ErrNegative},
	{"-1Gi", Units, 0, ErrNegative},
	{"-9999999999999999999", Units, 0, ErrNegative},

	// Syntax.
	{"", Milli, 0, ErrSyntax},
	{"abc", Milli, 0, ErrSyntax},
	{"1.2.3", Milli, 0, ErrSyntax},
	{"1Gb", Units, 0, ErrSyntax},
	{"1 Gi", Units, 0, ErrSyntax},
	{" 1", Milli, 0, ErrSyntax},
	{"1 ", Milli, 0, ErrSyntax},
	{"++1", Milli, 0, ErrSyntax},
	{"+-1", Milli, 0, ErrSyntax},
	{"+", Milli, 0, ErrSyntax},
	{"-", Milli, 0, ErrSyntax},
	{"1e", Milli, 0, ErrSyntax},
	{"1e+", Milli, 0, ErrSyntax},
	{"1e1.5", Milli, 0, ErrSyntax},
	{"1e3m", Milli, 0, ErrSyntax},
	{".", Milli, 0, ErrSyntax},
	{"0x10", Milli, 0, ErrSyntax},
	{"1_000", Milli, 0, ErrSyntax},
	{"1ki", Units, 0, ErrSyntax},
	{"1/2", Milli, 0, ErrSyntax},
	{"Inf", Milli, 0, ErrSyntax},
	{"NaN", Milli, 0, ErrSyntax},
	{"1" + strings.Repeat("0", 64), Units, 0, ErrSyntax}, // longer than the limit

	// Overflow.
	{"1e99", Milli, 0, ErrOverflow},
	{"1e99", Units, 0, ErrOverflow},
	{"1e99999999999999999999", Units, 0, ErrOverflow},
	{"9999999999999999999", Units, 0, ErrOverflow},
	{"9999999999999999999", Milli, 0, ErrOverflow},
	{"10Ei", Units, 0, ErrOverflow},
	{"1Ei", Units, 0, ErrOverflow},
	{strconv.FormatInt(MaxValue+1, 10), Units, 0, ErrOverflow},
	{strconv.FormatInt(MaxValue+1, 10) + "m", Milli, 0, ErrOverflow},
	{strconv.FormatInt(MaxValue/1000+1, 10), Milli, 0, ErrOverflow},
	{"9007199254740.993", Milli, 0, ErrOverflow},
	{"9007199254740992.5", Units, 0, ErrOverflow}, // rounds up past MaxValue

	// MaxValue itself.
	{strconv.FormatInt(MaxValue, 10), Units, MaxValue, nil},
	{strconv.FormatInt(MaxValue, 10) + "m", Milli, MaxValue, nil},
	{"9007199254740.992", Milli, MaxValue, nil},
	{strconv.FormatInt(MaxValue/1000, 10), Milli, MaxValue / 1000 * 1000, nil},
	{"9007199254740991.5", Units, MaxValue, nil}, // rounds up to MaxValue
}

func scaleName(s Scale) string {
	if s == Units {
		return "Units"
	}
	return "Milli"
}

func TestParseQuantity(t *testing.T) {
	for _, c := range quantityCases {
		got, err := ParseQuantity(c.in, c.scale)
		if c.err == nil {
			if err != nil || got != c.want {
				t.Errorf("ParseQuantity(%q, %s) = %d, %v; want %d, nil", c.in, scaleName(c.scale), got, err, c.want)
			}
			continue
		}
		if !errors.Is(err, c.err) {
			t.Errorf("ParseQuantity(%q, %s) = %d, %v; want error %v", c.in, scaleName(c.scale), got, err, c.err)
		}
		if got != 0 {
			t.Errorf("ParseQuantity(%q, %s) returned %d with error %v; want 0", c.in, scaleName(c.scale), got, err)
		}
	}
}

func TestFormatMilli(t *testing.T) {
	for _, c := range []struct {
		v    int64
		want string
	}{
		{0, "0"}, {2000, "2"}, {500, "0.5"}, {250, "250m"}, {1, "1m"}, {10, "10m"},
		{1500, "1.5"}, {1250, "1250m"}, {12300, "12.3"}, {MaxValue, "9007199254740992m"},
		{MaxValue / 100 * 100, "9007199254740.9"},
	} {
		if got := FormatMilli(c.v); got != c.want {
			t.Errorf("FormatMilli(%d) = %q, want %q", c.v, got, c.want)
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		v    int64
		want string
	}{
		{0, "0"}, {1, "1"}, {1000, "1000"}, {1024, "1Ki"}, {1536, "1536"},
		{16 << 30, "16Gi"}, {3 << 20, "3Mi"}, {MaxValue, "8Pi"},
	} {
		if got := FormatBytes(c.v); got != c.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.v, got, c.want)
		}
	}
}

// formatValues returns edge values and random values in [0, MaxValue],
// including multiples of 10, 100, 1000 and powers of two so that every
// formatting branch is taken.
func formatValues() []int64 {
	vs := []int64{0, 1, 9, 10, 99, 100, 999, 1000, 1001, 1024, 1 << 30, MaxValue - 1, MaxValue,
		MaxValue / 1000 * 1000, MaxValue / 10 * 10, MaxValue / 100 * 100}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		v := r.Int64N(MaxValue + 1)
		switch r.IntN(6) {
		case 0:
			v = v / 10 * 10
		case 1:
			v = v / 100 * 100
		case 2:
			v = v / 1000 * 1000
		case 3:
			v >>= r.IntN(54)
		case 4:
			sh := r.IntN(54)
			v = v >> sh << sh
		}
		vs = append(vs, v)
	}
	return vs
}

func TestFormatRoundTrip(t *testing.T) {
	for _, v := range formatValues() {
		s := FormatMilli(v)
		if got, err := ParseQuantity(s, Milli); err != nil || got != v {
			t.Fatalf("ParseQuantity(FormatMilli(%d) = %q, Milli) = %d, %v", v, s, got, err)
		}
		s = FormatBytes(v)
		if got, err := ParseQuantity(s, Units); err != nil || got != v {
			t.Fatalf("ParseQuantity(FormatBytes(%d) = %q, Units) = %d, %v", v, s, got, err)
		}
	}
}

func FuzzParseQuantity(f *testing.F) {
	for _, c := range quantityCases {
		f.Add(c.in, c.scale == Units)
	}
	f.Fuzz(func(t *testing.T, s string, units bool) {
		scale := Milli
		if units {
			scale = Units
		}
		v, err := ParseQuantity(s, scale)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrNegative) &&
				!errors.Is(err, ErrOverflow) && !errors.Is(err, ErrTooFine) {
				t.Fatalf("ParseQuantity(%q, %s): error %v wraps none of the package errors", s, scaleName(scale), err)
			}
			if v != 0 {
				t.Fatalf("ParseQuantity(%q, %s) = %d with error %v", s, scaleName(scale), v, err)
			}
			return
		}
		if v < 0 || v > MaxValue {
			t.Fatalf("ParseQuantity(%q, %s) = %d, outside [0, MaxValue]", s, scaleName(scale), v)
		}
		if scale == Milli {
			f := FormatMilli(v)
			if back, err := ParseQuantity(f, Milli); err != nil || back != v {
				t.Fatalf("ParseQuantity(%q) = %d, but ParseQuantity(FormatMilli = %q) = %d, %v", s, v, f, back, err)
			}
		} else {
			f := FormatBytes(v)
			if back, err := ParseQuantity(f, Units); err != nil || back != v {
				t.Fatalf("ParseQuantity(%q, Units) = %d, but ParseQuantity(FormatBytes = %q) = %d, %v", s, v, f, back, err)
			}
		}
	})
}
