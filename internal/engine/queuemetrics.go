package engine

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The aggregate of the pending tasks' estimated starts (core.QueueInfo):
// for each queue, when its next task waiting for capacity is expected to
// start. Read at scrape time, as the per-node series are, within a budget
// of nodes and running tasks looked at per scrape.

var queueNextStartDesc = prometheus.NewDesc("hetsched_queue_next_start_seconds",
	"Seconds until the next task of a queue that waits for capacity is expected to start (the earliest estimated start of the first tasks of its blocked scheduling classes, as GET /tasks/{id}'s queueing.estimatedStart; 0: overdue). Absent for a queue with no estimate, and for classes past the scrape's budget.",
	[]string{"queue"}, nil)

// EstimateBudget is how many nodes and running tasks one scrape's
// estimates look at, in all.
const EstimateBudget = 200_000

// EstimateCollector exports hetsched_queue_next_start_seconds for the
// engine current returns (nil: none).
func EstimateCollector(current func() *Engine, budget int, timeout time.Duration) prometheus.Collector {
	return &estimateCollector{current: current, budget: budget, timeout: timeout}
}

type estimateCollector struct {
	current func() *Engine
	budget  int
	timeout time.Duration
}

// Describe sends nothing: an unchecked collector (its series follow the
// queues).
func (c *estimateCollector) Describe(chan<- *prometheus.Desc) {}

func (c *estimateCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.current()
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	cmd := &queueEstimatesCmd{budget: c.budget}
	if err := e.read(ctx, cmd, c.timeout); err != nil {
		return
	}
	for q, wait := range cmd.out {
		ch <- prometheus.MustNewConstMetric(queueNextStartDesc, prometheus.GaugeValue, wait.Seconds(), q)
	}
}

// queueEstimatesCmd computes, on the loop, the earliest estimated start
// per queue, as a wait from now.
type queueEstimatesCmd struct {
	answer
	budget int
	out    map[string]time.Duration
}

func (c *queueEstimatesCmd) run(e *Engine, now time.Time) {
	c.out = map[string]time.Duration{}
	for _, h := range e.c.HeadEstimates(c.budget) {
		r := e.tasks[h.Task] // the loop writes tasks: it reads them without the lock
		if r == nil {
			continue
		}
		q := queueName(r)
		wait := max(h.Start.Sub(now), 0)
		if w, ok := c.out[q]; !ok || wait < w {
			c.out[q] = wait
		}
	}
}
