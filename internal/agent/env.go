package agent

import (
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/api"
)

// Device resource names the environment knows.
const (
	nvidiaGPU = "nvidia.com/gpu"
	googleTPU = "google.com/tpu"
)

// taskEnv is the environment a task's command gets on node n, on top of
// the task's own env (which wins):
//   - HETSCHED_TASK_ID, HETSCHED_ATTEMPT, HETSCHED_NODE;
//   - HETSCHED_DEVICES: every assigned device as type:id (type:id@500m
//     for a share below a whole device, in milli-devices, written as the
//     CLI's tables write it), comma-separated;
//   - HETSCHED_WORK_DIR (set by the executor): the attempt's own work
//     directory, also its working directory; for a task with a
//     checkpoint, the one its attempts on this node share;
//   - HETSCHED_RESTART_COUNT (specOf): the task's earlier attempts that
//     started; HETSCHED_CHECKPOINT_DIR, for a checkpoint with a dir (see
//     checkpoint.go);
//   - CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES: the assigned NVIDIA
//     GPUs (a MIG instance by its UUID, a GPU by its index); on a node with
//     GPUs a task given none gets "" and "void" so it cannot use any;
//   - TPU_VISIBLE_CHIPS: the assigned TPU chips, set the same way;
//   - TRACEPARENT: for a traced task, the W3C trace context of its
//     placement, so that the command's own spans continue the trace its
//     submission started.
func taskEnv(a *agentapi.Assignment, n *api.Node) map[string]string {
	env := map[string]string{
		"HETSCHED_TASK_ID": a.Task,
		"HETSCHED_ATTEMPT": strconv.Itoa(a.Attempt),
		"HETSCHED_NODE":    a.Node,
	}
	if a.Traceparent != "" {
		env["TRACEPARENT"] = a.Traceparent
	}
	var all, gpus, tpus []string
	for _, d := range a.Devices {
		s := d.Type + ":" + d.ID
		if d.Share > 0 && d.Share < 1000 {
			s += "@" + strconv.Itoa(int(d.Share)) + "m"
		}
		all = append(all, s)
		switch d.Type {
		case nvidiaGPU:
			gpus = append(gpus, cudaID(d, n))
		case googleTPU:
			tpus = append(tpus, d.ID)
		}
	}
	env["HETSCHED_DEVICES"] = strings.Join(all, ",")
	hasGPU, hasTPU := false, false
	for _, d := range n.Devices {
		hasGPU = hasGPU || d.Type == nvidiaGPU
		hasTPU = hasTPU || d.Type == googleTPU
	}
	if len(gpus) > 0 || hasGPU {
		env["CUDA_VISIBLE_DEVICES"] = strings.Join(gpus, ",")
		env["NVIDIA_VISIBLE_DEVICES"] = strings.Join(gpus, ",")
		if len(gpus) == 0 {
			env["NVIDIA_VISIBLE_DEVICES"] = "void"
		}
	}
	if len(tpus) > 0 || hasTPU {
		env["TPU_VISIBLE_CHIPS"] = strings.Join(tpus, ",")
	}
	return env
}

// cudaID names a GPU for CUDA: a MIG instance (id "gpu:k") only by its
// UUID; a whole GPU by its index.
func cudaID(d api.DeviceRef, n *api.Node) string {
	if !strings.Contains(d.ID, ":") {
		return d.ID
	}
	for _, nd := range n.Devices {
		if nd.Type == d.Type && nd.ID == d.ID {
			if u := nd.Topology["uuid"]; u != "" {
				return u
			}
		}
	}
	return d.ID
}
