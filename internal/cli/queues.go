package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// queueView is a queue view: the queue, its usage, fair share and waiting
// tasks by why they wait.
type queueView struct {
	Name       string         `json:"name"`
	Parent     string         `json:"parent"`
	Weight     float64        `json:"weight"`
	Guaranteed map[string]any `json:"guaranteed"`
	Max        map[string]any `json:"max"`
	Usage      map[string]any `json:"usage"`
	FairShare  map[string]any `json:"fairShare"`
	Pending    map[string]int `json:"pending"`
}

func (q queueView) parent() string {
	if q.Parent == "" {
		return "root"
	}
	return q.Parent
}

func (q queueView) weight() float64 {
	if q.Weight == 0 {
		return 1
	}
	return q.Weight
}

// pending writes the waiting tasks: "3 (resources=2,scheduling=1)".
func (q queueView) pending() string {
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
	return p
}

// children is the names of q's children among qs.
func childQueues(qs []queueView, name string) []string {
	var out []string
	for _, q := range qs {
		if q.parent() == name && q.Name != name {
			out = append(out, q.Name)
		}
	}
	sort.Strings(out)
	return out
}

func queueHeader(wide bool) []string {
	h := []string{"NAME", "PARENT", "WEIGHT", "GUARANTEED", "MAX", "USAGE", "FAIR SHARE", "PENDING"}
	if wide {
		h = append(h[:len(h)-1:len(h)-1], "CHILDREN", "PENDING")
	}
	return h
}

func queueRow(q queueView, qs []queueView, wide bool) []string {
	r := []string{q.Name, q.parent(), strconv.FormatFloat(q.weight(), 'g', -1, 64), human(q.Guaranteed), human(q.Max), human(q.Usage), human(q.FairShare), q.pending()}
	if wide {
		r = append(r[:len(r)-1:len(r)-1], dash(strings.Join(childQueues(qs, q.Name), ",")), q.pending())
	}
	return r
}

// listQueues reads GET /api/v1/queues.
func listQueues(ctx context.Context, c *Client) (json.RawMessage, []queueView, error) {
	var raw json.RawMessage
	if _, err := c.Do(ctx, "GET", "/api/v1/queues", nil, &raw); err != nil {
		return nil, nil, err
	}
	var body struct {
		Queues []queueView `json:"queues"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, nil, fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
	}
	return raw, body.Queues, nil
}

// GetQueues lists the queues with their usage, fair share and waiting
// tasks.
func GetQueues(ctx context.Context, c *Client, w io.Writer, output string) error {
	raw, qs, err := listQueues(ctx, c)
	if err != nil {
		return err
	}
	if !tabular(output) && output != Name {
		return printTasksRaw(w, raw, output)
	}
	return printQueues(&grid{w: w}, qs, qs, output, true)
}

// printQueues writes the queues shown (of all, which names the children)
// as rows of g, with the header when header, or as names.
func printQueues(g *grid, shown, all []queueView, output string, header bool) error {
	row := func(q queueView, wide bool) []string { return queueRow(q, all, wide) }
	return printObjects(g, shown, output, header, "queue", func(q queueView) string { return q.Name }, queueHeader, row)
}
