package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// ReadSpec reads a task, a task list ({"tasks":[...]}) or a list of tasks
// from a YAML or JSON file ("-" is standard input) and returns the JSON
// body to send.
func ReadSpec(path string, stdin io.Reader) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(stdin, 64<<20))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("-f: %w", err)
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("-f %s: not YAML or JSON: %w", path, err)
	}
	// A bare list becomes {"tasks": [...]}.
	if t := strings.TrimSpace(string(j)); strings.HasPrefix(t, "[") {
		j = []byte(`{"tasks":` + t + `}`)
	}
	return j, nil
}

// IsJob reports whether a spec body is a job: an object with tasks and
// any other member (id, name, gang, failurePolicy, ...); {"tasks":[...]}
// alone is a task list.
func IsJob(body []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	_, ok := top["tasks"]
	return ok && len(top) > 1
}

// Submit sends a file's tasks, or its job to POST /jobs, and waits as
// wait says: for the end (each task's final state, printed; the first
// that did not succeed gives the ExitError's code; a job that did not
// succeed is exit 1), or for placement (tasks go to /schedule, which
// waits up to the limit, and a task not placed by then, or ended without
// success, is an error naming its state and reason).
func Submit(ctx context.Context, c *Client, w io.Writer, body []byte, mode WaitMode, output string) error {
	path := "/api/v1/tasks"
	isJob := IsJob(body)
	wait := time.Duration(0)
	if mode.On && mode.Placed {
		wait = mode.Limit
	}
	switch {
	case isJob:
		path = "/api/v1/jobs"
	case wait > 0:
		path = "/api/v1/schedule?wait=" + url.QueryEscape(wait.String())
	}
	if min := wait + 10*time.Second; wait > 0 && c.HTTP.Timeout > 0 && c.HTTP.Timeout < min {
		// The answer comes after the wait: the request may take that long.
		cc, hc := *c, *c.HTTP
		hc.Timeout = min
		cc.HTTP = &hc
		c = &cc
	}
	var raw json.RawMessage
	if _, err := c.Do(ctx, "POST", path, body, &raw); err != nil {
		return err
	}
	if isJob {
		var j job
		if err := json.Unmarshal(raw, &j); err != nil {
			return fmt.Errorf("unexpected answer: %w", err)
		}
		if output == Name {
			fmt.Fprintln(w, "job/"+j.ID)
		} else if err := printTasks(w, raw, output); err != nil {
			return err
		}
		if mode.On {
			return waitJob(ctx, c, w, j.ID, mode.Limit)
		}
		return nil
	}
	if err := printTasks(w, raw, output); err != nil {
		return err
	}
	switch {
	case wait > 0:
		return unplaced(raw, wait)
	case mode.On:
		ids, err := submittedIDs(raw)
		if err != nil {
			return err
		}
		return waitTasks(ctx, c, w, ids, mode.Limit)
	}
	return nil
}

// placed reports whether a task in state got its placement and has not
// failed.
func placed(state string) bool {
	return state == "scheduled" || state == "running" || state == "succeeded"
}

// unplaced is the error of a /schedule answer with tasks that were not
// placed within wait or ended without success: each with its state and
// reason.
func unplaced(raw json.RawMessage, wait time.Duration) error {
	var list struct {
		Tasks []task `json:"tasks"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || list.Tasks == nil {
		var one task
		if err := json.Unmarshal(raw, &one); err != nil {
			return fmt.Errorf("unexpected answer: %w", err)
		}
		list.Tasks = []task{one}
	}
	var bad []string
	for _, t := range list.Tasks {
		if placed(t.State) {
			continue
		}
		s := fmt.Sprintf("task %s %s", t.ID, t.State)
		switch t.State {
		case "pending", "blocked", "preempted":
			s = fmt.Sprintf("task %s not placed within %s (%s)", t.ID, wait, t.State)
		}
		if t.Reason != "" {
			s += ": " + t.Reason
		}
		bad = append(bad, s)
	}
	switch {
	case len(bad) == 0:
		return nil
	case len(bad) > 3:
		return fmt.Errorf("%d of %d tasks not placed: %s; and %d more", len(bad), len(list.Tasks), strings.Join(bad[:3], "; "), len(bad)-3)
	case len(list.Tasks) > 1:
		return fmt.Errorf("%d of %d tasks not placed: %s", len(bad), len(list.Tasks), strings.Join(bad, "; "))
	}
	return errors.New(bad[0])
}

// printTasks prints one task object, {"tasks":[...]} or {"ids":[...]}.
func printTasks(w io.Writer, raw json.RawMessage, output string) error {
	switch output {
	case JSON:
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return fmt.Errorf("unexpected answer: %w", err)
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		_, err := fmt.Fprintln(w, string(b))
		return err
	case YAML:
		b, err := yaml.JSONToYAML(raw)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	var list struct {
		Tasks []task   `json:"tasks"`
		IDs   []string `json:"ids"`
	}
	if err := json.Unmarshal(raw, &list); err == nil && list.IDs != nil {
		for _, id := range list.IDs {
			if output == Name {
				id = "task/" + id
			}
			fmt.Fprintln(w, id)
		}
		return nil
	}
	if err := json.Unmarshal(raw, &list); err != nil || list.Tasks == nil {
		var one task
		if err := json.Unmarshal(raw, &one); err != nil {
			return err
		}
		list.Tasks = []task{one}
	}
	return printTaskTable(w, list.Tasks, output)
}
