package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/resource"
)

// Output formats.
const (
	Table = "table"
	JSON  = "json"
	YAML  = "yaml"
)

// CheckOutput validates -o.
func CheckOutput(o string) error {
	switch o {
	case Table, JSON, YAML:
		return nil
	}
	return fmt.Errorf("-o: must be table, json or yaml, got %q", o)
}

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

// task is the subset of the API's task object the CLI shows.
type task struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Queue    string `json:"queue"`
	Priority *int   `json:"priority"`
	State    string `json:"state"`
	Node     string `json:"node"`
	Devices  []struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Share int    `json:"share"`
	} `json:"devices"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
}

// devices is the task's devices, short: the device type without its
// domain ("gpu" for nvidia.com/gpu, unless two types share it), runs of
// numeric ids as ranges ("gpu:0-3"), and a share of one device after "@"
// in milli-devices ("gpu:0@500m").
func (t task) devices() string {
	types := map[string]map[string]bool{} // short name: its types
	for _, d := range t.Devices {
		s := d.Type[strings.LastIndex(d.Type, "/")+1:]
		if types[s] == nil {
			types[s] = map[string]bool{}
		}
		types[s][d.Type] = true
	}
	short := map[string]string{}
	for s, ts := range types {
		for ty := range ts {
			short[ty] = s
			if len(ts) > 1 {
				short[ty] = ty
			}
		}
	}
	var groups []string
	for i := 0; i < len(t.Devices); {
		d := t.Devices[i]
		share := ""
		if d.Share != 0 && d.Share != 1000 {
			share = fmt.Sprintf("@%dm", d.Share)
		}
		var ids []string
		j := i
		for ; j < len(t.Devices) && t.Devices[j].Type == d.Type && t.Devices[j].Share == d.Share; j++ {
			ids = append(ids, t.Devices[j].ID)
		}
		groups = append(groups, short[d.Type]+":"+idRanges(ids)+share)
		i = j
	}
	return strings.Join(groups, " ")
}

// idRanges writes ids with runs of consecutive numbers as "0-3".
func idRanges(ids []string) string {
	var out []string
	for i := 0; i < len(ids); {
		a, err := strconv.Atoi(ids[i])
		j := i + 1
		if err == nil {
			for j < len(ids) {
				b, err := strconv.Atoi(ids[j])
				if err != nil || b != a+(j-i) || ids[j] != strconv.Itoa(b) {
					break
				}
				j++
			}
		}
		if j-i > 1 {
			out = append(out, ids[i]+"-"+ids[j-1])
		} else {
			out = append(out, ids[i])
		}
		i = j
	}
	return strings.Join(out, ",")
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
	switch v := v.(type) {
	case float64:
		if v == float64(int64(v)) {
			return resource.Name(name).Format(int64(v))
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	case string:
		return v
	}
	return fmt.Sprint(v)
}

func prio(p *int) int {
	if p == nil {
		return 2
	}
	return *p
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

// Submit sends a file's tasks, or its job to POST /jobs; with wait, tasks
// go to /schedule, which waits up to wait for placement, and a task not
// placed by then, or ended without success, is an error (after the
// answer is printed) that names its state and reason.
func Submit(ctx context.Context, c *Client, w io.Writer, body []byte, wait time.Duration, output string) error {
	path := "/api/v1/tasks"
	job := IsJob(body)
	switch {
	case job:
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
	if err := printTasks(w, raw, output); err != nil {
		return err
	}
	if wait > 0 && !job {
		return unplaced(raw, wait)
	}
	return nil
}

// placedStates are the states of a task that got its placement and has
// not failed.
var placedStates = map[string]bool{"scheduled": true, "running": true, "succeeded": true}

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
		if placedStates[t.State] {
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

// printTasks prints one task object or {"tasks":[...]}.
func printTasks(w io.Writer, raw json.RawMessage, output string) error {
	switch output {
	case JSON:
		var v any
		json.Unmarshal(raw, &v)
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
	return printTaskTable(w, list.Tasks)
}

// printTaskTable prints tasks as a table.
func printTaskTable(w io.Writer, tasks []task) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPRIORITY\tSTATE\tNODE\tDEVICES\tATTEMPT\tREASON")
	for _, t := range tasks {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%s\n", t.ID, prio(t.Priority), t.State, t.Node, t.devices(), t.Attempt, t.Reason)
	}
	return tw.Flush()
}

// ListOptions are get tasks' filter, paging and order.
type ListOptions struct {
	State string
	Limit int    // tasks shown (without All)
	All   bool   // show every task (up to MaxList)
	Sort  string // submitted (newest first, the default), state or name
}

// MaxList bounds how many tasks get tasks reads, following the server's
// cursors.
const MaxList = 100000

// pageSize is the limit of one GET /tasks page (the server's largest; a
// variable for tests).
var pageSize = 10000

// CheckSort validates --sort.
func CheckSort(s string) error {
	switch s {
	case "", "submitted", "state", "name":
		return nil
	}
	return fmt.Errorf("--sort: must be submitted, state or name, got %q", s)
}

// listed is one task of a list: what sorting needs, and its object as
// the server sent it (JSON and YAML print it unchanged).
type listed struct {
	task
	Submitted time.Time `json:"submitted"`
	raw       json.RawMessage
	order     int // the server's order (submission)
}

// GetTasks lists tasks: it reads every page (up to MaxList), sorts them
// (newest first unless Sort says otherwise) and prints the first Limit,
// or all of them with All; when it shows fewer than there are, it says so
// on note (standard error).
func GetTasks(ctx context.Context, c *Client, w, note io.Writer, o ListOptions, output string) error {
	if err := CheckSort(o.Sort); err != nil {
		return err
	}
	if !o.All && o.Limit < 1 {
		return fmt.Errorf("--limit: must be at least 1, got %d", o.Limit)
	}
	var all []listed
	cursor, more := "", false
	for {
		q := url.Values{}
		if o.State != "" {
			q.Set("state", o.State)
		}
		q.Set("limit", fmt.Sprint(min(pageSize, MaxList-len(all))))
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page struct {
			Tasks  []json.RawMessage `json:"tasks"`
			Cursor string            `json:"cursor"`
		}
		if _, err := c.Do(ctx, "GET", "/api/v1/tasks?"+q.Encode(), nil, &page); err != nil {
			return err
		}
		for _, r := range page.Tasks {
			l := listed{raw: r, order: len(all)}
			if err := json.Unmarshal(r, &l); err != nil {
				return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
			}
			all = append(all, l)
		}
		if page.Cursor == "" {
			break
		}
		if page.Cursor == cursor || len(all) >= MaxList {
			more = true
			break
		}
		cursor = page.Cursor
	}
	sortListed(all, o.Sort)
	shown := all
	if !o.All && len(shown) > o.Limit {
		shown = shown[:o.Limit]
	}
	switch {
	case more:
		fmt.Fprintf(note, "showing %d of more than %d tasks (read at most %d; narrow with --state)\n", len(shown), len(all), MaxList)
	case len(shown) < len(all):
		fmt.Fprintf(note, "showing %d of %d tasks (--limit, --all)\n", len(shown), len(all))
	}
	if output != Table {
		raws := make([]json.RawMessage, len(shown))
		for i, l := range shown {
			raws[i] = l.raw
		}
		b, err := json.Marshal(map[string]any{"tasks": raws})
		if err != nil {
			return err
		}
		return printTasks(w, b, output)
	}
	ts := make([]task, len(shown))
	for i, l := range shown {
		ts[i] = l.task
	}
	return printTaskTable(w, ts)
}

// sortListed orders tasks by by: submitted (newest first), state (then
// newest first) or name (then id).
func sortListed(ts []listed, by string) {
	newer := func(a, b listed) bool {
		if !a.Submitted.Equal(b.Submitted) {
			return a.Submitted.After(b.Submitted)
		}
		return a.order > b.order
	}
	sort.SliceStable(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		switch by {
		case "state":
			if a.State != b.State {
				return a.State < b.State
			}
		case "name":
			if a.Name != b.Name {
				return a.Name < b.Name
			}
			if a.ID != b.ID {
				return a.ID < b.ID
			}
		}
		return newer(a, b)
	})
}

// Describe prints one task.
func Describe(ctx context.Context, c *Client, w io.Writer, id, output string) error {
	var raw json.RawMessage
	if _, err := c.Do(ctx, "GET", "/api/v1/tasks/"+url.PathEscape(id), nil, &raw); err != nil {
		return err
	}
	if output == Table {
		output = YAML // one object reads best as YAML
	}
	return printTasks(w, raw, output)
}

// Logs copies a task's output to w; with follow it streams until the task
// ends or ctx is done.
func Logs(ctx context.Context, c *Client, w io.Writer, id string, follow bool) error {
	path := "/api/v1/tasks/" + url.PathEscape(id) + "/logs"
	if follow {
		path += "?follow=true"
	}
	return c.Stream(ctx, path, w, follow)
}

// Cancel cancels a task.
func Cancel(ctx context.Context, c *Client, w io.Writer, id string) error {
	var t task
	if _, err := c.Do(ctx, "DELETE", "/api/v1/tasks/"+url.PathEscape(id), nil, &t); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s %s\n", t.ID, t.State)
	return err
}

// Complete reports a lease finished with exitCode.
func Complete(ctx context.Context, c *Client, w io.Writer, id string, exitCode int) error {
	body, _ := json.Marshal(map[string]int{"exitCode": exitCode})
	var t task
	if _, err := c.Do(ctx, "POST", "/api/v1/tasks/"+url.PathEscape(id)+"/complete", body, &t); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s %s\n", t.ID, t.State)
	return err
}

// Renew extends a lease.
func Renew(ctx context.Context, c *Client, w io.Writer, id string) error {
	var t task
	if _, err := c.Do(ctx, "POST", "/api/v1/tasks/"+url.PathEscape(id)+"/renew", nil, &t); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s %s renewed\n", t.ID, t.State)
	return err
}

// NodeAction cordons, uncordons or drains a node.
func NodeAction(ctx context.Context, c *Client, w io.Writer, action, name string) error {
	var out struct{ Name, State string }
	if _, err := c.Do(ctx, "POST", "/api/v1/nodes/"+url.PathEscape(name)+"/"+action, nil, &out); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s %s\n", out.Name, out.State)
	return err
}

// GetNodes lists nodes.
func GetNodes(ctx context.Context, c *Client, w io.Writer, output string) error {
	var raw json.RawMessage
	if _, err := c.Do(ctx, "GET", "/api/v1/nodes", nil, &raw); err != nil {
		return err
	}
	if output != Table {
		return printTasksRaw(w, raw, output)
	}
	var body struct {
		Nodes []struct {
			Name      string         `json:"name"`
			State     string         `json:"state"`
			Capacity  map[string]any `json:"capacity"`
			Allocated map[string]any `json:"allocated"`
			Tasks     int            `json:"tasks"`
			Devices   []struct {
				Type, Model string
			} `json:"devices"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tCAPACITY\tALLOCATED\tTASKS\tDEVICES")
	for _, n := range body.Nodes {
		state := n.State
		if state == "" {
			state = "ready"
		}
		count := map[string]int{}
		for _, d := range n.Devices {
			count[d.Type+" "+d.Model]++
		}
		var devs []string
		for k, v := range count {
			devs = append(devs, fmt.Sprintf("%d×%s", v, k))
		}
		sort.Strings(devs)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", n.Name, state, human(n.Capacity), human(n.Allocated), n.Tasks, strings.Join(devs, ","))
	}
	return tw.Flush()
}

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
	json.Unmarshal(raw, &v)
	b, _ := json.MarshalIndent(v, "", "  ")
	_, err := fmt.Fprintln(w, string(b))
	return err
}

// GetQueues lists the queues with their usage, fair share and waiting
// tasks.
func GetQueues(ctx context.Context, c *Client, w io.Writer, output string) error {
	var raw json.RawMessage
	if _, err := c.Do(ctx, "GET", "/api/v1/queues", nil, &raw); err != nil {
		return err
	}
	if output != Table {
		return printTasksRaw(w, raw, output)
	}
	var body struct {
		Queues []struct {
			Name       string         `json:"name"`
			Parent     string         `json:"parent"`
			Weight     float64        `json:"weight"`
			Guaranteed map[string]any `json:"guaranteed"`
			Max        map[string]any `json:"max"`
			Usage      map[string]any `json:"usage"`
			FairShare  map[string]any `json:"fairShare"`
			Pending    map[string]int `json:"pending"`
		} `json:"queues"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return err
	}
	list := human
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tPARENT\tWEIGHT\tGUARANTEED\tMAX\tUSAGE\tFAIR SHARE\tPENDING")
	for _, q := range body.Queues {
		parent := q.Parent
		if parent == "" {
			parent = "root"
		}
		weight := q.Weight
		if weight == 0 {
			weight = 1
		}
		var pend []string
		total := 0
		for k, n := range q.Pending {
			pend = append(pend, fmt.Sprintf("%s=%d", k, n))
			total += n
		}
		sort.Strings(pend)
		p := strconv.Itoa(total)
		if len(pend) > 0 {
			p += " (" + strings.Join(pend, ",") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%g\t%s\t%s\t%s\t%s\t%s\n", q.Name, parent, weight, list(q.Guaranteed), list(q.Max), list(q.Usage), list(q.FairShare), p)
	}
	return tw.Flush()
}

// ReleaseNode frees a node from its holder (admin): it leaves the cluster
// and the next agent to register the name holds it.
func ReleaseNode(ctx context.Context, c *Client, w io.Writer, name string) error {
	var out struct{ Name, Released string }
	if _, err := c.Do(ctx, "POST", "/api/v1/nodes/"+url.PathEscape(name)+"/release", nil, &out); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s released from the %s; its tasks are re-queued, and the next agent to register it holds it\n", out.Name, out.Released)
	return err
}
