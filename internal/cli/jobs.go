package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// job is the part of a job view the CLI prints.
type job struct {
	ID            string         `json:"id"`
	Name          string         `json:"name"`
	Queue         string         `json:"queue"`
	Priority      *int           `json:"priority"`
	State         string         `json:"state"`
	Counts        map[string]int `json:"counts"`
	Submitted     string         `json:"submitted"`
	FailurePolicy string         `json:"failurePolicy"`
	Gang          *struct {
		MinMember int    `json:"minMember"`
		Timeout   string `json:"timeout"`
	} `json:"gang"`
	Tasks []task `json:"tasks"`
}

// gang writes a job's gang: "minMember 4, timeout 60s"; "-" for none.
func (j job) gang() string {
	if j.Gang == nil {
		return "-"
	}
	s := fmt.Sprintf("minMember %d", j.Gang.MinMember)
	if j.Gang.Timeout != "" {
		s += ", timeout " + j.Gang.Timeout
	}
	return s
}

func (j job) failurePolicy() string {
	if j.FailurePolicy == "" {
		return "failFast"
	}
	return j.FailurePolicy
}

func jobHeader(wide bool) []string {
	if wide {
		return []string{"ID", "NAME", "QUEUE", "PRIORITY", "STATE", "TASKS", "GANG", "FAILURE POLICY", "AGE"}
	}
	return []string{"ID", "NAME", "QUEUE", "STATE", "TASKS", "AGE"}
}

func jobRow(j job, wide bool) []string {
	submitted := "-"
	if t, err := time.Parse(time.RFC3339Nano, j.Submitted); err == nil {
		submitted = age(t, time.Now())
	}
	if wide {
		return []string{j.ID, dash(j.Name), queueOf(j.Queue), strconv.Itoa(prio(j.Priority)), j.State, counts(j.Counts), j.gang(), j.failurePolicy(), submitted}
	}
	return []string{j.ID, dash(j.Name), queueOf(j.Queue), j.State, counts(j.Counts), submitted}
}

// GetJobs lists jobs (GET /api/v1/jobs), following the server's cursors up
// to MaxList; state filters them.
func GetJobs(ctx context.Context, c *Client, w io.Writer, state, output string) error {
	all, err := listJobs(ctx, c, state)
	if err != nil {
		return err
	}
	if !tabular(output) && output != Name {
		b, err := json.Marshal(map[string]any{"jobs": all})
		if err != nil {
			return err
		}
		return printTasksRaw(w, b, output)
	}
	jobs := make([]job, len(all))
	for i, raw := range all {
		if err := json.Unmarshal(raw, &jobs[i]); err != nil {
			return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
		}
	}
	return printJobs(&grid{w: w}, jobs, output, true)
}

// listJobs reads every page of GET /api/v1/jobs (up to MaxList jobs).
func listJobs(ctx context.Context, c *Client, state string) ([]json.RawMessage, error) {
	q := url.Values{}
	if state != "" {
		q.Set("state", state)
	}
	all, _, err := readPages(ctx, c, "/api/v1/jobs", "jobs", q, MaxList)
	return all, err
}

// printJobs writes jobs as rows of g (with the header when header) or as
// names.
func printJobs(g *grid, jobs []job, output string, header bool) error {
	return printObjects(g, jobs, output, header, "job", func(j job) string { return j.ID }, jobHeader, jobRow)
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
