package trace

import (
	"io"
	"math"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// ReadOpenbNodes reads an Alibaba openb node list
// (openb_node_list_gpu_node.csv, openb_node_list_all_node.csv): a header
// naming at least the columns sn,cpu_milli,memory_mib,gpu,model, in any
// order, then one node per row, in file order.
//
// Each node is named sn and has capacity cpu = cpu_milli millicores and
// memory = memory_mib MiB (in bytes). A node with gpu > 0 has that many
// nvidia.com/gpu devices, IDs "0".."gpu-1", Model = model, and the label
// gpu.model = model (no label when model is empty). A node with gpu = 0 is
// CPU-only: no devices and no label, whatever model says. Every node
// passes api.Node.Validate; node names are unique. The cluster is named
// "openb". Errors are *ParseError naming the line and column.
func ReadOpenbNodes(r io.Reader) (Cluster, error) {
	rr := newRowReader(r, ',')
	if err := rr.readHeader("sn", "cpu_milli", "memory_mib", "gpu", "model"); err != nil {
		return Cluster{}, err
	}
	c := Cluster{Name: "openb"}
	seen := map[string]bool{}
	err := rr.eachRow(func() error {
		name, err := rr.uniqueID("sn", "node", seen)
		if err != nil {
			return err
		}
		cpu, err := parseInt(rr.get("cpu_milli"), 0, resource.MaxValue)
		if err != nil {
			return rr.wrap("cpu_milli", err)
		}
		mib, err := parseInt(rr.get("memory_mib"), 0, resource.MaxValue>>20)
		if err != nil {
			return rr.wrap("memory_mib", err)
		}
		gpus, err := parseInt(rr.get("gpu"), 0, api.MaxNodeDevices)
		if err != nil {
			return rr.wrap("gpu", err)
		}
		model := rr.get("model")
		if gpus > 0 && model != "" {
			if err := api.ValidateLabelValue(model); err != nil {
				return rr.wrap("model", err)
			}
		}
		n := deviceNode(name, cpu, mib<<20, GPU, model, int(gpus), ModelLabel)
		if err := n.Validate(); err != nil {
			return rr.wrap("", err)
		}
		c.Nodes = append(c.Nodes, n)
		return nil
	})
	if err != nil {
		return Cluster{}, err
	}
	return c, nil
}

// ReadOpenbPods reads an Alibaba openb pod list (openb_pod_list_*.csv): a
// header naming at least name,cpu_milli,memory_mib,num_gpu,gpu_milli, and
// optionally gpu_spec, qos, creation_time and deletion_time (other columns,
// such as pod_phase and scheduled_time, are ignored; multigpu20 has only
// the first five), then one pod per row. Jobs keep the file's order
// (default is sorted by creation_time, gpushare40 is not, multigpu20 has
// no times; the FGD protocol shuffles them per seed anyway).
//
// A job's ID is the pod's name (unique). Its task asks for cpu =
// cpu_milli millicores, memory = memory_mib MiB, and nvidia.com/gpu:
// gpu_milli milli-GPUs when num_gpu = 1 (a share of one GPU below 1000,
// one whole GPU at 1000), num_gpu×1000 when num_gpu > 1 (the published
// lists give such pods gpu_milli 1000; a smaller value still takes whole
// GPUs, which is all the core can place), and none when num_gpu = 0
// (gpu_milli ignored). A GPU pod with gpu_milli outside 1..1000 is an
// error.
//
// gpu_spec, a '|'-separated list of GPU models, becomes NodeSelector
// {"gpu.model": gpu_spec} on GPU pods (ignored on CPU pods). qos sets the
// priority: LS, Guaranteed and Burstable, or no qos column or an empty
// value, give 2 (medium); BE (best effort) gives 3 (low); anything else is
// an error. Arrival is creation_time seconds (0 without the column);
// Duration is deletion_time − creation_time when both are present and the
// difference is positive, else 0 (the FGD protocol has no departures
// anyway). Task.Duration (what the scheduler is told) is left unset, as is
// Metadata. The workload is named "openb". Errors are *ParseError naming
// the line and column.
func ReadOpenbPods(r io.Reader) (Workload, error) {
	rr := newRowReader(r, ',')
	if err := rr.readHeader("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"); err != nil {
		return Workload{}, err
	}
	w := Workload{Name: "openb"}
	seen := map[string]bool{}
	err := rr.eachRow(func() error {
		j, err := openbPod(rr)
		if err != nil {
			return err
		}
		if seen[j.ID] {
			return rr.errf("name", "duplicate pod %q", j.ID)
		}
		seen[j.ID] = true
		if err := j.Task.Validate(); err != nil {
			return rr.wrap("", err)
		}
		w.Arrivals = append(w.Arrivals, j)
		return nil
	})
	if err != nil {
		return Workload{}, err
	}
	return w, nil
}

func openbPod(rr *rowReader) (Arrival, error) {
	name := rr.get("name")
	if err := api.ValidateID("name", name); err != nil {
		return Arrival{}, rr.wrap("name", err)
	}
	cpu, err := parseInt(rr.get("cpu_milli"), 0, resource.MaxValue)
	if err != nil {
		return Arrival{}, rr.wrap("cpu_milli", err)
	}
	mib, err := parseInt(rr.get("memory_mib"), 0, resource.MaxValue>>20)
	if err != nil {
		return Arrival{}, rr.wrap("memory_mib", err)
	}
	numGPU, err := parseInt(rr.get("num_gpu"), 0, api.MaxDeviceCount)
	if err != nil {
		return Arrival{}, rr.wrap("num_gpu", err)
	}
	milli, err := parseInt(rr.get("gpu_milli"), 0, math.MaxInt32)
	if err != nil {
		return Arrival{}, rr.wrap("gpu_milli", err)
	}
	task := api.Task{Resources: resource.List{resource.CPU: cpu, resource.Memory: mib << 20}}
	switch {
	case numGPU == 0:
	case milli < 1 || milli > 1000:
		return Arrival{}, rr.errf("gpu_milli", "a GPU pod asks for 1..1000 milli-GPUs of each GPU, got %d", milli)
	case numGPU == 1:
		task.Resources[GPU] = milli
	default:
		task.Resources[GPU] = numGPU * 1000
	}
	if spec := rr.get("gpu_spec"); spec != "" && numGPU > 0 {
		for _, m := range strings.Split(spec, "|") {
			if err := api.ValidateLabelValue(m); err != nil || m == "" {
				return Arrival{}, rr.errf("gpu_spec", "%q is not a '|'-separated list of GPU models", truncate(spec))
			}
		}
		task.NodeSelector = map[string]string{ModelLabel: spec}
	}
	switch q := rr.get("qos"); q {
	case "", "LS", "Guaranteed", "Burstable":
		task.Priority = ptr(api.PriorityMedium)
	case "BE":
		task.Priority = ptr(api.PriorityLow)
	default:
		return Arrival{}, rr.errf("qos", "want LS, BE, Guaranteed or Burstable, got %q", truncate(q))
	}
	j := Arrival{ID: name, Task: task}
	var created float64
	if s := rr.get("creation_time"); s != "" {
		created, err = parseFloat(s, 0, maxSeconds)
		if err != nil {
			return Arrival{}, rr.wrap("creation_time", err)
		}
		j.At = seconds(created)
	}
	if s := rr.get("deletion_time"); s != "" {
		deleted, err := parseFloat(s, 0, maxSeconds)
		if err != nil {
			return Arrival{}, rr.wrap("deletion_time", err)
		}
		if rr.get("creation_time") != "" && deleted > created {
			j.Duration = seconds(deleted) - j.At
		}
	}
	return j, nil
}
