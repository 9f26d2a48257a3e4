package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// WaitMode is what --wait waits for (issue 45 §1.1), as Slurm's sbatch
// --wait: the end of the work, exiting with its code; or, with
// --wait=placed, only its placement (the server's /schedule).
//
//	--wait              the end, however long
//	--wait=DUR          the end, at most DUR (then exit 1: still running)
//	--wait=placed       placement within 2s
//	--wait=placed:DUR   placement within DUR
type WaitMode struct {
	On     bool
	Placed bool
	Limit  time.Duration // 0: no limit
}

// DefaultPlacedWait is --wait=placed's limit.
const DefaultPlacedWait = 2 * time.Second

// ParseWait reads --wait's value ("" for a bare --wait).
func ParseWait(s string) (WaitMode, error) {
	m := WaitMode{On: true}
	rest := s
	switch {
	case s == "" || s == "end":
		return m, nil
	case s == "placed":
		m.Placed, m.Limit = true, DefaultPlacedWait
		return m, nil
	case strings.HasPrefix(s, "placed:"):
		m.Placed, rest = true, strings.TrimPrefix(s, "placed:")
	case strings.HasPrefix(s, "end:"):
		rest = strings.TrimPrefix(s, "end:")
	}
	d, err := time.ParseDuration(rest)
	if err != nil || d <= 0 {
		return m, fmt.Errorf("--wait: must be empty (the end), DUR (the end within DUR), placed or placed:DUR; got %q", s)
	}
	m.Limit = d
	return m, nil
}

// ExitError ends the command with Code (the work's exit code), after
// saying Err when it is set.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// final reports whether a task or job state is final.
func final(state string) bool {
	switch state {
	case "succeeded", "failed", "timeout", "cancelled", "expired", "skipped":
		return true
	}
	return false
}

// exitCodeOf is the exit code a finished task ends a waiting command
// with: 0 when it succeeded, its own code when it failed with one,
// 124 for a timeout (as timeout(1)), 1 otherwise.
func exitCodeOf(t task) int {
	switch {
	case t.State == "succeeded":
		return 0
	case t.State == "timeout":
		return 124
	case t.ExitCode != nil && *t.ExitCode > 0 && *t.ExitCode < 256:
		return *t.ExitCode
	}
	return 1
}

// endLine says how a finished task ended: "task ID STATE (exit N): why".
func endLine(t task) string {
	line := fmt.Sprintf("task %s %s", t.ID, t.State)
	if t.ExitCode != nil {
		line += fmt.Sprintf(" (exit %d)", *t.ExitCode)
	}
	if t.State != "succeeded" && t.Reason != "" {
		line += ": " + t.Reason
	}
	return line
}

// pollEvery bounds how often a wait reads a task or job again.
const pollEvery = time.Second

// waitFinal reads path (a task or a job) until its state is final or
// limit passes (0: none), and returns its last answer.
func waitFinal(ctx context.Context, c *Client, path string, limit time.Duration, into any, stateOf func() string) error {
	var deadline <-chan time.Time
	if limit > 0 {
		t := time.NewTimer(limit)
		defer t.Stop()
		deadline = t.C
	}
	every := 100 * time.Millisecond
	for {
		if _, err := c.Do(ctx, "GET", path, nil, into); err != nil {
			return err
		}
		if final(stateOf()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return &ExitError{Code: 1, Err: fmt.Errorf("still %s after %s", stateOf(), limit)}
		case <-time.After(every):
		}
		every = min(2*every, pollEvery)
	}
}

// waitTasks waits for the end of each task and prints one line for each:
// "task ID STATE (exit N)". The error is an ExitError with the first
// failed task's code.
func waitTasks(ctx context.Context, c *Client, w io.Writer, ids []string, limit time.Duration) error {
	code := 0
	var failed []string
	for _, id := range ids {
		var t task
		if err := waitFinal(ctx, c, "/api/v1/tasks/"+url.PathEscape(id), limit, &t, func() string { return t.State }); err != nil {
			return err
		}
		fmt.Fprintln(w, endLine(t))
		if c := exitCodeOf(t); c != 0 {
			if code == 0 {
				code = c
			}
			failed = append(failed, t.ID)
		}
	}
	if code != 0 {
		return &ExitError{Code: code, Err: fmt.Errorf("%d of %d tasks did not succeed: %s", len(failed), len(ids), strings.Join(failed, ", "))}
	}
	return nil
}

// waitJob waits for a job's end and prints its state and its tasks'
// counts; a job that did not succeed is exit 1, naming its failed tasks.
func waitJob(ctx context.Context, c *Client, w io.Writer, id string, limit time.Duration) error {
	var j job
	if err := waitFinal(ctx, c, "/api/v1/jobs/"+url.PathEscape(id), limit, &j, func() string { return j.State }); err != nil {
		return err
	}
	fmt.Fprintf(w, "job %s %s: %s\n", j.ID, j.State, counts(j.Counts))
	if j.State == "succeeded" {
		return nil
	}
	var bad []string
	for _, t := range j.Tasks {
		if t.State != "succeeded" {
			bad = append(bad, t.ID+" "+t.State)
		}
	}
	return &ExitError{Code: 1, Err: fmt.Errorf("job %s %s: %s", j.ID, j.State, strings.Join(bad, ", "))}
}

// submittedIDs are the task ids of a POST /tasks answer.
func submittedIDs(raw json.RawMessage) ([]string, error) {
	var v struct {
		IDs   []string `json:"ids"`
		ID    string   `json:"id"`
		Tasks []task   `json:"tasks"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("unexpected answer: %w", err)
	}
	switch {
	case len(v.IDs) > 0:
		return v.IDs, nil
	case v.ID != "":
		return []string{v.ID}, nil
	}
	for _, t := range v.Tasks {
		v.IDs = append(v.IDs, t.ID)
	}
	if len(v.IDs) == 0 {
		return nil, errors.New("unexpected answer: no task ids")
	}
	return v.IDs, nil
}
