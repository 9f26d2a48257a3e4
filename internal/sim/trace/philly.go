package trace

import (
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Per-GPU host resources of a Philly job (the trace records GPUs only):
// a Philly server has 8 GPUs; 4 cores and 16 GiB a GPU leave a 32-core,
// 128 GiB share of a typical host to each full 8-GPU job.
const (
	PhillyCPUPerGPU    = 4000     // millicores
	PhillyMemoryPerGPU = 16 << 30 // bytes
)

// phillyTime is the layout of philly.csv's timestamps (read as UTC).
const phillyTime = "2006-01-02 15:04:05"

// ReadPhilly reads Microsoft Philly's job list as derived by Sia
// (philly.csv): a header naming at least timestamp,duration,num_gpus,
// cluster (gpu_time and other columns are ignored), then one job per row.
// Rows are not sorted in the file: jobs are returned sorted by timestamp
// (ties keep file order), with Arrival measured from the earliest.
//
// A job's ID is "philly-L", L its line number in the file. Its task asks
// for num_gpus nvidia.com/gpu (×1000 milli), PhillyCPUPerGPU millicores
// and PhillyMemoryPerGPU bytes per GPU, in queue "vc-"+cluster (the
// virtual cluster), at priority 2 (medium). A job with num_gpus 0 (none in
// the published file) is kept as a CPU job with one GPU's share of cpu and
// memory. Jobs of more than 8 GPUs (289 in the published file) span
// several Philly servers; they are kept as one task, which only a node
// with that many GPUs can hold. Duration is the duration column (seconds,
// must be positive); Task.Duration is left unset. timestamp is
// "YYYY-MM-DD hh:mm:ss", read as UTC. The workload is named "philly".
// Errors are *ParseError naming the line and column; no row is skipped.
func ReadPhilly(r io.Reader) (Workload, error) {
	rr := newRowReader(r, ',')
	if err := rr.readHeader("timestamp", "duration", "num_gpus", "cluster"); err != nil {
		return Workload{}, err
	}
	// Jobs are big (hundreds of bytes): gather and sort compact rows, and
	// build the jobs once, in place.
	type row struct {
		at    time.Time
		dur   float64
		gpus  int64
		line  int
		queue string
	}
	var rows []row
	err := rr.eachRow(func() error {
		at, err := time.Parse(phillyTime, rr.get("timestamp"))
		if err != nil {
			return rr.errf("timestamp", "want YYYY-MM-DD hh:mm:ss, got %q", truncate(rr.get("timestamp")))
		}
		dur, err := parseFloat(rr.get("duration"), 0, maxSeconds)
		if err == nil && dur <= 0 {
			err = errNotPositive
		}
		if err != nil {
			return rr.wrap("duration", err)
		}
		gpus, err := parseInt(rr.get("num_gpus"), 0, api.MaxDeviceCount)
		if err != nil {
			return rr.wrap("num_gpus", err)
		}
		queue := "vc-" + rr.get("cluster")
		if err := api.ValidateID("cluster", queue); err != nil || rr.get("cluster") == "" {
			return rr.errf("cluster", "want a virtual cluster id of letters and digits, got %q", truncate(rr.get("cluster")))
		}
		rows = append(rows, row{at: at, dur: dur, gpus: gpus, line: rr.line, queue: queue})
		return nil
	})
	if err != nil {
		return Workload{}, err
	}
	slices.SortStableFunc(rows, func(a, b row) int { return a.at.Compare(b.at) })
	w := Workload{Name: "philly", Arrivals: make([]Arrival, len(rows))}
	for i, r := range rows {
		n := max(r.gpus, 1)
		j := &w.Arrivals[i]
		j.ID = "philly-" + strconv.Itoa(r.line)
		j.At = r.at.Sub(rows[0].at)
		j.Duration = seconds(r.dur)
		j.Task = api.Task{
			Queue:    r.queue,
			Priority: ptr(api.PriorityMedium),
			Resources: resource.List{
				resource.CPU:    n * PhillyCPUPerGPU,
				resource.Memory: n * PhillyMemoryPerGPU,
			},
		}
		if r.gpus > 0 {
			j.Task.Resources[GPU] = r.gpus * 1000
		}
	}
	return w, nil
}
