package report

import (
	"io"
	"strings"
	"text/tabwriter"

	"github.com/hetsched/hetsched/internal/sim"
)

// Table writes one row per policy of rs to w as an aligned text table:
// means over the policy's seeds, "± sd" where there are several. Columns
// absent or all zero for the whole run set (JCT when nothing departs, TPU
// utilization without TPUs, fairness with one queue, a tier without jobs)
// are left out.
func Table(w io.Writer, rs []sim.Result) error {
	ss := Aggregate(rs)
	cols := columns(ss)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(c.head)
	}
	b.WriteByte('\n')
	for _, s := range ss {
		for i, c := range cols {
			if i > 0 {
				b.WriteByte('\t')
			}
			// A tab or newline in a policy name would break the layout.
			b.WriteString(strings.Map(func(r rune) rune {
				if r == '\t' || r == '\n' || r == '\r' {
					return ' '
				}
				return r
			}, c.get(s).text()))
		}
		b.WriteByte('\n')
	}
	if _, err := io.WriteString(tw, b.String()); err != nil {
		return errorf("table: %w", err)
	}
	if err := tw.Flush(); err != nil {
		return errorf("table: %w", err)
	}
	return nil
}
