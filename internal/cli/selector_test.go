package cli

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

func TestParseSelector(t *testing.T) {
	labels := map[string]string{"team": "vision", "tier": "low", "nvidia.com/gpu.model": "H100-80GB", "empty": ""}
	for _, c := range []struct {
		sel  string
		want bool
	}{
		{"", true},
		{"team=vision", true},
		{"team==vision", true},
		{"team=nlp", false},
		{"team!=nlp", true},
		{"owner!=x", true}, // absent: not equal
		{"team", true},
		{"owner", false},
		{"!owner", true},
		{"!team", false},
		{"team=vision, tier=low", true},
		{"team=vision,tier!=low", false},
		{"nvidia.com/gpu.model=H100-80GB", true},
		{"empty=", true},
	} {
		s, err := ParseSelector(c.sel)
		if err != nil {
			t.Errorf("%q: %v", c.sel, err)
			continue
		}
		if got := s.Matches(labels); got != c.want {
			t.Errorf("%q matches %v, want %v", c.sel, got, c.want)
		}
	}
	for _, bad := range []string{"team=vision,", ",", "=x", "team=a b", "team in (a,b)", "!", "-team=x", "team=" + strings.Repeat("x", 64), "a/b/c=x", "Bad_Prefix/x=1"} {
		_, err := ParseSelector(bad)
		if err == nil || !strings.Contains(err.Error(), "--selector") || !strings.Contains(err.Error(), "k=v,k!=v,k,!k") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := ParseSelector(strings.Repeat("a,", MaxSelector) + "a"); err == nil {
		t.Error("too many terms accepted")
	}
}

// TestNodeLabelsDerived: a node's labels for a watch's selector include
// hetsched's derived ones, as the scheduler sees them.
func TestNodeLabelsDerived(t *testing.T) {
	n := nodeView{Name: "gpu-a", Labels: map[string]string{"rack": "r1"}, Devices: []nodeDevice{
		{Type: "nvidia.com/gpu", ID: "0", Model: "H100-80GB"}, {Type: "nvidia.com/gpu", ID: "1", Model: "H100-80GB"},
		{Type: "google.com/tpu", ID: "0", Model: "v5e"}, {Type: "google.com/tpu", ID: "1", Model: "v4"},
	}}
	got := nodeLabels(n)
	if got["rack"] != "r1" || got["nvidia.com/gpu.model"] != "H100-80GB" || got["hetsched.io/node"] != "gpu-a" {
		t.Errorf("labels %v", got)
	}
	if _, ok := got["google.com/tpu.model"]; ok {
		t.Errorf("two TPU models make no label: %v", got)
	}
}

// TestGridIsTabwriter: the grid writes what text/tabwriter wrote for the
// same rows (the tables did not change), and keeps its widths.
func TestGridIsTabwriter(t *testing.T) {
	rows := [][]string{{"ID", "STATE", "DEVICES", "REASON"}, {"t1", "pending", "", "0/1 nodes fit"}, {"t22", "scheduled", "1×nvidia.com/gpu L4", ""}}
	var want, got bytes.Buffer
	tw := tabwriter.NewWriter(&want, 2, 4, 2, ' ', 0)
	for _, r := range rows {
		tw.Write([]byte(strings.Join(r, "\t") + "\n"))
	}
	tw.Flush()
	g := grid{w: &got}
	if err := g.write(rows...); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("got\n%q\nwant\n%q", got.String(), want.String())
	}
	got.Reset()
	g.write([]string{"t3", "ok", "", "x"})
	if got.String() != "t3   ok         "+strings.Repeat(" ", 21)+"x\n" {
		t.Errorf("a later row: %q", got.String())
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		0: "0s", 59 * time.Second: "59s", 119 * time.Second: "119s", 125 * time.Second: "2m5s", 5 * time.Minute: "5m",
		45 * time.Minute: "45m", 4*time.Hour + 5*time.Minute: "4h5m", 5 * time.Hour: "5h", 30 * time.Hour: "30h", 72 * time.Hour: "3d",
		-time.Second: "0s",
	} {
		if got := age(now.Add(-d), now); got != want {
			t.Errorf("%v: %s, want %s", d, got, want)
		}
	}
	if age(time.Time{}, now) != "-" {
		t.Error("the zero time")
	}
}
