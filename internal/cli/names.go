package cli

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// maxNames bounds the names one completion reads (one page of the
// server's).
const maxNames = 10000

// Names lists the names of kind's objects (task and job ids, node and
// queue names) that start with prefix, sorted, for shell completion.
func Names(ctx context.Context, c *Client, kind, prefix string) ([]string, error) {
	var names []string
	switch strings.TrimSuffix(kind, "s") {
	case "task":
		q := url.Values{"limit": {strconv.Itoa(maxNames)}}
		var page struct {
			Tasks []struct {
				ID string `json:"id"`
			} `json:"tasks"`
		}
		if _, err := c.Do(ctx, "GET", "/api/v1/tasks?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		for _, t := range page.Tasks {
			names = append(names, t.ID)
		}
	case "job":
		q := url.Values{"limit": {strconv.Itoa(maxNames)}}
		var page struct {
			Jobs []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		if _, err := c.Do(ctx, "GET", "/api/v1/jobs?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		for _, j := range page.Jobs {
			names = append(names, j.ID)
		}
	case "node":
		var body struct {
			Nodes []struct {
				Name string `json:"name"`
			} `json:"nodes"`
		}
		if _, err := c.Do(ctx, "GET", "/api/v1/nodes", nil, &body); err != nil {
			return nil, err
		}
		for _, n := range body.Nodes {
			names = append(names, n.Name)
		}
	case "service":
		var body struct {
			Services []struct {
				Name string `json:"name"`
			} `json:"services"`
		}
		if _, err := c.Do(ctx, "GET", "/api/v1/services", nil, &body); err != nil {
			return nil, err
		}
		for _, s := range body.Services {
			names = append(names, s.Name)
		}
	case "queue":
		var body struct {
			Queues []struct {
				Name string `json:"name"`
			} `json:"queues"`
		}
		if _, err := c.Do(ctx, "GET", "/api/v1/queues", nil, &body); err != nil {
			return nil, err
		}
		for _, q := range body.Queues {
			names = append(names, q.Name)
		}
	default:
		return nil, fmt.Errorf("no names for kind %q", kind)
	}
	out := names[:0]
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}
