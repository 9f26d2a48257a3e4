package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

// AccountingOptions are the filters of history and usage: each, when
// set, is sent as the query parameter of its name.
type AccountingOptions struct {
	Since, Until, User, Queue, Job, Node, Model, State, Tenant string
	// By groups usage (comma-separated fields).
	By string
	// Limit bounds the records history shows (without All).
	Limit int
	All   bool
}

func (o AccountingOptions) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"since": o.Since, "until": o.Until, "user": o.User, "queue": o.Queue, "job": o.Job,
		"node": o.Node, "model": o.Model, "state": o.State, "tenant": o.Tenant, "by": o.By} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// History prints the accounting records of finished work (GET
// /api/v1/accounting, every page up to the limit), as sacct does.
func History(ctx context.Context, c *Client, w, note io.Writer, o AccountingOptions, output string) error {
	limit := o.Limit
	if o.All || limit <= 0 {
		limit = MaxList
	}
	raws, more, err := readPages(ctx, c, "/api/v1/accounting", "records", o.query(), limit)
	if err != nil {
		return err
	}
	if !tabular(output) && output != Name {
		b, err := json.Marshal(map[string]any{"records": raws})
		if err != nil {
			return err
		}
		return printTasksRaw(w, b, output)
	}
	recs := make([]api.AccountingRecord, len(raws))
	for i, raw := range raws {
		if err := json.Unmarshal(raw, &recs[i]); err != nil {
			return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
		}
	}
	g := &grid{w: w}
	err = printObjects(g, recs, output, true, "task", func(a api.AccountingRecord) string { return a.ID }, historyHeader, historyRow)
	if err == nil && more {
		fmt.Fprintf(note, "(showing the first %d records: --all or --limit for more, --since to narrow)\n", len(recs))
	}
	return err
}

func historyHeader(wide bool) []string {
	h := []string{"ID", "NAME", "USER", "QUEUE", "STATE", "EXIT", "NODE", "DEVICES", "STARTED", "ELAPSED", "CPU-H", "GPU-H"}
	if wide {
		h = append(h, "JOB", "TENANT", "SUBMITTED", "FINISHED", "ATTEMPTS", "REASON")
	}
	return h
}

func historyRow(a api.AccountingRecord, wide bool) []string {
	exit, started, elapsed := "-", "-", "-"
	if a.ExitCode != nil {
		exit = strconv.Itoa(*a.ExitCode)
	}
	if a.Started != nil {
		started = stamp(*a.Started)
		elapsed = (a.Finished.Sub(*a.Started)).Round(time.Second).String()
	}
	devs := task{Devices: make([]deviceRef, len(a.Devices))}
	for i, d := range a.Devices {
		devs.Devices[i] = deviceRef{Type: d.Type, ID: d.ID, Model: d.Model, Share: int(d.Share)}
	}
	gpu := 0.0
	for t, h := range a.DeviceHours {
		if strings.HasSuffix(t, "/gpu") {
			gpu += h
		}
	}
	row := []string{a.ID, dash(a.Name), dash(a.User), a.Queue, a.State, exit, dash(a.Node), devs.fullDevices(), started, elapsed,
		hours(a.CPUHours), hours(gpu)}
	if wide {
		row = append(row, dash(a.Job), dash(a.Tenant), stamp(a.Submitted), stamp(a.Finished), strconv.Itoa(a.Attempts), a.Reason)
	}
	return row
}

// stamp writes a time as sacct does, to the second, in local time.
func stamp(t time.Time) string { return t.Local().Format("2006-01-02T15:04:05") }

// hours writes resource-hours with two decimals, four below 0.01 ("-"
// for none).
func hours(h float64) string {
	switch {
	case h == 0:
		return "-"
	case h < 0.01:
		return strconv.FormatFloat(h, 'f', 4, 64)
	}
	return strconv.FormatFloat(h, 'f', 2, 64)
}

// Usage prints what the work used over a range, grouped (GET
// /api/v1/usage), as sreport does: a row per group with its tasks,
// CPU-hours and hours per device type, then the total.
func Usage(ctx context.Context, c *Client, w io.Writer, o AccountingOptions, output string) error {
	var raw json.RawMessage
	if _, err := c.Do(ctx, "GET", "/api/v1/usage?"+o.query().Encode(), nil, &raw); err != nil {
		return err
	}
	switch output {
	case JSON, YAML:
		return printTasksRaw(w, raw, output)
	case Name:
		return fmt.Errorf("-o name: a usage report has no names; use table, wide, json or yaml")
	}
	var rep api.UsageReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
	}
	var types []string
	for _, r := range append(slices.Clone(rep.Rows), rep.Total) {
		for t := range r.DeviceHours {
			if !slices.Contains(types, t) {
				types = append(types, t)
			}
		}
	}
	slices.Sort(types)
	head := []string{}
	for _, f := range rep.By {
		head = append(head, strings.ToUpper(f))
	}
	head = append(head, "TASKS", "CPU-HOURS")
	for _, t := range types {
		head = append(head, strings.ToUpper(t[strings.LastIndex(t, "/")+1:])+"-HOURS")
	}
	row := func(r api.UsageRow, total bool) []string {
		out := []string{}
		for i, f := range rep.By {
			v := dash(r.Group[f])
			if total {
				v = map[bool]string{true: "TOTAL", false: ""}[i == 0]
			}
			out = append(out, v)
		}
		out = append(out, strconv.Itoa(r.Tasks), hours(r.CPUHours))
		for _, t := range types {
			out = append(out, hours(r.DeviceHours[t]))
		}
		return out
	}
	fmt.Fprintf(w, "Usage %s - %s\n", stamp(rep.Since), stamp(rep.Until))
	rows := [][]string{head}
	for _, r := range rep.Rows {
		rows = append(rows, row(r, false))
	}
	if len(rep.By) > 0 {
		rows = append(rows, row(rep.Total, true))
	}
	g := &grid{w: w}
	g.fit(rows...)
	return g.write(rows...)
}
