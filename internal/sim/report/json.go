package report

import (
	"encoding/json"
	"io"

	"github.com/hetsched/hetsched/internal/sim"
)

// Document is what JSON writes: the runs as given and their per-policy
// summaries.
type Document struct {
	Runs    []sim.Result `json:"runs"`
	Summary []Summary    `json:"summary"`
}

// JSON writes rs and Aggregate(rs) to w as one indented JSON document,
// {"runs": [...], "summary": [...]}. JSON has no NaN or Inf: a run holding
// one is an error (sim.Result promises none); summaries never hold them.
func JSON(w io.Writer, rs []sim.Result) error {
	d := Document{Runs: rs, Summary: Aggregate(rs)}
	if d.Runs == nil {
		d.Runs = []sim.Result{}
	}
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return errorf("json: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return errorf("json: %w", err)
	}
	return nil
}
