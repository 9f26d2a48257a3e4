package trace

import (
	"io"
	"math"
	"strings"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// paiHeader is the column list of pai_machine_spec.header.
const paiHeader = "machine,gpu_type,cap_cpu,cap_mem,cap_gpu"

// ReadPAIMachines reads the Alibaba PAI 2020 machine list
// (pai_machine_spec.csv): no header (a first line equal to
// "machine,gpu_type,cap_cpu,cap_mem,cap_gpu" is skipped), five columns
// machine,gpu_type,cap_cpu,cap_mem,cap_gpu, one machine per row, in file
// order.
//
// Each node is named machine and has capacity cpu = cap_cpu cores (as
// millicores) and memory = cap_mem GiB (in bytes; the trace's 384 and 512
// are GiB). A machine with cap_gpu > 0 has that many nvidia.com/gpu
// devices, IDs "0".."cap_gpu-1", Model = gpu_type (P100, T4, V100,
// V100M32, MISC) and the label gpu.model = gpu_type. gpu_type CPU marks a
// CPU-only machine: cap_gpu must be 0, and it gets no devices and no
// label. Node names are unique and every node passes api.Node.Validate.
// The cluster is named "pai". Errors are *ParseError naming the line and
// column.
func ReadPAIMachines(r io.Reader) (Cluster, error) {
	rr := newRowReader(r, ',')
	rr.setColumns(strings.Split(paiHeader, ","))
	c := Cluster{Name: "pai"}
	seen := map[string]bool{}
	err := rr.eachRow(func() error {
		if rr.rows == 1 && strings.Join(rr.rec, ",") == paiHeader {
			rr.rows--
			return nil
		}
		name, err := rr.uniqueID("machine", "machine", seen)
		if err != nil {
			return err
		}
		model := rr.get("gpu_type")
		if err := api.ValidateLabelValue(model); err != nil || model == "" {
			return rr.errf("gpu_type", "want a GPU model (P100, T4, V100, V100M32, MISC) or CPU, got %q", truncate(model))
		}
		cores, err := parseFloat(rr.get("cap_cpu"), 0, float64(resource.MaxValue/1000))
		if err != nil {
			return rr.wrap("cap_cpu", err)
		}
		gib, err := parseFloat(rr.get("cap_mem"), 0, float64(resource.MaxValue>>30))
		if err != nil {
			return rr.wrap("cap_mem", err)
		}
		gpus, err := parseInt(rr.get("cap_gpu"), 0, api.MaxNodeDevices)
		if err != nil {
			return rr.wrap("cap_gpu", err)
		}
		if model == "CPU" && gpus != 0 {
			return rr.errf("cap_gpu", "a CPU machine has no GPUs, got %d", gpus)
		}
		n := deviceNode(name, int64(math.Round(cores*1000)), int64(math.Round(gib*(1<<30))), GPU, model, int(gpus), ModelLabel)
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
