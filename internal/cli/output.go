package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/resource"
)

// Output formats (-o).
const (
	Table = "table"
	Wide  = "wide" // the table with more columns
	Name  = "name" // kind/NAME, one per line (kubectl's -o name)
	JSON  = "json"
	YAML  = "yaml"
)

// OutputHelp is -o's help text: every format CheckOutput accepts.
const OutputHelp = "table, wide (more columns), name (kind/NAME per line), json or yaml"

// CheckOutput validates -o.
func CheckOutput(o string) error {
	switch o {
	case Table, Wide, Name, JSON, YAML:
		return nil
	}
	return fmt.Errorf("-o: must be table, wide, name, json or yaml, got %q", o)
}

// tabular reports whether output is one of the table forms.
func tabular(output string) bool { return output == Table || output == Wide }

// printTasksRaw prints a JSON answer as it is: indented JSON, or YAML.
func printTasksRaw(w io.Writer, raw json.RawMessage, output string) error {
	if output == YAML {
		b, err := yaml.JSONToYAML(raw)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return fmt.Errorf("unexpected answer: %w", err)
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	_, err := fmt.Fprintln(w, string(b))
	return err
}

// printObject prints one object of a watch in JSON or YAML; YAML
// documents are separated by "---".
func printObject(w io.Writer, raw json.RawMessage, output string) error {
	if output == YAML {
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
	}
	return printTasksRaw(w, raw, output)
}

// grid writes aligned columns like text/tabwriter (minimum width 2,
// padding 2, the last column unpadded) but keeps its widths between
// writes, so that a watch's later rows line up under the first table.
type grid struct {
	w      io.Writer
	widths []int
}

// fit widens the columns to hold rows.
func (g *grid) fit(rows ...[]string) {
	for _, r := range rows {
		for i, cell := range r {
			if i == len(r)-1 {
				break // the last column is not padded
			}
			for len(g.widths) <= i {
				g.widths = append(g.widths, 0)
			}
			g.widths[i] = max(g.widths[i], utf8.RuneCountInString(cell)+2, 2)
		}
	}
}

// write fits and writes rows.
func (g *grid) write(rows ...[]string) error {
	g.fit(rows...)
	var b strings.Builder
	for _, r := range rows {
		for i, cell := range r {
			b.WriteString(cell)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", g.widths[i]-utf8.RuneCountInString(cell)))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(g.w, b.String())
	return err
}

// human writes a resource map for a table: quantity strings as the server
// wrote them, numbers (canonical units: millicores, bytes,
// milli-devices) as a person writes them ("1.5", "80Gi", "0.5"), sorted
// by name; "-" when empty.
func human(m map[string]any) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+quantity(k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func quantity(name string, v any) string {
	n := resource.Name(name)
	switch v := v.(type) {
	case float64:
		if v == float64(int64(v)) {
			return readable(n, int64(v))
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		if c, err := resource.ParseQuantity(v, n.Scale()); err == nil {
			return readable(n, c)
		}
		return v
	}
	return fmt.Sprint(v)
}

// readable writes a canonical value for a table: cpu and devices as a
// person writes them ("1.5", "250m"), bytes in the largest binary unit
// they reach, exactly when it divides them ("80Gi") and else to one
// decimal ("23.5Gi" for 24684084Ki).
func readable(n resource.Name, v int64) string {
	if n.Scale() != resource.Units {
		return n.Format(v)
	}
	units := []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	u := 0
	for u+1 < len(units) && v>>(10*(u+1)) > 0 {
		u++
	}
	if size := int64(1) << (10 * u); v%size != 0 {
		return strconv.FormatFloat(float64(v)/float64(size), 'f', 1, 64) + units[u]
	}
	return strconv.FormatInt(v>>(10*u), 10) + units[u]
}

// percents writes utilizations (0..1) as "cpu=12%,memory=40%"; "-" when
// there are none.
func percents(m map[string]float64) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s=%.0f%%", k, v*100))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// labels writes a label map as "k=v,k2=v2" (sorted); "-" when empty.
func labelList(m map[string]string) string {
	if len(m) == 0 {
		return "-"
	}
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func prio(p *int) int {
	if p == nil {
		return 2
	}
	return *p
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age writes how long ago t was, as kubectl does: 45s, 12m, 5h, 3d
// (two units while short: 2m5s, 3h4m); "-" for the zero time.
func age(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 120:
		return fmt.Sprintf("%ds", s)
	case s < 10*60:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 3*3600:
		return fmt.Sprintf("%dm", s/60)
	case s < 8*3600:
		if (s/60)%60 == 0 {
			return fmt.Sprintf("%dh", s/3600)
		}
		return fmt.Sprintf("%dh%dm", s/3600, (s/60)%60)
	case s < 48*3600:
		return fmt.Sprintf("%dh", s/3600)
	}
	return fmt.Sprintf("%dd", s/86400)
}

// printObjects writes objects as rows of g, the header first when header
// (output table or wide), or as kind/NAME lines (output name).
func printObjects[T any](g *grid, objs []T, output string, header bool, kind string, name func(T) string, head func(wide bool) []string, row func(o T, wide bool) []string) error {
	if output == Name {
		for _, o := range objs {
			if _, err := fmt.Fprintln(g.w, kind+"/"+name(o)); err != nil {
				return err
			}
		}
		return nil
	}
	wide := output == Wide
	var rows [][]string
	if header {
		rows = append(rows, head(wide))
	}
	for _, o := range objs {
		rows = append(rows, row(o, wide))
	}
	return g.write(rows...)
}

// DefaultQueue names the queue of work that names none, as the server's
// metrics, traces and web UI do.
const DefaultQueue = "default"

// queueOf is a task's, job's or service's queue as printed.
func queueOf(q string) string {
	if q == "" {
		return DefaultQueue
	}
	return q
}
