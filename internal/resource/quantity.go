// Package resource holds hetsched's resource model: quantities in Kubernetes
// syntax, resource names, and dense integer resource vectors.
//
// Contract: every quantity is converted once, at the edge, into an int64 in
// its resource's canonical unit, and all later arithmetic is integer:
//   - cpu: millicores ("500m" = 500, "2" = 2000);
//   - memory and ephemeral-storage: bytes ("16Gi" = 17179869184);
//   - every extended resource (domain/name, e.g. nvidia.com/gpu): milli-units,
//     so a shared half device is 500 and two whole devices are 2000.
//
// Parsed values are bounded by MaxValue, which keeps the sum of up to 1024
// bounded values inside int64.
package resource

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/errs"
)

// MaxValue is the largest canonical value a single quantity may have (2^53).
const MaxValue int64 = 1 << 53

// Errors returned by ParseQuantity, wrapped with the offending text.
var (
	ErrSyntax   = errors.New("not a quantity")
	ErrNegative = errors.New("negative quantities are not allowed")
	ErrOverflow = errors.New("quantity too large")
	ErrTooFine  = errors.New("quantity is finer than the resource's unit")
)

// Scale says how a quantity is converted to its canonical integer.
type Scale int

const (
	// Milli converts to thousandths (cpu, extended resources).
	Milli Scale = iota
	// Units converts to whole units, rounding fractions up (bytes).
	Units
)

var suffixes = map[string]struct {
	base int64 // 2 or 10
	exp  int   // power of base
}{
	"":   {10, 0},
	"n":  {10, -9},
	"u":  {10, -6},
	"m":  {10, -3},
	"k":  {10, 3},
	"M":  {10, 6},
	"G":  {10, 9},
	"T":  {10, 12},
	"P":  {10, 15},
	"E":  {10, 18},
	"Ki": {2, 10},
	"Mi": {2, 20},
	"Gi": {2, 30},
	"Ti": {2, 40},
	"Pi": {2, 50},
	"Ei": {2, 60},
}

// maxQuantityLen bounds the text a parser will look at.
const maxQuantityLen = 64

// ParseQuantity parses a Kubernetes quantity ("500m", "16Gi", "2", "0.5",
// "1e3") and returns its canonical integer in the given scale. Milli values
// must be whole thousandths (ErrTooFine otherwise); Units values are rounded
// up to a whole unit, as Kubernetes does for bytes.
func ParseQuantity(s string, scale Scale) (int64, error) {
	if len(s) == 0 {
		return 0, fmt.Errorf("%w: empty string", ErrSyntax)
	}
	if len(s) > maxQuantityLen {
		return 0, fmt.Errorf("%w: longer than %d characters", ErrSyntax, maxQuantityLen)
	}
	// Fast path: plain non-negative integers.
	if c := s[len(s)-1]; c < '0' || c > '9' {
		// has a suffix: not a plain integer
	} else if v, err := strconv.ParseInt(s, 10, 64); err == nil && s[0] != '+' {
		if v < 0 {
			return 0, fmt.Errorf("%w: %q", ErrNegative, errs.Clip(s))
		}
		if scale == Milli {
			if v > MaxValue/1000 {
				return 0, fmt.Errorf("%w: %q (max %d)", ErrOverflow, errs.Clip(s), MaxValue/1000)
			}
			return v * 1000, nil
		}
		if v > MaxValue {
			return 0, fmt.Errorf("%w: %q (max %d)", ErrOverflow, errs.Clip(s), MaxValue)
		}
		return v, nil
	}
	num, suffix, err := splitQuantity(s)
	if err != nil {
		return 0, err
	}
	if v, ok := fastQuantity(num, suffix, scale); ok {
		return v, nil
	}
	return exactQuantity(s, num, suffix, scale)
}

// exactQuantity is the general path: exact rational arithmetic.
func exactQuantity(s, num, suffix string, scale Scale) (int64, error) {
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("%w: %q", ErrSyntax, errs.Clip(s))
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("%w: %q", ErrNegative, errs.Clip(s))
	}
	if suffix != "" {
		sf, ok := suffixes[suffix]
		if ok {
			r.Mul(r, pow(sf.base, sf.exp))
		} else if suffix[0] == 'e' || suffix[0] == 'E' {
			e, ok := parseExponent(suffix[1:])
			if !ok {
				return 0, fmt.Errorf("%w: bad exponent in %q", ErrSyntax, errs.Clip(s))
			}
			r.Mul(r, pow(10, e))
		} else {
			return 0, fmt.Errorf("%w: unknown suffix %q in %q", ErrSyntax, errs.Clip(suffix), errs.Clip(s))
		}
	}
	if scale == Milli {
		r.Mul(r, big.NewRat(1000, 1))
	}
	if !r.IsInt() {
		if scale == Milli {
			return 0, fmt.Errorf("%w: %q is not a whole number of thousandths", ErrTooFine, errs.Clip(s))
		}
		// Round up to a whole unit.
		q := new(big.Int).Quo(r.Num(), r.Denom())
		q.Add(q, big.NewInt(1))
		r.SetInt(q)
	}
	n := r.Num()
	if !n.IsInt64() || n.Int64() > MaxValue {
		return 0, fmt.Errorf("%w: %q", ErrOverflow, errs.Clip(s))
	}
	return n.Int64(), nil
}

// pow10 holds 10^0 .. 10^18.
var pow10 = func() [19]int64 {
	var p [19]int64
	p[0] = 1
	for i := 1; i < len(p); i++ {
		p[i] = p[i-1] * 10
	}
	return p
}()

// fastQuantity computes the common forms ("500m", "16Gi", "0.5", "2k")
// with integer arithmetic: a non-negative decimal with at most 15 digits
// and a suffix from the table. ok=false sends the caller to the exact
// (big.Rat) path, which also produces every error.
func fastQuantity(num, suffix string, scale Scale) (int64, bool) {
	sf, known := suffixes[suffix]
	if !known || len(num) == 0 || num[0] == '-' {
		return 0, false
	}
	var mant int64
	frac, digits := -1, 0
	for i := 0; i < len(num); i++ {
		c := num[i]
		switch {
		case c == '.':
			if frac >= 0 {
				return 0, false
			}
			frac = 0
		case c >= '0' && c <= '9':
			if digits++; digits > 15 {
				return 0, false
			}
			mant = mant*10 + int64(c-'0')
			if frac >= 0 {
				frac++
			}
		default:
			return 0, false
		}
	}
	if frac < 0 {
		frac = 0
	}
	// value = mant * 10^-frac * base^exp * (1000 for Milli)
	exp10 := -frac
	if scale == Milli {
		exp10 += 3
	}
	var v int64
	if sf.base == 2 {
		if sf.exp > 40 {
			return 0, false
		}
		// mant * 2^exp first, refusing anything that could overflow.
		if mant > (1<<62)>>sf.exp {
			return 0, false
		}
		v = mant << sf.exp
	} else {
		exp10 += sf.exp
		v = mant
	}
	for exp10 > 0 {
		if v > MaxValue/10 {
			return 0, false
		}
		v *= 10
		exp10--
	}
	if exp10 < 0 {
		if -exp10 >= len(pow10) {
			return 0, false
		}
		d := pow10[-exp10]
		if v%d != 0 {
			return 0, false // not whole: the exact path rounds or rejects
		}
		v /= d
	}
	if v > MaxValue {
		return 0, false
	}
	return v, true
}

// splitQuantity separates the signed decimal number from its suffix and
// checks the number's syntax: [+-]? (digits [. digits?] | . digits).
func splitQuantity(s string) (num, suffix string, err error) {
	i := 0
	if s[0] == '+' || s[0] == '-' {
		i++
	}
	digits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		digits++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return "", "", fmt.Errorf("%w: %q has no digits", ErrSyntax, errs.Clip(s))
	}
	num, suffix = s[:i], s[i:]
	if strings.HasSuffix(num, ".") {
		num += "0"
	}
	num = strings.TrimPrefix(num, "+")
	return num, suffix, nil
}

// maxExponent bounds a decimal exponent. The number before the exponent has
// at most maxQuantityLen characters, so when it is not zero it lies in
// [1e-64, 1e64); beyond ±maxExponent the value is then far above MaxValue or
// far below one thousandth, exactly as it is at ±maxExponent, so clamping
// changes no result and keeps the arithmetic small.
const maxExponent = 100

// parseExponent parses [+-]?digits, clamping the value to ±maxExponent.
func parseExponent(s string) (int, bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	e := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		if e <= maxExponent {
			e = e*10 + int(s[i]-'0')
		}
	}
	e = min(e, maxExponent)
	if neg {
		e = -e
	}
	return e, true
}

func pow(base int64, exp int) *big.Rat {
	neg := exp < 0
	if neg {
		exp = -exp
	}
	b := new(big.Int).Exp(big.NewInt(base), big.NewInt(int64(exp)), nil)
	if neg {
		return new(big.Rat).SetFrac(big.NewInt(1), b)
	}
	return new(big.Rat).SetInt(b)
}

// FormatMilli renders a milli value the way a person writes it: "2", "0.5",
// "250m". Whole tenths are written as decimals, anything finer in "m".
func FormatMilli(v int64) string {
	if v%1000 == 0 {
		return strconv.FormatInt(v/1000, 10)
	}
	if v%100 == 0 {
		return strconv.FormatFloat(float64(v)/1000, 'f', -1, 64)
	}
	return strconv.FormatInt(v, 10) + "m"
}

// FormatBytes renders bytes with the largest binary suffix that divides them.
func FormatBytes(v int64) string {
	for _, u := range []struct {
		s string
		n int64
	}{{"Ei", 1 << 60}, {"Pi", 1 << 50}, {"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if v != 0 && v%u.n == 0 {
			return strconv.FormatInt(v/u.n, 10) + u.s
		}
	}
	return strconv.FormatInt(v, 10)
}
