package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// GetOne prints one object of kind as get prints its row (kubectl get
// KIND NAME): a task, job, node, queue or service.
func GetOne(ctx context.Context, c *Client, w io.Writer, kind, name, output string) error {
	path := map[string]string{"tasks": "/api/v1/tasks/", "jobs": "/api/v1/jobs/", "nodes": "/api/v1/nodes/",
		"services": "/api/v1/services/"}[kind]
	if kind == "queues" {
		return getQueue(ctx, c, w, name, output)
	}
	if path == "" {
		return fmt.Errorf("get %s NAME: %s has no one-object form", kind, kind)
	}
	q := ""
	if kind == "jobs" {
		q = "?tasks=false"
	}
	var raw json.RawMessage
	if _, err := c.Do(ctx, "GET", path+url.PathEscape(name)+q, nil, &raw); err != nil {
		return err
	}
	if !tabular(output) && output != Name {
		return printTasksRaw(w, raw, output)
	}
	g := &grid{w: w}
	var err error
	switch kind {
	case "tasks":
		var t task
		if err = json.Unmarshal(raw, &t); err == nil {
			return printTaskTable(w, []task{t}, output)
		}
	case "jobs":
		var j job
		if err = json.Unmarshal(raw, &j); err == nil {
			return printJobs(g, []job{j}, output, true)
		}
	case "nodes":
		var n nodeView
		if err = json.Unmarshal(raw, &n); err == nil {
			return printNodes(g, []nodeView{n}, output, true)
		}
	case "services":
		var s svc
		if err = json.Unmarshal(raw, &s); err == nil {
			return printObjects(g, []svc{s}, output, true, "service", func(s svc) string { return s.Name }, serviceHeader, serviceRow(time.Now()))
		}
	}
	return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
}

// getQueue prints the row of one queue (GET /queues has them all).
func getQueue(ctx context.Context, c *Client, w io.Writer, name, output string) error {
	raw, qs, err := listQueues(ctx, c)
	if err != nil {
		return err
	}
	for _, q := range qs {
		if q.Name != name {
			continue
		}
		if !tabular(output) && output != Name {
			var body struct {
				Queues []json.RawMessage `json:"queues"`
			}
			if err := json.Unmarshal(raw, &body); err != nil {
				return err
			}
			for _, one := range body.Queues {
				var v struct{ Name string }
				if json.Unmarshal(one, &v) == nil && v.Name == name {
					return printTasksRaw(w, one, output)
				}
			}
		}
		return printQueues(&grid{w: w}, []queueView{q}, qs, output, true)
	}
	return &APIError{Status: 404, Code: "not_found", Field: "name", Message: fmt.Sprintf("no queue %q", name)}
}

// slurmStates maps squeue's state codes to hetsched's.
var slurmStates = map[string]string{"PD": "pending", "R": "running", "CD": "succeeded", "F": "failed",
	"CA": "cancelled", "TO": "timeout", "S": "scheduled"}

// StateList reads --state: states, comma-separated, by name or by
// squeue's code (PD,R,CD,F,CA,TO).
func StateList(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if v, ok := slurmStates[strings.ToUpper(p)]; ok {
			p = v
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

// JobLogs prints the output of every task of job id, each line prefixed
// with its task's id ("[train] epoch 1"); with follow, as it comes, until
// every task ended.
func JobLogs(ctx context.Context, c *Client, w io.Writer, id string, o LogOptions) error {
	var j job
	if _, err := c.Do(ctx, "GET", "/api/v1/jobs/"+url.PathEscape(id), nil, &j); err != nil {
		return err
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(j.Tasks))
	each := func(i int, t task) {
		pr, pw := io.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(pr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				mu.Lock()
				fmt.Fprintf(w, "[%s] %s\n", t.ID, sc.Text())
				mu.Unlock()
			}
			_, _ = io.Copy(io.Discard, pr)
		}()
		err := Logs(ctx, c, pw, t.ID, o)
		_ = pw.Close()
		<-done
		var ae *APIError
		if err != nil && !(errors.As(err, &ae) && (ae.Code == "invalid_argument" || ae.Code == "unavailable" || ae.Code == "not_found")) {
			errs[i] = fmt.Errorf("%s: %w", t.ID, err)
		}
	}
	for i, t := range j.Tasks {
		if t.State == "pending" || t.State == "blocked" || t.State == "skipped" {
			continue // nothing ran: no output
		}
		if !o.Follow {
			each(i, t)
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); each(i, t) }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// GetCluster prints the cluster's capacity, allocation and utilization
// per resource, and its devices per type and model (GET /api/v1/cluster).
func GetCluster(ctx context.Context, c *Client, w io.Writer, output string) error {
	var raw json.RawMessage
	if _, err := c.Do(ctx, "GET", "/api/v1/cluster", nil, &raw); err != nil {
		return err
	}
	if !tabular(output) {
		return printTasksRaw(w, raw, output)
	}
	var cl struct {
		Resources map[string]struct {
			Capacity, Allocated int64
			Utilization         *float64
		} `json:"resources"`
		Devices []struct {
			Type, Model                  string
			Devices, Unhealthy, Reported int
			Allocated                    float64
			Utilization                  *float64
		} `json:"devices"`
		Pending map[string]int `json:"pending"`
	}
	if err := json.Unmarshal(raw, &cl); err != nil {
		return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
	}
	names := make([]string, 0, len(cl.Resources))
	for n := range cl.Resources {
		names = append(names, n)
	}
	sort.Strings(names)
	rows := [][]string{{"RESOURCE", "CAPACITY", "ALLOCATED", "ALLOCATED %", "UTILIZATION"}}
	for _, n := range names {
		r := cl.Resources[n]
		pct := "-"
		if r.Capacity > 0 {
			pct = strconv.Itoa(int(100*r.Allocated/r.Capacity)) + "%"
		}
		util := "-"
		if r.Utilization != nil {
			util = percent(*r.Utilization)
		}
		rows = append(rows, []string{n, readable(resource.Name(n), r.Capacity), readable(resource.Name(n), r.Allocated), pct, util})
	}
	g := &grid{w: w}
	if err := g.write(rows...); err != nil {
		return err
	}
	if len(cl.Devices) > 0 {
		fmt.Fprintln(w)
		rows = [][]string{{"DEVICE", "MODEL", "DEVICES", "ALLOCATED", "UNHEALTHY", "UTILIZATION"}}
		for _, d := range cl.Devices {
			util := "-"
			if d.Utilization != nil {
				util = percent(*d.Utilization)
			}
			rows = append(rows, []string{d.Type, dash(d.Model), strconv.Itoa(d.Devices), strconv.FormatFloat(d.Allocated, 'f', -1, 64),
				strconv.Itoa(d.Unhealthy), util})
		}
		if err := g.write(rows...); err != nil {
			return err
		}
	}
	var pend []string
	for _, tier := range api.TierNames {
		if n := cl.Pending[tier]; n > 0 {
			pend = append(pend, fmt.Sprintf("%d %s", n, tier))
		}
	}
	if len(pend) > 0 {
		fmt.Fprintf(w, "\npending: %s\n", strings.Join(pend, ", "))
	}
	return nil
}

// percent writes a 0..1 fraction as a percentage ("-" for 0 unknown).
func percent(f float64) string { return strconv.Itoa(int(100*f+0.5)) + "%" }
