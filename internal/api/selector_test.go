package api

import (
	"slices"
	"strings"
	"testing"
)

func TestSelector(t *testing.T) {
	labels := map[string]string{"team": "vision", "env": "prod", "nvidia.com/gpu.model": "H100-80GB", "nvidia.com/gpu.memory": "81920"}
	for _, c := range []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"team=vision", true},
		{"team==vision", true},
		{"team = vision", true},
		{"team=nlp", false},
		{"team!=nlp", true},
		{"team!=vision", false},
		{"absent!=x", true},
		{"team", true},
		{"absent", false},
		{"!absent", true},
		{"!team", false},
		{"team=vision,env=prod", true},
		{"team=vision, env=dev", false},
		{"env in (dev,prod)", true},
		{"env in (dev, test)", false},
		{"env notin (dev,test)", true},
		{"env notin (prod)", false},
		{"absent notin (x)", true},
		{"nvidia.com/gpu.model=H100-80GB", true},
		{"nvidia.com/gpu.model in (A100-40GB,H100-80GB),team", true},
		{"nvidia.com/gpu.memory>40960", true},
		{"nvidia.com/gpu.memory > 81920", false},
		{"nvidia.com/gpu.memory<81921", true},
		{"nvidia.com/gpu.memory<-5", false},
		{"team>1", false},    // not an integer: no match
		{"absent<10", false}, // absent: no match
	} {
		s, err := ParseSelector(c.sel)
		if err != nil {
			t.Errorf("ParseSelector(%q): %v", c.sel, err)
			continue
		}
		if got := s.MatchesMap(labels); got != c.want {
			t.Errorf("%q matches %v = %v, want %v", c.sel, labels, got, c.want)
		}
	}
	for sel, want := range map[string]string{
		"team=vision,":      "empty requirement",
		",team":             "empty requirement",
		"team=a=b":          "holds a character",
		"team!vision":       "'!' must start a key",
		"env in dev":        "parentheses",
		"env in (a,(b))":    "nested",
		"env in (a":         "unclosed",
		"env) in (a":        "unmatched",
		"=x":                "no key",
		"bad key!=x":        "",
		"env between (a,b)": "want key=value",
		"a=\x1b[31m":        "control",
		"mem>lots":          "compares with an integer",
		"mem<":              "compares with an integer",
		strings.Repeat("k,", MaxSelectorTerms) + "k": "more than",
		strings.Repeat("k", MaxSelectorLen+1):        "longer than",
	} {
		_, err := ParseSelector(sel)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSelector(%q) = %v, want an error containing %q", sel, err, want)
		}
	}
}

func FuzzParseSelector(f *testing.F) {
	for _, s := range []string{"team=vision", "a!=b,c", "!x", "k in (a,b)", "k notin (a)", "a=(", ",,", "!"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector(s)
		if err != nil {
			return
		}
		if len(sel.reqs) > MaxSelectorTerms {
			t.Fatalf("%q: %d requirements", s, len(sel.reqs))
		}
		for _, r := range sel.reqs {
			if ValidateLabelKey(r.key) != nil {
				t.Fatalf("%q: accepted key %q", s, r.key)
			}
		}
		sel.MatchesMap(map[string]string{"a": "b"})
	})
}

func TestSelectorEquality(t *testing.T) {
	for _, c := range []struct {
		sel, key string
		values   []string
	}{
		{"!x, app in (a,b), tier=web", "app", []string{"a", "b"}},
		{"tier=web", "tier", []string{"web"}},
		{"!x, y notin (a), z", "", nil},
		{"", "", nil},
	} {
		s, err := ParseSelector(c.sel)
		if err != nil {
			t.Fatal(err)
		}
		k, v, ok := s.Equality()
		if k != c.key || !slices.Equal(v, c.values) || ok != (c.key != "") {
			t.Errorf("Equality(%q) = %q %v %v, want %q %v", c.sel, k, v, ok, c.key, c.values)
		}
	}
}
