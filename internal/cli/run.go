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
	return json.Marshal(t)
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
