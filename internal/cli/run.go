package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	Env             []string // K=V
	Timeout         time.Duration
	Command         []string
	// Placement constraints (API.md "Placement constraints"): Labels
	// (K=V, the task's metadata), HostPorts (PORT or PORT/PROTOCOL),
	// Affinity and AntiAffinity (required: TOPOLOGYKEY for the tasks
	// carrying this one's labels, or SELECTOR@TOPOLOGYKEY), Spread
	// (TOPOLOGYKEY or TOPOLOGYKEY:MAXSKEW over the tasks carrying its
	// labels), NoPreempt (preemptionPolicy never).
	Labels, HostPorts, Affinity, AntiAffinity, Spread []string
	NoPreempt                                         bool
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
		switch {
		case r.GPU > 0 && r.TPU > 0:
			return nil, fmt.Errorf("--model: ambiguous with both --gpu and --tpu")
		case r.GPU > 0:
			t["nodeSelector"] = map[string]string{GPUType + ".model": r.Model}
		case r.TPU > 0:
			t["nodeSelector"] = map[string]string{TPUType + ".model": r.Model}
		default:
			return nil, fmt.Errorf("--model: needs --gpu or --tpu (it selects their device model)")
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
	for k, v := range map[string]string{"id": r.ID, "name": r.Name, "queue": r.Queue} {
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

// Run submits one command task: with wait as Submit does (placement
// within wait, or an error naming why not).
func Run(ctx context.Context, c *Client, w io.Writer, r RunSpec, wait time.Duration, output string) error {
	body, err := r.Body()
	if err != nil {
		return err
	}
	return Submit(ctx, c, w, body, wait, output)
}
