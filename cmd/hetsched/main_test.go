package main

import (
	"bytes"
	"strings"
	"testing"
)

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestDemoQuiet(t *testing.T) {
	out, err := run(t, "demo", "-q")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"simulated time", "submitted 19", "still pending 0", "nvidia.com/gpu"} {
		if !strings.Contains(out, want) {
			t.Errorf("up output lacks %q:\n%s", want, out)
		}
	}
}

func TestPolicies(t *testing.T) {
	out, err := run(t, "policies")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"round-robin", "least-allocated", "weighted-feedback", "sjf", "binpack", "spread", "load-predict", "hetero-aware", "fgd"} {
		if !strings.Contains(out, p) {
			t.Errorf("policies lacks %s", p)
		}
	}
}
