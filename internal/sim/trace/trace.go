// Package trace reads cluster and workload traces for the simulator
// (internal/sim): the Alibaba openb node and pod lists (FGD, ATC'23), the
// Alibaba PAI 2020 machine list, Microsoft Philly's job list, Gavel's job
// traces with its throughput table (OSDI'20), and a seeded synthetic
// generator. Readers stream, bound what they accept and name the line and
// field of bad input.
package trace

import (
	"time"

	"github.com/hetsched/hetsched/internal/api"
)

// Job is one unit of work of a workload: a task submitted at Arrival.
type Job struct {
	ID      string
	Arrival time.Duration // since the workload's start
	// Task carries resources, alternatives, nodeSelector, priority and
	// queue; its ID is set by the simulator.
	Task api.Task
	// Duration is the run time when nothing says otherwise; 0 means the
	// job never ends by itself (the FGD protocol has no departures).
	Duration time.Duration
	// ByModel, when set, is the run time on each device model (Gavel's
	// measured throughputs); a model not listed runs for Duration.
	ByModel map[string]time.Duration
}

// Workload is a named list of jobs in arrival order.
type Workload struct {
	Name string
	Jobs []Job
}

// Cluster is a named list of nodes.
type Cluster struct {
	Name  string
	Nodes []api.Node
}
