package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

// svc is the part of a service view the CLI prints.
type svc struct {
	Name      string `json:"name"`
	Queue     string `json:"queue"`
	Replicas  int    `json:"replicas"`
	Autoscale *struct {
		Min     int `json:"min"`
		Max     int `json:"max"`
		Metrics []struct {
			Resource string `json:"resource"`
			Custom   string `json:"custom"`
			Target   string `json:"target"`
		} `json:"metrics"`
	} `json:"autoscale"`
	Template struct {
		Command   []string          `json:"command"`
		Resources map[string]any    `json:"resources"`
		Metadata  map[string]string `json:"metadata"`
		Liveness  json.RawMessage   `json:"liveness"`
		Readiness json.RawMessage   `json:"readiness"`
		Startup   json.RawMessage   `json:"startup"`
	} `json:"template"`
	Status struct {
		Replicas  int `json:"replicas"`
		Ready     int `json:"ready"`
		Desired   int `json:"desired"`
		LastScale *struct {
			At     time.Time `json:"at"`
			From   int       `json:"from"`
			To     int       `json:"to"`
			Reason string    `json:"reason"`
		} `json:"lastScale"`
	} `json:"status"`
	Generation int       `json:"generation"`
	Created    time.Time `json:"created"`
	Notes      []struct {
		At      time.Time `json:"at"`
		Kind    string    `json:"kind"`
		Message string    `json:"message"`
	} `json:"notes"`
}

// autoscale writes "2..10 cpu 70%, rps 100"; "-" for none.
func (s svc) autoscale() string {
	a := s.Autoscale
	if a == nil {
		return "-"
	}
	parts := make([]string, len(a.Metrics))
	for i, m := range a.Metrics {
		parts[i] = m.Resource + m.Custom + " " + m.Target
	}
	return fmt.Sprintf("%d..%d %s", a.Min, a.Max, strings.Join(parts, ", "))
}

func serviceHeader(wide bool) []string {
	if wide {
		return []string{"NAME", "QUEUE", "READY", "DESIRED", "CURRENT", "AUTOSCALE", "LAST SCALE", "COMMAND", "AGE"}
	}
	return []string{"NAME", "READY", "DESIRED", "CURRENT", "AUTOSCALE", "AGE"}
}

func serviceRow(now time.Time) func(s svc, wide bool) []string {
	return func(s svc, wide bool) []string {
		ready := fmt.Sprintf("%d/%d", s.Status.Ready, s.Status.Desired)
		if wide {
			last := "-"
			if l := s.Status.LastScale; l != nil {
				last = fmt.Sprintf("%d→%d %s ago", l.From, l.To, age(l.At, now))
			}
			return []string{s.Name, queueOf(s.Queue), ready, strconv.Itoa(s.Status.Desired), strconv.Itoa(s.Status.Replicas),
				s.autoscale(), last, dash(strings.Join(s.Template.Command, " ")), age(s.Created, now)}
		}
		return []string{s.Name, ready, strconv.Itoa(s.Status.Desired), strconv.Itoa(s.Status.Replicas), s.autoscale(), age(s.Created, now)}
	}
}

// GetServices lists the services (GET /api/v1/services).
func GetServices(ctx context.Context, c *Client, w io.Writer, output string) error {
	var body struct {
		Services []json.RawMessage `json:"services"`
	}
	if _, err := c.Do(ctx, "GET", "/api/v1/services", nil, &body); err != nil {
		return err
	}
	if !tabular(output) && output != Name {
		b, err := json.Marshal(map[string]any{"services": body.Services})
		if err != nil {
			return err
		}
		return printTasksRaw(w, b, output)
	}
	list := make([]svc, len(body.Services))
	for i, raw := range body.Services {
		if err := json.Unmarshal(raw, &list[i]); err != nil {
			return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
		}
	}
	return printObjects(&grid{w: w}, list, output, true, "service", func(s svc) string { return s.Name }, serviceHeader, serviceRow(time.Now()))
}

// describeService writes a service's page: its spec, status, the
// replicas, the ready endpoints and the latest decisions (kubectl
// describe deployment and hpa in one).
func describeService(ctx context.Context, c *Client, p *page, raw json.RawMessage) error {
	var s svc
	if err := json.Unmarshal(raw, &s); err != nil {
		return err
	}
	p.field("Name", s.Name)
	p.field("Queue", queueOf(s.Queue))
	p.when("Created", &s.Created)
	p.field("Generation", strconv.Itoa(s.Generation))
	p.field("Command", strings.Join(s.Template.Command, " "))
	p.field("Replicas", fmt.Sprintf("%d desired | %d current | %d ready", s.Status.Desired, s.Status.Replicas, s.Status.Ready))
	p.field("Autoscale", s.autoscale())
	if l := s.Status.LastScale; l != nil {
		p.field("Last Scale", fmt.Sprintf("%d to %d, %s ago: %s", l.From, l.To, age(l.At, p.now), l.Reason))
	}
	for _, pr := range []struct {
		name string
		raw  json.RawMessage
	}{{"Liveness", s.Template.Liveness}, {"Readiness", s.Template.Readiness}, {"Startup", s.Template.Startup}} {
		if len(pr.raw) > 0 {
			p.field(pr.name, string(pr.raw))
		}
	}
	var reps struct {
		Replicas []struct {
			ID, State, Node, Revision, Probe, Restarted string
			Ready                                       bool
			Restarts                                    int
		} `json:"replicas"`
	}
	base := "/api/v1/services/" + url.PathEscape(s.Name)
	if _, err := c.Do(ctx, "GET", base+"/replicas", nil, &reps); err != nil {
		return err
	}
	var rows [][]string
	for _, r := range reps.Replicas {
		ready := "0/1"
		if r.Ready {
			ready = "1/1"
		}
		rows = append(rows, []string{r.ID, r.State, dash(r.Node), ready, strconv.Itoa(r.Restarts), r.Revision, dash(r.Restarted), dash(r.Probe)})
	}
	p.table("Replica List", []string{"ID", "STATE", "NODE", "READY", "RESTARTS", "REVISION", "LAST RESTART", "FAILING PROBE"}, rows)
	var eps struct {
		Endpoints []struct {
			Replica string `json:"replica"`
			Node    string `json:"node"`
			Address string `json:"address"`
			Port    int    `json:"port"`
		} `json:"endpoints"`
	}
	if _, err := c.Do(ctx, "GET", base+"/endpoints", nil, &eps); err != nil {
		return err
	}
	rows = nil
	for _, e := range eps.Endpoints {
		rows = append(rows, []string{e.Replica, e.Node, dash(e.Address), strconv.Itoa(e.Port)})
	}
	p.table("Endpoints", []string{"REPLICA", "NODE", "ADDRESS", "PORT"}, rows)
	rows = nil
	for i := len(s.Notes) - 1; i >= 0; i-- {
		n := s.Notes[i]
		rows = append(rows, []string{age(n.At, p.now) + " ago", n.Kind, n.Message})
	}
	p.table("Events", []string{"AGE", "KIND", "MESSAGE"}, rows)
	return nil
}

// Scale sets a service's replica count (POST …/scale).
func Scale(ctx context.Context, c *Client, w io.Writer, name string, n int) error {
	b, _ := json.Marshal(map[string]int{"replicas": n})
	var s svc
	if _, err := c.Do(ctx, "POST", "/api/v1/services/"+url.PathEscape(name)+"/scale", b, &s); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "service/%s scaled to %d\n", s.Name, s.Replicas)
	return err
}

// RestartedAtKey is the template metadata key `rollout restart` sets, as
// kubectl sets kubectl.kubernetes.io/restartedAt: a new revision, rolled
// out replica by replica.
const RestartedAtKey = "hetsched.io/restartedAt"

// RolloutRestart replaces every replica of a service, within its
// rollout's bounds, by stamping its template.
func RolloutRestart(ctx context.Context, c *Client, w io.Writer, name string, now time.Time) error {
	var raw map[string]json.RawMessage
	path := "/api/v1/services/" + url.PathEscape(name)
	if _, err := c.Do(ctx, "GET", path, nil, &raw); err != nil {
		return err
	}
	var spec api.Service
	keep := map[string]json.RawMessage{}
	for _, k := range api.JSONFields(&api.Service{}) {
		if v, ok := raw[k]; ok {
			keep[k] = v
		}
	}
	b, _ := json.Marshal(keep)
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("unexpected answer from %s: %w", c.Server, err)
	}
	if spec.Template.Metadata == nil {
		spec.Template.Metadata = map[string]string{}
	}
	spec.Template.Metadata[RestartedAtKey] = now.UTC().Format(time.RFC3339)
	b, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	if _, err := c.Do(ctx, "PUT", path, b, nil); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "service/%s restarted\n", spec.Name)
	return err
}

// DeleteService stops a service's replicas and deletes it.
func DeleteService(ctx context.Context, c *Client, w io.Writer, name string) error {
	if _, err := c.Do(ctx, "DELETE", "/api/v1/services/"+url.PathEscape(name), nil, nil); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "service/%s deleted\n", name)
	return err
}

// applyServices creates each service (POST), or replaces one whose spec
// differs (PUT); one the server already holds as written is unchanged.
func applyServices(ctx context.Context, c *Client, list []api.Service, report func(kind, name, action string)) ([]json.RawMessage, []error) {
	var out []json.RawMessage
	var failed []error
	for _, s := range list {
		b, err := json.Marshal(s)
		if err != nil {
			failed = append(failed, fmt.Errorf("service/%s: %w", s.Name, err))
			continue
		}
		var raw json.RawMessage
		status, err := c.Do(ctx, "POST", "/api/v1/services", b, &raw)
		action := "created"
		var ae *APIError
		switch {
		case err == nil && status == 200:
			action = "unchanged"
		case errors.As(err, &ae) && ae.Code == "already_exists":
			raw = nil
			if _, err = c.Do(ctx, "PUT", "/api/v1/services/"+url.PathEscape(s.Name), b, &raw); err == nil {
				action = "configured"
			}
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("service/%s: %w", s.Name, err))
			continue
		}
		report("service", s.Name, action)
		out = append(out, raw)
	}
	return out, failed
}
