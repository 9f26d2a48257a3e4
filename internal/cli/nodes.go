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
)

// nodeDevice is one device of a node view.
type nodeDevice struct {
	Type      string            `json:"type"`
	ID        string            `json:"id"`
	Model     string            `json:"model"`
	Memory    any               `json:"memory"`
	Topology  map[string]string `json:"topology"`
	Unhealthy bool              `json:"unhealthy"`
	Simulated bool              `json:"simulated"`
}

// nodeView is the part of a node view the CLI prints.
type nodeView struct {
	Name   string            `json:"name"`
	State  string            `json:"state"`
	Labels map[string]string `json:"labels"`
	// DerivedLabels are the labels the scheduler adds (selectors match
	// them too).
	DerivedLabels map[string]string  `json:"derivedLabels"`
	Taints        []string           `json:"taints"`
	Capacity      map[string]any     `json:"capacity"`
	Allocated     map[string]any     `json:"allocated"`
	Tasks         int                `json:"tasks"`
	Agent         string             `json:"agent"`
	Utilization   map[string]float64 `json:"utilization"`
	Devices       []nodeDevice       `json:"devices"`
}

func (n nodeView) state() string {
	if n.State == "" {
		return "ready"
	}
	return n.State
}

// deviceCounts writes a node's devices by type and model: "8×nvidia.com/gpu H100".
func (n nodeView) deviceCounts() string {
	count := map[string]int{}
	for _, d := range n.Devices {
		count[d.Type+" "+d.Model]++
	}
	devs := make([]string, 0, len(count))
	for k, v := range count {
		devs = append(devs, fmt.Sprintf("%d×%s", v, strings.TrimSpace(k)))
	}
	sort.Strings(devs)
	return strings.Join(devs, ",")
}

func nodeHeader(wide bool) []string {
	h := []string{"NAME", "STATE", "CAPACITY", "ALLOCATED", "TASKS", "DEVICES"}
	if wide {
		h = append(h, "UTILIZATION", "LABELS")
	}
	return h
}

func nodeRow(n nodeView, wide bool) []string {
	r := []string{n.Name, n.state(), human(n.Capacity), human(n.Allocated), strconv.Itoa(n.Tasks), n.deviceCounts()}
	if wide {
		r[5] = dash(r[5])
		r = append(r, percents(n.Utilization), labelList(n.Labels))
	}
	return r
}

// GetNodes lists nodes.
func GetNodes(ctx context.Context, c *Client, w io.Writer, output string) error {
	return GetNodesSelected(ctx, c, w, "", output)
}

// GetNodesSelected lists the nodes whose labels match selector (all with
// ""); the server evaluates it, on derived labels too.
func GetNodesSelected(ctx context.Context, c *Client, w io.Writer, selector, output string) error {
	raw, nodes, err := listNodes(ctx, c, selector)
	if err != nil {
		return err
	}
	if !tabular(output) && output != Name {
		return printTasksRaw(w, raw, output)
	}
	return printNodes(&grid{w: w}, nodes, output, true)
}

// listNodes reads GET /api/v1/nodes (?selector=).
func listNodes(ctx context.Context, c *Client, selector string) (json.RawMessage, []nodeView, error) {
	path := "/api/v1/nodes"
	if selector != "" {
		if _, err := ParseSelector(selector); err != nil {
			return nil, nil, err
		}
		path += "?selector=" + url.QueryEscape(selector)
	}
	var raw json.RawMessage
	if _, err := c.Do(ctx, "GET", path, nil, &raw); err != nil {
		return nil, nil, err
	}
	var body struct {
		Nodes []nodeView `json:"nodes"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, nil, fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
	}
	return raw, body.Nodes, nil
}

// printNodes writes nodes as rows of g (with the header when header) or
// as names.
func printNodes(g *grid, nodes []nodeView, output string, header bool) error {
	return printObjects(g, nodes, output, header, "node", func(n nodeView) string { return n.Name }, nodeHeader, nodeRow)
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
