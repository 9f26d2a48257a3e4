// Package trace reads cluster and workload traces for the simulator
// (internal/sim): the Alibaba openb node and pod lists (FGD, ATC'23), the
// Alibaba PAI 2020 machine list, Microsoft Philly's job list, Gavel's job
// traces with its throughput table (OSDI'20), and a seeded synthetic
// generator. Readers stream, bound what they accept and name the line and
// field of bad input.
package trace

import (
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Arrival is one task of a workload, submitted At. (The traces call it a
// job: Philly's and Gavel's lists are of jobs; hetsched's job, tasks with
// dependencies or a gang, is another thing.)
type Arrival struct {
	ID string
	At time.Duration // since the workload's start
	// Task carries resources, alternatives, nodeSelector, priority and
	// queue; its ID is set by the simulator.
	Task api.Task
	// Duration is the run time when nothing says otherwise; 0 means the
	// task never ends by itself (the FGD protocol has no departures).
	Duration time.Duration
	// ByModel, when set, is the run time on each device model (Gavel's
	// measured throughputs); a model not listed runs for Duration.
	ByModel map[string]time.Duration
}

// Workload is a named list of arrivals in time order (ReadOpenbPods keeps
// a pod list's file order, which need not be).
type Workload struct {
	Name     string
	Arrivals []Arrival
}

// Cluster is a named list of nodes.
type Cluster struct {
	Name  string
	Nodes []api.Node
}

// Resource and label names the readers use.
const (
	// GPU is the device type of every GPU the traces describe.
	GPU resource.Name = "nvidia.com/gpu"
	// TPU is the device type of the synthetic cluster's TPUs.
	TPU resource.Name = "google.com/tpu"
	// ModelLabel is the node label naming the model of a node's GPUs
	// (V100M32, p100, H100, ...); a task restricted to some models selects
	// on it ({"gpu.model": "A|B"}, alternatives split on '|' as the core
	// does). CPU-only nodes do not carry it.
	ModelLabel = "gpu.model"
	// TPUModelLabel names the model of a node's TPUs.
	TPUModelLabel = "tpu.model"
)

// deviceNode returns a node with cpu (millicores) and memory (bytes)
// capacity and n devices of type typ and the model, IDs "0".."n-1", with
// label labelKey = model when n > 0 and the model is known.
func deviceNode(name string, cpu, mem int64, typ resource.Name, model string, n int, labelKey string) api.Node {
	node := api.Node{
		Name:     name,
		Capacity: resource.List{resource.CPU: cpu, resource.Memory: mem},
	}
	if n > 0 {
		node.Devices = make([]api.Device, n)
		for i := range node.Devices {
			node.Devices[i] = api.Device{Type: string(typ), ID: strconv.Itoa(i), Model: model}
		}
		if model != "" {
			node.Labels = map[string]string{labelKey: model}
		}
	}
	return node
}
