package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Device types of run's --gpu and --tpu, and the node label their --model
// selects on (nodes carry "<device type>.model" for each device model).
const (
	GPUType = "nvidia.com/gpu"
	TPUType = "google.com/tpu"
)

// RunSpec is one command task from `hetsched run` flags.
type RunSpec struct {
	ID, Name, Queue string
	Priority        *int
	CPU, Memory     string
	GPU, TPU        float64
	Model           string
	// Models, when set, are the device models Model stands for
	// (ResolveModel): one is a node selector, several a node affinity
	// term (any of them).
	Models  []string
	Env     []string // K=V
	Timeout time.Duration
	Command []string
	// Placement constraints (API.md "Placement constraints"): Labels
	// (K=V, the task's metadata), HostPorts (PORT or PORT/PROTOCOL),
	// Affinity and AntiAffinity (required: TOPOLOGYKEY for the tasks
	// carrying this one's labels, or SELECTOR@TOPOLOGYKEY), Spread
	// (TOPOLOGYKEY or TOPOLOGYKEY:MAXSKEW over the tasks carrying its
	// labels), NoPreempt (preemptionPolicy never).
	Labels, HostPorts, Affinity, AntiAffinity, Spread []string
	NoPreempt                                         bool
	// Depends are its dependencies (ParseDependencyFlag); User the user
	// it names (LocalUser, sent when the client has no token).
	Depends []string
	User    string
}

// Body is the task's JSON for POST /tasks or /schedule.
func (r RunSpec) Body() ([]byte, error) {
	if len(r.Command) == 0 {
		return nil, fmt.Errorf("a command is required: hetsched run [flags] -- CMD [ARGS]")
	}
	if r.GPU < 0 || r.TPU < 0 {
		return nil, fmt.Errorf("--gpu and --tpu must not be negative")
	}
	t := map[string]any{"command": r.Command}
	res := map[string]string{}
	if r.CPU != "" {
		res["cpu"] = r.CPU
	}
	if r.Memory != "" {
		res["memory"] = r.Memory
	}
	if r.GPU > 0 {
		res[GPUType] = strconv.FormatFloat(r.GPU, 'f', -1, 64)
	}
	if r.TPU > 0 {
		res[TPUType] = strconv.FormatFloat(r.TPU, 'f', -1, 64)
	}
	if len(res) > 0 {
		t["resources"] = res
	}
	if r.Model != "" {
		typ, err := r.modelType()
		if err != nil {
			return nil, err
		}
		switch models := r.Models; {
		case len(models) > 1:
			t["nodeAffinity"] = []string{typ + ".model in (" + strings.Join(models, ",") + ")"}
		case len(models) == 1:
			t["nodeSelector"] = map[string]string{typ + ".model": models[0]}
		default:
			t["nodeSelector"] = map[string]string{typ + ".model": r.Model}
		}
	}
	if len(r.Env) > 0 {
		env := map[string]string{}
		for _, kv := range r.Env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("--env: must be KEY=VALUE, got %q", kv)
			}
			env[k] = v
		}
		t["env"] = env
	}
	if r.Timeout < 0 {
		return nil, fmt.Errorf("--timeout: must not be negative")
	}
	if r.Timeout > 0 {
		t["timeout"] = r.Timeout.String()
	}
	if len(r.Depends) > 0 {
		t["depends"] = r.Depends
	}
	for k, v := range map[string]string{"id": r.ID, "name": r.Name, "queue": r.Queue, "user": r.User} {
		if v != "" {
			t[k] = v
		}
	}
	if r.Priority != nil {
		t["priority"] = *r.Priority
	}
	if err := r.constraints(t); err != nil {
		return nil, err
	}
	return json.Marshal(t)
}

// modelType is the device type --model selects the model of.
func (r RunSpec) modelType() (string, error) {
	switch {
	case r.GPU > 0 && r.TPU > 0:
		return "", fmt.Errorf("--model: ambiguous with both --gpu and --tpu")
	case r.GPU > 0:
		return GPUType, nil
	case r.TPU > 0:
		return TPUType, nil
	}
	return "", fmt.Errorf("--model: needs --gpu or --tpu (it selects their device model)")
}

// ResolveModel finds the device models --model names among the
// cluster's (GET /api/v1/cluster): the one it names exactly (in any
// case), else those it is the family of ("H100" for H100-80GB; "A100"
// for A100-40GB and A100-80GB: any of them). None is an error that lists
// the models there are.
func (r *RunSpec) ResolveModel(ctx context.Context, c *Client) error {
	if r.Model == "" {
		return nil
	}
	typ, err := r.modelType()
	if err != nil {
		return err
	}
	var cl struct {
		Devices []struct{ Type, Model string } `json:"devices"`
	}
	if _, err := c.Do(ctx, "GET", "/api/v1/cluster", nil, &cl); err != nil {
		return err
	}
	var all, family []string
	for _, d := range cl.Devices {
		if d.Type != typ || d.Model == "" || slices.Contains(all, d.Model) {
			continue
		}
		all = append(all, d.Model)
		if strings.EqualFold(d.Model, r.Model) {
			r.Models = []string{d.Model}
			return nil
		}
		if familyOf(r.Model, d.Model) {
			family = append(family, d.Model)
		}
	}
	if len(family) == 0 {
		slices.Sort(all)
		there := "none"
		if len(all) > 0 {
			there = strings.Join(all, ", ")
		}
		return fmt.Errorf("--model: no node has %s model %s; models here: %s", typ, r.Model, there)
	}
	slices.Sort(family)
	r.Models = family
	return nil
}

// familyOf reports whether name starts model's family: model, then a
// separator ("H100" of "H100-80GB", not "A10" of "A100").
func familyOf(name, model string) bool {
	if len(model) <= len(name) || !strings.EqualFold(model[:len(name)], name) {
		return false
	}
	c := model[len(name)]
	return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9')
}

// constraints adds the placement constraints' flags to task t.
func (r RunSpec) constraints(t map[string]any) error {
	labels := map[string]string{}
	for _, kv := range r.Labels {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("--label: must be KEY=VALUE, got %q", kv)
		}
		labels[k] = v
	}
	if len(labels) > 0 {
		t["metadata"] = labels
	}
	var ports []map[string]any
	for _, s := range r.HostPorts {
		num, proto, _ := strings.Cut(s, "/")
		n, err := strconv.Atoi(num)
		if err != nil {
			return fmt.Errorf("--host-port: must be PORT or PORT/PROTOCOL, got %q", s)
		}
		p := map[string]any{"port": n}
		if proto != "" {
			p["protocol"] = strings.ToUpper(proto)
		}
		ports = append(ports, p)
	}
	if len(ports) > 0 {
		t["hostPorts"] = ports
	}
	term := func(flag, s string) (map[string]any, error) {
		sel, key, ok := strings.Cut(s, "@")
		if !ok {
			if len(labels) == 0 {
				return nil, fmt.Errorf("--%s %s: selects the tasks carrying this one's --label, and it has none (or give SELECTOR@TOPOLOGYKEY)", flag, s)
			}
			return map[string]any{"selector": labels, "topologyKey": s, "required": true}, nil
		}
		return map[string]any{"match": sel, "topologyKey": key, "required": true}, nil
	}
	for _, l := range []struct {
		flag, field string
		vals        []string
	}{{"affinity", "affinity", r.Affinity}, {"anti-affinity", "antiAffinity", r.AntiAffinity}} {
		var terms []map[string]any
		for _, s := range l.vals {
			tm, err := term(l.flag, s)
			if err != nil {
				return err
			}
			terms = append(terms, tm)
		}
		if len(terms) > 0 {
			t[l.field] = terms
		}
	}
	var spread []map[string]any
	for _, s := range r.Spread {
		key, skew, _ := strings.Cut(s, ":")
		n := 1
		if skew != "" {
			var err error
			if n, err = strconv.Atoi(skew); err != nil {
				return fmt.Errorf("--spread: must be TOPOLOGYKEY or TOPOLOGYKEY:MAXSKEW, got %q", s)
			}
		}
		if len(labels) == 0 {
			return fmt.Errorf("--spread %s: spreads the tasks carrying this one's --label, and it has none", s)
		}
		spread = append(spread, map[string]any{"selector": labels, "topologyKey": key, "maxSkew": n})
	}
	if len(spread) > 0 {
		t["spread"] = spread
	}
	if r.NoPreempt {
		t["preemptionPolicy"] = "never"
	}
	return nil
}

// Run submits one command task. Detached, or with a wait mode, it is
// Submit. Else it is Slurm's srun: it waits for the task to start,
// streams its output to w while it runs, and returns an ExitError with
// the task's code (nil when it succeeded); when ctx ends first (Ctrl-C)
// it cancels the task and returns exit 130. note gets the task's final
// state.
func Run(ctx context.Context, c *Client, w, note io.Writer, r RunSpec, mode WaitMode, detach bool, output string) error {
	if err := r.ResolveModel(ctx, c); err != nil {
		return err
	}
	body, err := r.Body()
	if err != nil {
		return err
	}
	if detach || mode.On {
		return Submit(ctx, c, w, body, mode, output)
	}
	var raw json.RawMessage
	if _, err := c.Do(ctx, "POST", "/api/v1/tasks", body, &raw); err != nil {
		return err
	}
	ids, err := submittedIDs(raw)
	if err != nil {
		return err
	}
	id := ids[0]
	err = attach(ctx, c, w, note, id)
	if ctx.Err() != nil {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, cerr := c.Do(cctx, "DELETE", "/api/v1/tasks/"+url.PathEscape(id), nil, nil); cerr != nil {
			return fmt.Errorf("interrupted; cancelling task %s failed: %w", id, cerr)
		}
		fmt.Fprintf(note, "task %s cancelled\n", id)
		return &ExitError{Code: 130}
	}
	return err
}

// attach follows task id: its output once it runs, then its end.
func attach(ctx context.Context, c *Client, w, note io.Writer, id string) error {
	path := "/api/v1/tasks/" + url.PathEscape(id)
	var t task
	// Until it runs (or ends without running).
	if err := waitState(ctx, c, path, &t, func(s string) bool { return s == "running" || final(s) }); err != nil {
		return err
	}
	if t.State == "running" || t.State == "succeeded" || t.State == "failed" || t.State == "timeout" {
		if err := c.Stream(ctx, path+"/logs?follow=true", w, true); err != nil && ctx.Err() == nil {
			fmt.Fprintf(note, "(the output could not be followed: %v)\n", err)
		}
	}
	if err := waitState(ctx, c, path, &t, final); err != nil {
		return err
	}
	fmt.Fprintln(note, endLine(t))
	if code := exitCodeOf(t); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// waitState reads path until done says its state is reached.
func waitState(ctx context.Context, c *Client, path string, t *task, done func(string) bool) error {
	every := 100 * time.Millisecond
	for {
		if _, err := c.Do(ctx, "GET", path, nil, t); err != nil {
			return err
		}
		if done(t.State) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(every):
		}
		every = min(2*every, pollEvery)
	}
}
