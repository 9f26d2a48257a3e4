package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"text/tabwriter"
)

// job is the part of a job view the CLI prints.
type job struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Queue     string         `json:"queue"`
	State     string         `json:"state"`
	Counts    map[string]int `json:"counts"`
	Submitted string         `json:"submitted"`
}

// GetJobs lists jobs (GET /api/v1/jobs), following the server's cursors up
// to MaxList; state filters them.
func GetJobs(ctx context.Context, c *Client, w io.Writer, state, output string) error {
	var all []json.RawMessage
	cursor := ""
	for len(all) < MaxList {
		q := url.Values{}
		if state != "" {
			q.Set("state", state)
		}
		q.Set("limit", fmt.Sprint(min(pageSize, MaxList-len(all))))
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Jobs   []json.RawMessage `json:"jobs"`
			Cursor string            `json:"cursor"`
		}
		if _, err := c.Do(ctx, "GET", "/api/v1/jobs?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		all = append(all, page.Jobs...)
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	if output != Table {
		b, err := json.Marshal(map[string]any{"jobs": all})
		if err != nil {
			return err
		}
		return printTasksRaw(w, b, output)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tQUEUE\tSTATE\tTASKS\tSUBMITTED")
	for _, raw := range all {
		var j job
		if err := json.Unmarshal(raw, &j); err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, dash(j.Name), dash(j.Queue), j.State, counts(j.Counts), j.Submitted)
	}
	return tw.Flush()
}

// counts writes a job's task counts: "3 (2 succeeded, 1 running)".
func counts(m map[string]int) string {
	total := 0
	parts := make([]string, 0, len(m))
	for s, n := range m {
		total += n
		parts = append(parts, fmt.Sprintf("%d %s", n, s))
	}
	sort.Strings(parts)
	if len(parts) == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", total, strings.Join(parts, ", "))
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// CancelJob cancels a job's unfinished tasks.
func CancelJob(ctx context.Context, c *Client, w io.Writer, id string) error {
	var j job
	if _, err := c.Do(ctx, "DELETE", "/api/v1/jobs/"+url.PathEscape(id), nil, &j); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "job %s %s\n", j.ID, j.State)
	return err
}

// CancelAny cancels the task id, or the job id when no task has that id
// (as kubectl delete finds the object by name).
func CancelAny(ctx context.Context, c *Client, w io.Writer, id string) error {
	err := Cancel(ctx, c, w, id)
	if !notFound(err) {
		return err
	}
	if jerr := CancelJob(ctx, c, w, id); !notFound(jerr) {
		return jerr
	}
	return fmt.Errorf("no task or job %q", id)
}

// notFound reports whether err is the server's 404.
func notFound(err error) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Status == 404
}
