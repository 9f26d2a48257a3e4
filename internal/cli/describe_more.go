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

	"github.com/hetsched/hetsched/internal/resource"
)

// jobPage is the job view as describe reads it.
type jobPage struct {
	job
	Retries *struct {
		Limit   int    `json:"limit"`
		Backoff string `json:"backoff"`
	} `json:"retries"`
}

func describeJob(p *page, raw json.RawMessage) error {
	var j jobPage
	if err := json.Unmarshal(raw, &j); err != nil {
		return err
	}
	p.field("ID", j.ID)
	p.field("Name", j.Name)
	p.field("Queue", queueOf(j.Queue))
	p.field("Priority", tierName(prio(j.Priority)))
	p.field("State", j.State)
	p.field("Failure Policy", j.failurePolicy())
	if j.Retries != nil {
		r := fmt.Sprintf("limit %d", j.Retries.Limit)
		if j.Retries.Backoff != "" {
			r += ", backoff " + j.Retries.Backoff
		}
		p.field("Retries", r)
	}
	p.field("Gang", j.gang())
	if t, err := time.Parse(time.RFC3339Nano, j.Submitted); err == nil {
		p.when("Submitted", &t)
	}
	p.field("Tasks", counts(j.Counts))
	rows := make([][]string, len(j.Tasks))
	for i, t := range j.Tasks {
		rows[i] = taskRow(t, false, p.now)
	}
	p.table("Task List", taskHeader(false), rows)
	return nil
}

// nodePage is the node view as describe reads it.
type nodePage struct {
	nodeView
	Simulated bool `json:"simulated"`
	Usage     *struct {
		LastHeartbeat time.Time `json:"lastHeartbeat"`
	} `json:"usage"`
}

// maxNodeTasks bounds the tasks describe node reads of a node.
const maxNodeTasks = 1000

func describeNode(ctx context.Context, c *Client, p *page, raw json.RawMessage) error {
	var n nodePage
	if err := json.Unmarshal(raw, &n); err != nil {
		return err
	}
	q := url.Values{"node": {n.Name}}
	tasks, more, err := listTasks(ctx, c, q, maxNodeTasks)
	if err != nil {
		p.err = err
		return nil
	}
	p.field("Name", n.Name)
	p.field("State", n.state())
	holder := "the static inventory"
	if n.Agent != "" {
		holder = "agent " + n.Agent
	}
	p.field("Held By", holder)
	if n.Usage != nil {
		p.when("Last Heartbeat", &n.Usage.LastHeartbeat)
	}
	if n.Simulated {
		p.field("Simulated", "yes (declared devices, not real hardware)")
	}
	p.field("Labels", strings.ReplaceAll(labelList(n.Labels), ",", "\n"+strings.Repeat(" ", keyWidth)))
	p.field("Derived Labels", strings.ReplaceAll(labelList(n.DerivedLabels), ",", "\n"+strings.Repeat(" ", keyWidth)))
	p.field("Taints", strings.Join(n.Taints, ","))
	p.table("Resources", []string{"RESOURCE", "CAPACITY", "ALLOCATED", "UTILIZATION"}, n.resourceRows())
	p.table("Devices", []string{"TYPE", "MODEL", "ID", "MEMORY", "TOPOLOGY", "HEALTH", "TASK"}, n.deviceRows(tasks))
	title := fmt.Sprintf("Tasks (%d)", len(tasks))
	if more {
		title = fmt.Sprintf("Tasks (the first %d)", len(tasks))
	}
	rows := make([][]string, len(tasks))
	for i, t := range tasks {
		rows[i] = taskRow(t.task, false, p.now)
	}
	p.table(title, taskHeader(false), rows)
	return nil
}

// canonical is a view's quantity in canonical units: a quantity string
// parsed, a number as it is (the server writes allocations so).
func canonical(name string, v any) (int64, bool) {
	switch v := v.(type) {
	case float64:
		return int64(v), true
	case string:
		l, err := resource.ParseList(map[string]any{name: v})
		if err == nil {
			return l[resource.Name(name)], true
		}
	}
	return 0, false
}

// capacity is the node's capacity in canonical units, with its device
// types' (the count of healthy devices), which the view leaves out.
func (n nodePage) capacity() map[string]int64 {
	out := map[string]int64{}
	for k, v := range n.Capacity {
		if c, ok := canonical(k, v); ok {
			out[k] = c
		}
	}
	devs := map[string]int64{}
	for _, d := range n.Devices {
		if _, seen := devs[d.Type]; !seen {
			devs[d.Type] = 0 // a type whose devices are all unhealthy has none
		}
		if !d.Unhealthy {
			devs[d.Type] += 1000
		}
	}
	for t, c := range devs {
		if _, ok := out[t]; !ok {
			out[t] = c
		}
	}
	return out
}

// resourceRows: each resource's capacity, allocation (with its share of
// the capacity) and the last heartbeat's utilization.
func (n nodePage) resourceRows() [][]string {
	capacity := n.capacity()
	names := map[string]bool{}
	for k := range capacity {
		names[k] = true
	}
	for k := range n.Allocated {
		names[k] = true
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([][]string, 0, len(keys))
	for _, k := range keys {
		name := resource.Name(k)
		cv, hasCap := capacity[k]
		capText, alloc := "-", "0"
		if hasCap {
			capText = name.Format(cv)
		}
		if a, ok := canonical(k, n.Allocated[k]); ok {
			alloc = name.Format(a)
			if hasCap && cv > 0 {
				alloc += fmt.Sprintf(" (%.0f%%)", float64(a)/float64(cv)*100)
			}
		}
		util := "-"
		if u, ok := n.Utilization[k]; ok {
			util = fmt.Sprintf("%.0f%%", u*100)
		}
		rows = append(rows, []string{k, capText, alloc, util})
	}
	return rows
}

// deviceRows: each device, and the tasks holding it (from the tasks
// placed on the node).
func (n nodePage) deviceRows(tasks []listed) [][]string {
	held := map[string][]string{}
	for _, t := range tasks {
		if placed(t.State) && t.State != "succeeded" {
			for _, d := range t.Devices {
				k := d.Type + "\x00" + d.ID
				held[k] = append(held[k], t.ID)
			}
		}
	}
	rows := make([][]string, len(n.Devices))
	for i, d := range n.Devices {
		health := "healthy"
		if d.Unhealthy {
			health = "unhealthy"
		}
		mem := "-"
		if d.Memory != nil {
			mem = quantity("memory", d.Memory)
		}
		rows[i] = []string{d.Type, dash(d.Model), d.ID, mem, labelList(d.Topology), health, dash(strings.Join(held[d.Type+"\x00"+d.ID], ","))}
	}
	return rows
}

// describeQueue prints the queue name of GET /api/v1/queues.
func describeQueue(ctx context.Context, c *Client, w io.Writer, name, output string) error {
	raw, qs, err := listQueues(ctx, c)
	if err != nil {
		return err
	}
	var body struct {
		Queues []json.RawMessage `json:"queues"`
	}
	_ = json.Unmarshal(raw, &body)
	for i, q := range qs {
		if q.Name != name {
			continue
		}
		switch output {
		case JSON, YAML:
			if i < len(body.Queues) {
				return printTasksRaw(w, body.Queues[i], output)
			}
		case Name:
			_, err := fmt.Fprintln(w, "queue/"+q.Name)
			return err
		}
		p := &page{w: w, now: time.Now()}
		p.field("Name", q.Name)
		p.field("Parent", q.parent())
		p.field("Children", strings.Join(childQueues(qs, q.Name), ","))
		p.field("Weight", strconv.FormatFloat(q.weight(), 'g', -1, 64))
		p.table("Resources", []string{"RESOURCE", "GUARANTEED", "MAX", "USAGE", "FAIR SHARE"}, q.resourceRows())
		p.field("Pending", q.pending())
		return p.err
	}
	return fmt.Errorf("no queue %q (hetsched get queues lists them)", name)
}

// resourceRows: each resource the queue names or uses, with its
// guarantee, max, usage and fair share.
func (q queueView) resourceRows() [][]string {
	names := map[string]bool{}
	for _, m := range []map[string]any{q.Guaranteed, q.Max, q.Usage, q.FairShare} {
		for k := range m {
			names[k] = true
		}
	}
	keys := make([]string, 0, len(names))
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rows := make([][]string, 0, len(keys))
	for _, k := range keys {
		row := []string{k}
		for _, m := range []map[string]any{q.Guaranteed, q.Max, q.Usage, q.FairShare} {
			v, ok := m[k]
			if !ok {
				row = append(row, "-")
				continue
			}
			row = append(row, quantity(k, v))
		}
		rows = append(rows, row)
	}
	return rows
}
