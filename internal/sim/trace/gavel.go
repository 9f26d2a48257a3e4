package trace

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// GavelModels are the GPU models of Gavel's cluster, fastest first, spelt
// as in its throughput files (lower case): ByModel keys, device models and
// gpu.model labels of GavelCluster all use these names. The throughput
// files' *_unconsolidated worker types (a multi-GPU job spread over
// servers) are read but not used.
var GavelModels = []string{"v100", "p100", "k80"}

// Host resources of a Gavel job and node. Gavel's traces record GPUs only;
// the nodes hold far more than 8 jobs' worth.
const (
	GavelCPUPerGPU    = 1000    // millicores
	GavelMemoryPerGPU = 4 << 30 // bytes
	GavelNodeGPUs     = 8
	GavelNodeCPU      = 32_000    // millicores
	GavelNodeMemory   = 256 << 30 // bytes
)

// ThroughputKey names one measured configuration: a job type on a worker
// (GPU) type at a scale factor (GPUs).
type ThroughputKey struct {
	Worker  string
	JobType string
	Scale   int
}

// Throughputs maps configurations to steps per second when the job runs
// alone; 0 means the job type cannot run there (it does not fit).
type Throughputs map[ThroughputKey]float64

// JobTypes returns the job types the table measures, sorted.
func (th Throughputs) JobTypes() []string {
	seen := map[string]bool{}
	for k := range th {
		seen[k.JobType] = true
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// maxScale bounds a scale factor (GPUs of one job).
const maxScale = api.MaxDeviceCount

// ReadGavelThroughputs reads Gavel's isolated throughputs
// (simulation_throughputs_isolated.csv, physical_cluster_...): a header
// naming at least worker_type,job_type,scale_factor,
// isolated_throughput_steps_per_s, then one measurement per row. Names are
// kept as written (trimmed); scale_factor is 1..1024; throughputs are
// finite and non-negative. A configuration given twice is an error, as is
// an empty worker or job type. Errors are *ParseError naming the line and
// column.
func ReadGavelThroughputs(r io.Reader) (Throughputs, error) {
	rr := newRowReader(r, ',')
	if err := rr.readHeader("worker_type", "job_type", "scale_factor", "isolated_throughput_steps_per_s"); err != nil {
		return nil, err
	}
	th := Throughputs{}
	err := rr.eachRow(func() error {
		worker, job := rr.get("worker_type"), rr.get("job_type")
		if worker == "" || len(worker) > api.MaxIDLen {
			return rr.errf("worker_type", "want 1 to %d characters", api.MaxIDLen)
		}
		if job == "" || len(job) > api.MaxIDLen {
			return rr.errf("job_type", "want 1 to %d characters", api.MaxIDLen)
		}
		scale, err := parseInt(rr.get("scale_factor"), 1, maxScale)
		if err != nil {
			return rr.wrap("scale_factor", err)
		}
		v, err := parseFloat(rr.get("isolated_throughput_steps_per_s"), 0, math.MaxFloat64)
		if err != nil {
			return rr.wrap("isolated_throughput_steps_per_s", err)
		}
		k := ThroughputKey{Worker: worker, JobType: job, Scale: int(scale)}
		if _, dup := th[k]; dup {
			return rr.errf("", "%s, %q, scale factor %d measured twice", worker, job, scale)
		}
		th[k] = v
		return nil
	})
	if err != nil {
		return nil, err
	}
	return th, nil
}

// gavelColumns are a Gavel trace's tab-separated fields.
var gavelColumns = []string{"job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
	"total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time"}

// ReadGavelTrace reads a Gavel job trace (traces/*.trace): no header, ten
// tab-separated fields a line: job_type, command, working_directory,
// num_steps_arg, needs_data_dir, total_steps, scale_factor,
// priority_weight, SLO, arrival_time (seconds). Jobs are returned sorted
// by arrival_time (ties keep file order), IDs "gavel-I" with I the job's
// 0-based index in the file.
//
// A job's task asks for scale_factor GPUs (nvidia.com/gpu ×1000),
// GavelCPUPerGPU millicores and GavelMemoryPerGPU bytes per GPU, at
// priority 2 (medium), with Name and Metadata["class"] = job_type (the
// core learns run times per class). ByModel[m] = total_steps /
// throughput(m, job_type, scale_factor) for each m of GavelModels that th
// measures with a positive throughput; a job that some models cannot run
// (ResNet-50 at batch size 128 on several K80s has throughput 0) gets
// NodeSelector {"gpu.model": the models it can run on, '|'-separated}.
// Duration, the fallback, is the slowest of ByModel. A job type and scale
// that no model runs is an error. command, working_directory,
// num_steps_arg, needs_data_dir, priority_weight and SLO are checked for
// shape and otherwise ignored (the published traces have weight 1 and no
// SLO); Task.Duration is left unset. The workload is named "gavel".
// Errors are *ParseError naming the line and column.
func ReadGavelTrace(r io.Reader, th Throughputs) (Workload, error) {
	rr := newRowReader(r, '\t')
	rr.setColumns(gavelColumns)
	w := Workload{Name: "gavel"}
	err := rr.eachRow(func() error {
		j, err := gavelJob(rr, th)
		if err != nil {
			return err
		}
		j.ID = "gavel-" + strconv.Itoa(len(w.Arrivals))
		w.Arrivals = append(w.Arrivals, j)
		return nil
	})
	if err != nil {
		return Workload{}, err
	}
	slices.SortStableFunc(w.Arrivals, func(a, b Arrival) int { return cmp.Compare(a.At, b.At) })
	return w, nil
}

func gavelJob(rr *rowReader, th Throughputs) (Arrival, error) {
	jobType := rr.get("job_type")
	if jobType == "" || len(jobType) > api.MaxIDLen {
		return Arrival{}, rr.errf("job_type", "want 1 to %d characters", api.MaxIDLen)
	}
	if _, err := parseInt(rr.get("needs_data_dir"), 0, 1); err != nil {
		return Arrival{}, rr.wrap("needs_data_dir", err)
	}
	steps, err := parseInt(rr.get("total_steps"), 1, 1<<53)
	if err != nil {
		return Arrival{}, rr.wrap("total_steps", err)
	}
	scale, err := parseInt(rr.get("scale_factor"), 1, maxScale)
	if err != nil {
		return Arrival{}, rr.wrap("scale_factor", err)
	}
	if _, err := parseFloat(rr.get("priority_weight"), 0, math.MaxFloat64); err != nil {
		return Arrival{}, rr.wrap("priority_weight", err)
	}
	if _, err := parseFloat(rr.get("SLO"), -math.MaxFloat64, math.MaxFloat64); err != nil {
		return Arrival{}, rr.wrap("SLO", err)
	}
	arrival, err := parseFloat(rr.get("arrival_time"), 0, maxSeconds)
	if err != nil {
		return Arrival{}, rr.wrap("arrival_time", err)
	}
	j := Arrival{
		At: seconds(arrival),
		Task: api.Task{
			Name:     jobType,
			Priority: ptr(api.PriorityMedium),
			Resources: resource.List{
				GPU:             scale * 1000,
				resource.CPU:    scale * GavelCPUPerGPU,
				resource.Memory: scale * GavelMemoryPerGPU,
			},
			Metadata: map[string]string{"class": jobType},
		},
		ByModel: map[string]time.Duration{},
	}
	var runs []string
	for _, m := range GavelModels {
		v := th[ThroughputKey{Worker: m, JobType: jobType, Scale: int(scale)}]
		if v <= 0 {
			continue
		}
		secs := float64(steps) / v
		if secs > maxSeconds {
			return Arrival{}, rr.errf("total_steps", "%d steps at %v steps/s on %s take longer than %v s", steps, v, m, maxSeconds)
		}
		d := seconds(secs)
		j.ByModel[m] = d
		j.Duration = max(j.Duration, d)
		runs = append(runs, m)
	}
	if len(runs) == 0 {
		return Arrival{}, rr.errf("job_type", "%q at scale factor %d has no positive throughput on %s in the throughput table", truncate(jobType), scale, strings.Join(GavelModels, ", "))
	}
	if len(runs) < len(GavelModels) {
		j.Task.NodeSelector = map[string]string{ModelLabel: strings.Join(runs, "|")}
	}
	return j, nil
}

// GavelCluster returns Gavel's kind of cluster: v100, p100 and k80 GPUs
// (negative counts count as 0) on nodes of GavelNodeGPUs GPUs of one model,
// the last node of a model holding the remainder (8 V100 → 1 node, 16
// P100 → 2, 24 K80 → 3, 10 V100 → 8 + 2). Nodes are named
// "<model>-<i>", in GavelModels order, with GavelNodeCPU millicores,
// GavelNodeMemory bytes, devices of Model <model> and the label
// gpu.model = <model>. The cluster is named "gavel:V,P,K".
func GavelCluster(v100, p100, k80 int) Cluster {
	c := Cluster{Name: fmt.Sprintf("gavel:%d,%d,%d", max(v100, 0), max(p100, 0), max(k80, 0))}
	for i, n := range []int{v100, p100, k80} {
		m := GavelModels[i]
		for k := 0; n > 0; k++ {
			g := min(n, GavelNodeGPUs)
			c.Nodes = append(c.Nodes, deviceNode(m+"-"+strconv.Itoa(k), GavelNodeCPU, GavelNodeMemory, GPU, m, g, ModelLabel))
			n -= g
		}
	}
	return c
}
