// Package sim is hetsched's discrete-event simulator: it replays a
// workload (trace.Workload) on a cluster (nodes) through the same
// scheduling core as the server (internal/core), one run per policy and
// seed, and measures what operators compare policies by. Time is
// simulated; the core never sees the wall clock.
//
// Glossary:
//   - Workload: a trace's arrivals in time order (trace.Workload), the
//     one meaning of the word in the tree; an arrival (trace.Arrival) is
//     one task, which the traces call a job: the run's own word for it
//     (job, Result.Jobs) follows the traces, not hetsched's job.
//   - Cluster: the nodes a run places on (trace.Cluster).
//   - Run: one policy and one seed over a workload and a cluster (Config,
//     Result); Sample: the cluster's state at one simulated time.
//   - Ideal: the reference bound a run is compared with (IdealSRTF,
//     ideal.go).
//   - Report: the tables and SVG/HTML pages of runs (package report).
package sim

// Stats summarises a sample of durations or sizes (seconds unless named).
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
}

// Sample is the cluster's state at one simulated time.
type Sample struct {
	T float64 `json:"t"` // seconds since the first arrival
	// Alloc is the allocated fraction of the schedulable capacity per
	// resource type (cpu, memory, nvidia.com/gpu, google.com/tpu, ...).
	Alloc map[string]float64 `json:"alloc"`
	// Arrived is the GPU demand that has arrived so far (placed or not,
	// finished or not), as a fraction of the GPU capacity.
	Arrived float64 `json:"arrived"`
	// Demand is the GPU demand present: arrived and not completed (placed
	// or waiting), as a fraction of the GPU capacity.
	Demand  float64 `json:"demand"`
	Pending int     `json:"pending"`
	Running int     `json:"running"`
}

// AllocPoint is the GPU allocation ratio when the arrived GPU demand first
// reached a fraction of the capacity (the FGD paper's protocol).
type AllocPoint struct {
	Arrived   float64 `json:"arrived"`   // e.g. 1.30 for 130 %
	Alloc     float64 `json:"alloc"`     // allocated GPU milli / GPU capacity
	FragRatio float64 `json:"fragRatio"` // fragmented GPU milli / GPU capacity
}

// CDFPoint is one point of an empirical CDF.
type CDFPoint struct {
	X float64 `json:"x"`
	P float64 `json:"p"`
}

// Result is one run: a policy on a workload and cluster with one seed.
type Result struct {
	Policy   string `json:"policy"`
	Seed     int64  `json:"seed"`
	Cluster  string `json:"cluster"`
	Workload string `json:"workload"`
	Nodes    int    `json:"nodes"`
	// GPUs and TPUs are the cluster's device counts.
	GPUs int `json:"gpus"`
	TPUs int `json:"tpus"`

	// Protocol is replay or fgd (Config.FGD); Durations is known when the
	// core was told every job's run time (Config.KnownDurations), else
	// learned.
	Protocol  string `json:"protocol,omitempty"`
	Durations string `json:"durations,omitempty"`

	Jobs      int `json:"jobs"`
	Placed    int `json:"placed"`
	Completed int `json:"completed"`
	// Unplaced jobs never started (no departures, or no node could ever
	// hold them).
	Unplaced int `json:"unplaced"`
	// Unfinished jobs were submitted and did not complete (waiting,
	// running, or never ending by design); JCT leaves them out.
	Unfinished int `json:"unfinished"`
	// Preemptions counts evictions (a gang's members each); PreemptedJobs
	// the jobs evicted at least once, MaxPreemptions the most any job was.
	Preemptions    int `json:"preemptions"`
	PreemptedJobs  int `json:"preemptedJobs"`
	MaxPreemptions int `json:"maxPreemptions"`
	// TierJobs is the number of jobs submitted per priority tier.
	TierJobs [4]int `json:"tierJobs"`

	// Makespan is from the first arrival to the last completion (s).
	Makespan float64 `json:"makespan"`
	// JCT is completion time minus arrival (s), of completed jobs.
	JCT Stats `json:"jct"`
	// JCTByWidth splits JCT by a job's width: "one-node" (as many GPUs
	// as one node has, or fewer) and "multi-node"; absent when no job was
	// wider than a node.
	JCTByWidth map[string]Stats `json:"jctByWidth,omitempty"`
	// QueueDelay is placement minus arrival (s), by priority tier.
	QueueDelay [4]Stats `json:"queueDelay"`
	// SLO is the fraction of each tier's submitted jobs placed within the
	// tier's delay target (1/1/5/20 ms): a job never placed misses it.
	// NaN-free: 1 when the tier had no job (TierJobs says so).
	SLO [4]float64 `json:"slo"`
	// Utilization is the time-averaged allocated fraction per resource
	// type, from the first arrival to the makespan's end.
	Utilization map[string]float64 `json:"utilization"`
	// UtilArrivals is the same over the arrival period only (first to
	// last arrival): the loaded steady state, before the tail drains.
	UtilArrivals map[string]float64 `json:"utilArrivals,omitempty"`
	// GPUAlloc is the GPU allocation ratio at the end of the arrivals
	// (the protocol's point) or averaged, FragRatio its fragmentation.
	GPUAlloc  float64      `json:"gpuAlloc"`
	FragRatio float64      `json:"fragRatio"`
	AllocAt   []AllocPoint `json:"allocAt,omitempty"`
	// Fairness is Jain's index over the queues' average dominant shares
	// (1 = equal; 0 when there is one queue or none).
	Fairness float64 `json:"fairness"`
	Queues   int     `json:"queues"`

	Series []Sample   `json:"series"`
	JCTCDF []CDFPoint `json:"jctCdf"`

	Events       int     `json:"events"`
	WallSeconds  float64 `json:"wallSeconds"`
	EventsPerSec float64 `json:"eventsPerSec"`
}
