package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// deviceRef is one device a task holds (api.DeviceRef as the server writes it).
type deviceRef struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Model string `json:"model,omitempty"`
	Share int    `json:"share"`
}

// task is the subset of the API's task object the CLI shows.
type task struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Queue     string            `json:"queue"`
	User      string            `json:"user"`
	Priority  *int              `json:"priority"`
	State     string            `json:"state"`
	Node      string            `json:"node"`
	Devices   []deviceRef       `json:"devices"`
	Attempt   int               `json:"attempt"`
	Reason    string            `json:"reason"`
	Submitted time.Time         `json:"submitted"`
	Metadata  map[string]string `json:"metadata"`
	ExitCode  *int              `json:"exitCode"`
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

// fullDevices is the task's devices compact, with their models: the
// short form of devices, each group's model after it ("gpu:0-3
// (H100-80GB)"); "-" for none.
func (t task) fullDevices() string {
	if len(t.Devices) == 0 {
		return "-"
	}
	short := strings.Split(t.devices(), " ")
	var out []string
	k := 0
	for i := 0; i < len(t.Devices) && k < len(short); k++ {
		d := t.Devices[i]
		j := i
		for ; j < len(t.Devices) && t.Devices[j].Type == d.Type && t.Devices[j].Share == d.Share; j++ {
		}
		g := short[k]
		if d.Model != "" {
			g += " (" + d.Model + ")"
		}
		out = append(out, g)
		i = j
	}
	return strings.Join(out, ", ")
}

// taskHeader is the task table's header; wide adds the name, queue and
// age, and shows the devices in full.
func taskHeader(wide bool) []string {
	if wide {
		return []string{"ID", "NAME", "QUEUE", "USER", "PRIORITY", "STATE", "NODE", "DEVICES", "ATTEMPT", "AGE", "REASON"}
	}
	return []string{"ID", "NAME", "PRIORITY", "STATE", "NODE", "DEVICES", "ATTEMPT", "AGE", "REASON"}
}

func taskRow(t task, wide bool, now time.Time) []string {
	p, a := strconv.Itoa(prio(t.Priority)), strconv.Itoa(t.Attempt)
	if wide {
		return []string{t.ID, dash(t.Name), queueOf(t.Queue), dash(t.User), p, t.State, dash(t.Node), t.fullDevices(), a, age(t.Submitted, now), t.Reason}
	}
	return []string{t.ID, dash(t.Name), p, t.State, t.Node, t.devices(), a, age(t.Submitted, now), t.Reason}
}

// printTaskTable prints tasks as a table (output table or wide) or their
// names (task/ID).
func printTaskTable(w io.Writer, tasks []task, output string) error {
	now := time.Now()
	row := func(t task, wide bool) []string { return taskRow(t, wide, now) }
	return printObjects(&grid{w: w}, tasks, output, true, "task", func(t task) string { return t.ID }, taskHeader, row)
}

// ListOptions are get tasks' filter, paging and order.
type ListOptions struct {
	State    string
	User     string // only this user's tasks
	Selector string // label selector on the tasks' metadata (k=v,k!=v,k,!k)
	Limit    int    // tasks shown (without All)
	All      bool   // show every task (up to MaxList)
	Sort     string // submitted (newest first, the default), state or name
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
	raw   json.RawMessage
	order int // the server's order (submission)
}

// readPages reads a listing's pages from GET path?q (its items under
// key), following the cursors until limit items or the last page; more
// says there were more than limit.
func readPages(ctx context.Context, c *Client, path, key string, q url.Values, limit int) (items []json.RawMessage, more bool, err error) {
	cursor := ""
	for {
		q.Set("limit", fmt.Sprint(min(pageSize, limit-len(items))))
		q.Del("cursor")
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var page map[string]json.RawMessage
		if _, err := c.Do(ctx, "GET", path+"?"+q.Encode(), nil, &page); err != nil {
			return nil, false, err
		}
		var got []json.RawMessage
		var next string
		if err := json.Unmarshal(page[key], &got); err != nil {
			return nil, false, fmt.Errorf("unexpected answer from %s: %s: %w", c.Server, key, err)
		}
		if raw, ok := page["cursor"]; ok && json.Unmarshal(raw, &next) != nil {
			return nil, false, fmt.Errorf("unexpected answer from %s: a cursor that is not a string: %s", c.Server, raw)
		}
		items = append(items, got...)
		switch {
		case next == "":
			return items, false, nil
		case next == cursor || len(items) >= limit:
			return items, true, nil
		}
		cursor = next
	}
}

// listTasks reads GET /tasks?q (up to limit tasks); more says there were
// more.
func listTasks(ctx context.Context, c *Client, q url.Values, limit int) (all []listed, more bool, err error) {
	raws, more, err := readPages(ctx, c, "/api/v1/tasks", "tasks", q, limit)
	if err != nil {
		return nil, false, err
	}
	all = make([]listed, 0, len(raws))
	for _, r := range raws {
		l := listed{raw: r, order: len(all)}
		if err := json.Unmarshal(r, &l); err != nil {
			return nil, false, fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
		}
		all = append(all, l)
	}
	return all, more, nil
}

// taskQuery is the GET /tasks filter of o, its selector checked.
func taskQuery(o ListOptions) (url.Values, error) {
	q := url.Values{}
	if o.User != "" {
		q.Set("user", o.User)
	}
	if o.State != "" {
		q.Set("state", o.State)
	}
	if o.Selector != "" {
		if _, err := ParseSelector(o.Selector); err != nil {
			return nil, err
		}
		q.Set("selector", o.Selector)
	}
	return q, nil
}

// GetTasks lists tasks: it reads every page (up to MaxList), sorts them
// (newest first unless Sort says otherwise) and prints the first Limit,
// or all of them with All; when it shows fewer than there are, it says so
// on note (standard error).
func GetTasks(ctx context.Context, c *Client, w, note io.Writer, o ListOptions, output string) error {
	shown, err := getTasks(ctx, c, note, o)
	if err != nil {
		return err
	}
	return printListed(w, shown, output)
}

// getTasks is GetTasks without the printing.
func getTasks(ctx context.Context, c *Client, note io.Writer, o ListOptions) ([]listed, error) {
	if err := CheckSort(o.Sort); err != nil {
		return nil, err
	}
	if !o.All && o.Limit < 1 {
		return nil, fmt.Errorf("--limit: must be at least 1, got %d", o.Limit)
	}
	q, err := taskQuery(o)
	if err != nil {
		return nil, err
	}
	all, more, err := listTasks(ctx, c, q, MaxList)
	if err != nil {
		return nil, err
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
	return shown, nil
}

// printListed prints listed tasks in output.
func printListed(w io.Writer, shown []listed, output string) error {
	if !tabular(output) && output != Name {
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
	return printTaskTable(w, ts, output)
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

// LogOptions choose which output of a task Logs prints.
type LogOptions struct {
	Follow bool
	// Attempt, with AttemptSet, asks for that attempt's output (numbered
	// as the task view's attempt: 0 is the first run); else the current
	// attempt's, or the last one's while the task waits to run again.
	Attempt    int
	AttemptSet bool
	Previous   bool // the last earlier attempt's
}

// Check validates the options (--attempt, --previous).
func (o LogOptions) Check() error {
	switch {
	case o.AttemptSet && o.Attempt < 0:
		return fmt.Errorf("--attempt: must be 0 (the first run) or more, got %d", o.Attempt)
	case o.AttemptSet && o.Previous:
		return fmt.Errorf("--attempt and --previous: give one of them")
	}
	return nil
}

// Logs copies a task's output to w; with follow it streams until the task
// ends or ctx is done. Attempt asks for that attempt's output, previous
// for the last earlier attempt's (?attempt=N, ?previous=true).
func Logs(ctx context.Context, c *Client, w io.Writer, id string, o LogOptions) error {
	if err := o.Check(); err != nil {
		return err
	}
	q := url.Values{}
	if o.Follow {
		q.Set("follow", "true")
	}
	if o.AttemptSet {
		q.Set("attempt", strconv.Itoa(o.Attempt))
	}
	if o.Previous {
		q.Set("previous", "true")
	}
	path := "/api/v1/tasks/" + url.PathEscape(id) + "/logs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.Stream(ctx, path, w, o.Follow)
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
