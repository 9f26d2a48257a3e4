package resource

import "testing"

// FuzzFastMatchesExact: whenever the integer fast path answers, the exact
// rational path gives the same value.
func FuzzFastMatchesExact(f *testing.F) {
	for _, s := range []string{"500m", "16Gi", "0.5", "2k", "1.25", "10m", "16Mi", "3Ei", "0.001", "1.5Ki", "7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) == 0 || len(s) > maxQuantityLen {
			return
		}
		num, suffix, err := splitQuantity(s)
		if err != nil {
			return
		}
		for _, scale := range []Scale{Milli, Units} {
			fast, ok := fastQuantity(num, suffix, scale)
			if !ok {
				continue
			}
			exact, err := exactQuantity(s, num, suffix, scale)
			if err != nil || exact != fast {
				t.Fatalf("%q scale %d: fast %d, exact %d (%v)", s, scale, fast, exact, err)
			}
		}
	})
}
