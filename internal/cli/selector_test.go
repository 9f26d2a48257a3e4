package cli

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
	"time"
)

// TestParseSelector: the CLI checks a selector with the server's parser
// (the semantics are api's, tested there), and its error names the flag
// and the syntax.
func TestParseSelector(t *testing.T) {
	labels := map[string]string{"team": "vision", "tier": "low"}
	for sel, want := range map[string]bool{"": true, "team=vision,tier!=high": true, "team in (nlp,vision)": true, "!team": false} {
		s, err := ParseSelector(sel)
		if err != nil || s.MatchesMap(labels) != want {
			t.Errorf("%q: %v, matches %v, want %v", sel, err, s.MatchesMap(labels), want)
		}
	}
	for _, bad := range []string{"team=vision,", ",", "=x", "team=a b", "team in a", "!", "-team=x", "a/b/c=x"} {
		_, err := ParseSelector(bad)
		if err == nil || !strings.Contains(err.Error(), "--selector") || !strings.Contains(err.Error(), "k=v,k!=v,k,!k") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestNodeLabelsDerived: a watch's node selector sees the node's own
// labels and the ones the server derives.
func TestNodeLabelsDerived(t *testing.T) {
	n := nodeView{Name: "gpu-a", Labels: map[string]string{"rack": "r1"},
		DerivedLabels: map[string]string{"nvidia.com/gpu.model": "H100-80GB", "hetsched.io/node": "gpu-a"}}
	for sel, want := range map[string]bool{"rack=r1,nvidia.com/gpu.model=H100-80GB": true, "hetsched.io/node=gpu-b": false, "!google.com/tpu.model": true} {
		s, err := ParseSelector(sel)
		if err != nil || s.Matches(n.label) != want {
			t.Errorf("%q: %v, want %v", sel, err, want)
		}
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
