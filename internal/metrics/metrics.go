// Package metrics defines hetsched's Prometheus metrics (all named
// hetsched_*). Collectors live on a registry passed in; there is no global
// registry.
package metrics

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hetsched/hetsched/internal/api"
)

// Metrics holds the collectors the engine and the server update.
type Metrics struct {
	SchedulingDelay *prometheus.HistogramVec // tier
	Placements      *prometheus.CounterVec   // tier
	Preemptions     *prometheus.CounterVec   // reason (priority, reclaim, gang)
	Transitions     *prometheus.CounterVec   // to
	CoreEvents      *prometheus.CounterVec   // event (CoreEventNames)
	Pending         *prometheus.GaugeVec     // tier
	PendingQueue    *prometheus.GaugeVec     // queue, tier
	DeviceCapacity  *prometheus.GaugeVec     // resource, model
	DeviceAllocated *prometheus.GaugeVec     // resource, model
	Capacity        *prometheus.GaugeVec     // resource
	Allocated       *prometheus.GaugeVec     // resource
	Nodes           *prometheus.GaugeVec     // state
	APIDuration     *prometheus.HistogramVec
	CommitDuration  prometheus.Histogram
	CommitRecords   prometheus.Histogram
	Tasks           prometheus.Gauge
	QueueUsage      *prometheus.GaugeVec   // queue, resource
	QueueMax        *prometheus.GaugeVec   // queue, resource
	QueueGuaranteed *prometheus.GaugeVec   // queue, resource
	QueueFairShare  *prometheus.GaugeVec   // queue, resource
	PendingReason   *prometheus.GaugeVec   // queue, reason
	Shed            *prometheus.CounterVec // tier
	// Safety (issue 15): streams, connections, the store's disk.
	EventStreams     prometheus.Gauge
	Refused          *prometheus.CounterVec // reason
	StoreFreeBytes   prometheus.Gauge
	StoreReserve     prometheus.Gauge
	StoreWritable    prometheus.Gauge
	StoreTornBytes   prometheus.Gauge
	StoreTornRecords prometheus.Gauge
	// SchedulingAttempt is the decision latency (tier, result);
	// SchedulingDecision its part in the core, before the commit (tier).
	SchedulingAttempt  *prometheus.HistogramVec
	SchedulingDecision *prometheus.HistogramVec
	// High availability (issue 18).
	Leader        prometheus.Gauge
	LeaderChanges prometheus.Counter
	// The cost of preemption (issue 21): a preempted command's time from
	// its stop signal to its exit (forced), and an evicted task's time
	// from the eviction to its next attempt running.
	PreemptionStop    *prometheus.HistogramVec
	PreemptionRestart prometheus.Histogram
}

// preemptionBuckets span 10 ms to four hours.
var preemptionBuckets = []float64{.01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600}

// RefusedReasons are the label values of hetsched_refused_total.
var RefusedReasons = []string{"event_streams", "connections_per_ip", "insufficient_storage", "body_timeout"}

// AttemptResults are the result label values of
// hetsched_scheduling_attempt_duration_seconds.
var AttemptResults = []string{"scheduled", "unschedulable"}

// PreemptReasons are the label values of hetsched_preemptions_total, each
// exported from the start (at 0).
var PreemptReasons = []string{"priority", "reclaim", "gang", "timeshare"}

// CoreEventNames are the label values of hetsched_scheduler_events_total,
// each exported from the start (at 0): a task waiting past its starvation
// bound (sjf, srtf), a las starvation promotion, a gang reservation made.
var CoreEventNames = []string{"starved", "las_promoted", "gang_reserved"}

// New creates the collectors and registers them on reg.
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		SchedulingDelay: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hetsched_scheduling_delay_seconds",
			Help:    "Time from a task entering the queue to its placement, by native priority tier: waiting for capacity included (the decision alone is hetsched_scheduling_attempt_duration_seconds).",
			Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600},
		}, []string{"tier"}),
		SchedulingAttempt: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hetsched_scheduling_attempt_duration_seconds",
			Help:    "Decision latency of one scheduling attempt, by native priority tier and result (scheduled, unschedulable): from the later of the task's entry into the queue and the moment capacity it could use appeared, to the durable commit of the decision. Time waiting for capacity is not in it; a batch window is. The latency targets (1/1/5/20 ms) apply to it.",
			Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"tier", "result"}),
		SchedulingDecision: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hetsched_scheduling_decision_seconds",
			Help:    "The core's part of a placing attempt, by native priority tier: from the later of the task's entry into the queue and the moment capacity it could use appeared, to the core's decision, without the commit of the step that carried it (hetsched_scheduling_attempt_duration_seconds has the commit too).",
			Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"tier"}),
		Placements: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hetsched_placements_total",
			Help: "Tasks placed on a node, by native priority tier.",
		}, []string{"tier"}),
		Preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hetsched_preemptions_total",
			Help: "Tasks evicted, by reason: priority (for a more important task), reclaim (for a queue under its guarantee), gang (with a member of its gang).",
		}, []string{"reason"}),
		Transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hetsched_task_transitions_total",
			Help: "Task state changes other than placements, by the state entered.",
		}, []string{"to"}),
		CoreEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hetsched_scheduler_events_total",
			Help: "The scheduler's own events, by kind: starved (a task waited past its starvation bound under sjf or srtf and went ahead), las_promoted (las promoted a starved task to its first queue), gang_reserved (a waiting gang got a reservation).",
		}, []string{"event"}),
		Pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_pending_tasks",
			Help: "Tasks waiting to be placed, by effective tier (after aging).",
		}, []string{"tier"}),
		PendingQueue: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_pending_tasks_by_queue",
			Help: "Tasks waiting (pending or blocked) by queue and native priority tier.",
		}, []string{"queue", "tier"}),
		DeviceCapacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_device_capacity",
			Help: "Healthy devices by device type and model.",
		}, []string{"resource", "model"}),
		DeviceAllocated: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_device_allocated",
			Help: "Allocated devices by device type and model (a shared device counts its allocated fraction).",
		}, []string{"resource", "model"}),
		Capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_node_capacity",
			Help: "Healthy capacity of all nodes by resource, in base units: cores for cpu, bytes for memory and ephemeral-storage, units (devices) for extended resources.",
		}, []string{"resource"}),
		Allocated: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_node_allocated",
			Help: "Allocated resources of all nodes by resource, in base units (as hetsched_node_capacity).",
		}, []string{"resource"}),
		Nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_nodes",
			Help: "Nodes by state.",
		}, []string{"state"}),
		APIDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hetsched_api_request_duration_seconds",
			Help:    "HTTP API request duration by route and status code.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}, []string{"route", "code"}),
		CommitDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hetsched_store_commit_duration_seconds",
			Help:    "Durable store commit latency (one commit per engine step).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}),
		CommitRecords: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hetsched_store_commit_records",
			Help:    "Records per durable store commit (group commit batch size).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}),
		Tasks: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hetsched_tasks",
			Help: "Task records held by the control plane, all states.",
		}),
		QueueUsage: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_queue_usage",
			Help: "Resources held by the placed tasks of a queue and its descendants, in base units (as hetsched_node_capacity).",
		}, []string{"queue", "resource"}),
		QueueMax: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_queue_max",
			Help: "A queue's max by resource, in base units (as hetsched_node_capacity; absent: unlimited).",
		}, []string{"queue", "resource"}),
		QueueGuaranteed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_queue_guaranteed",
			Help: "A queue's guarantee by resource, in base units (as hetsched_node_capacity).",
		}, []string{"queue", "resource"}),
		QueueFairShare: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_queue_fair_share",
			Help: "A queue's instantaneous fair share of the schedulable capacity (guarantee, then weighted water-filling of its demand), by resource, in base units (as hetsched_node_capacity).",
		}, []string{"queue", "resource"}),
		PendingReason: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hetsched_pending_tasks_by_reason",
			Help: "Tasks waiting (pending or blocked) by queue and reason: scheduling, resources, queue_max, gang, backoff, preempted, dependencies, other.",
		}, []string{"queue", "reason"}),
	}
	m.Shed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hetsched_submissions_shed_total",
		Help: "Task submissions refused past capacity (429), by the tier of their most important task.",
	}, []string{"tier"})
	for _, r := range PreemptReasons {
		m.Preemptions.WithLabelValues(r)
	}
	for _, e := range CoreEventNames {
		m.CoreEvents.WithLabelValues(e)
	}
	for _, tier := range api.TierNames {
		for _, r := range AttemptResults {
			m.SchedulingAttempt.WithLabelValues(tier, r)
		}
		m.SchedulingDelay.WithLabelValues(tier)
		m.SchedulingDecision.WithLabelValues(tier)
		m.Placements.WithLabelValues(tier)
		m.Shed.WithLabelValues(tier)
	}
	newSafety(m)
	for _, r := range RefusedReasons {
		m.Refused.WithLabelValues(r)
	}
	reg.MustRegister(m.EventStreams, m.Refused, m.StoreFreeBytes, m.StoreReserve, m.StoreWritable, m.StoreTornBytes, m.StoreTornRecords)
	reg.MustRegister(m.SchedulingDelay, m.SchedulingAttempt, m.SchedulingDecision, m.Placements, m.Preemptions, m.Transitions, m.CoreEvents, m.Pending,
		m.PendingQueue, m.DeviceCapacity, m.DeviceAllocated,
		m.Capacity, m.Allocated, m.Nodes, m.APIDuration, m.CommitDuration, m.CommitRecords, m.Tasks,
		m.QueueUsage, m.QueueMax, m.QueueGuaranteed, m.QueueFairShare, m.PendingReason, m.Shed)
	m.Leader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hetsched_leader",
		Help: "1 while this server leads (runs the scheduler and writes the store), 0 while it is a standby. A server without --store etcd always leads.",
	})
	m.LeaderChanges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "hetsched_leader_changes_total",
		Help: "Times this server became the leader or stopped being it.",
	})
	reg.MustRegister(m.Leader, m.LeaderChanges)
	m.PreemptionStop = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hetsched_preemption_stop_seconds",
		Help:    "Time a preempted attempt's command took to exit after its stop signal (its checkpoint signal, when it declares one), as its agent measured it, by forced (true: its grace ran out and it was SIGKILLed).",
		Buckets: preemptionBuckets,
	}, []string{"forced"})
	m.PreemptionStop.WithLabelValues("false")
	m.PreemptionStop.WithLabelValues("true")
	m.PreemptionRestart = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "hetsched_preemption_restart_seconds",
		Help:    "Time from a task's eviction by preemption to its next attempt running (waiting to be placed again and started).",
		Buckets: preemptionBuckets,
	})
	reg.MustRegister(m.PreemptionStop, m.PreemptionRestart)
	reg.MustRegister(BuildInfo(ReadBuild()))
	return m
}

// Build is what the binary knows of its own build (runtime/debug's
// BuildInfo): the module version ("(devel)" for a build from a checkout),
// the VCS commit and its time, whether the tree had uncommitted changes,
// and the Go version.
type Build struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	Time      string `json:"time,omitempty"`
	Dirty     bool   `json:"dirty"`
	GoVersion string `json:"goVersion"`
}

// Release stamps, set at link time by tools/release (-ldflags -X): a
// release build says its version, commit and time even where the Go
// toolchain stamps none (no VCS at hand, -buildvcs=false).
var (
	stampVersion string
	stampCommit  string
	stampTime    string
)

// ReadBuild reads the running binary's Build: the release stamps when
// set, else what the Go toolchain recorded. A test binary or a build
// without VCS stamping has no commit.
func ReadBuild() Build {
	b := readToolchainBuild()
	if stampVersion != "" {
		b.Version = stampVersion
	}
	if stampCommit != "" {
		b.Commit, b.Dirty = stampCommit, false
	}
	if stampTime != "" {
		b.Time = stampTime
	}
	return b
}

func readToolchainBuild() Build {
	b := Build{Version: "unknown", GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		b.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Dirty = s.Value == "true"
		}
	}
	return b
}

// BuildInfo is hetsched_build_info: 1, labelled with b (a commit of a
// dirty tree ends in "-dirty"). The server and the agent export it.
func BuildInfo(b Build) prometheus.Collector {
	commit := b.Commit
	if commit != "" && b.Dirty {
		commit += "-dirty"
	}
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "hetsched_build_info",
		Help:        "Always 1; its labels are the binary's module version, VCS commit (-dirty: uncommitted changes) and Go version.",
		ConstLabels: prometheus.Labels{"version": b.Version, "commit": commit, "goversion": b.GoVersion},
	}, func() float64 { return 1 })
}

// newSafety creates the collectors of the server's own protection.
func newSafety(m *Metrics) {
	m.EventStreams = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hetsched_event_streams",
		Help: "Open GET /events streams.",
	})
	m.Refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hetsched_refused_total",
		Help: "Requests and connections refused to protect the server: event_streams (503, past the stream caps), connections_per_ip (past --max-conns-per-ip), insufficient_storage (507, below --disk-reserve), body_timeout (408).",
	}, []string{"reason"})
	m.StoreFreeBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hetsched_store_free_bytes",
		Help: "Free bytes on the store's filesystem (as last measured).",
	})
	m.StoreReserve = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hetsched_store_reserve_bytes",
		Help: "The free-space reserve below which API writes are refused with 507.",
	})
	m.StoreWritable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hetsched_store_writable",
		Help: "1 while the store takes API writes; 0 below the free-space reserve or after a failed write.",
	})
	m.StoreTornBytes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hetsched_store_wal_truncated_bytes",
		Help: "Bytes of a torn write-ahead log tail dropped when the store was opened (the end of an interrupted write).",
	})
	m.StoreTornRecords = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "hetsched_store_wal_truncated_records",
		Help: "Incomplete records of a torn write-ahead log tail dropped when the store was opened.",
	})
}
