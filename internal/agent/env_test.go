package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
)

// A share of a device is written as the CLI's tables write it
// ("gpu:0@500m"), whole devices without a share.
func TestTaskEnvWritesSharesAsTheTablesDo(t *testing.T) {
	n := &api.Node{Name: "n1", Devices: []api.Device{{Type: nvidiaGPU, ID: "0"}, {Type: nvidiaGPU, ID: "1"}}}
	a := &agentapi.Assignment{Task: "t", Attempt: 2, Node: "n1", Devices: []api.DeviceRef{
		{Type: nvidiaGPU, ID: "0", Share: 500}, {Type: nvidiaGPU, ID: "1", Share: 1000},
	}}
	got := taskEnv(a, n)
	want := map[string]string{
		"HETSCHED_TASK_ID":       "t",
		"HETSCHED_ATTEMPT":       "2",
		"HETSCHED_NODE":          "n1",
		"HETSCHED_DEVICES":       "nvidia.com/gpu:0@500m,nvidia.com/gpu:1",
		"CUDA_VISIBLE_DEVICES":   "0,1",
		"NVIDIA_VISIBLE_DEVICES": "0,1",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("taskEnv (-want +got):\n%s", d)
	}
}
