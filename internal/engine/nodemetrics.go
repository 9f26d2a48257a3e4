package engine

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hetsched/hetsched/internal/agentapi"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

// Per-node and per-device series. They are not kept as gauges refreshed
// by the loop (with 10,000 nodes of eight devices that would be hundreds of
// thousands of series set every second): a scrape asks the loop for one
// flat copy of the numbers, and the collector turns it into the scrape's
// metrics (outside the loop). Cardinality is bounded by the limit: a fleet of more nodes than
// that exports none of these series (hetsched_node_series_capped says so),
// not an arbitrary part of them.

// Per-node metric descriptions.
var (
	nodeCapacityDesc = prometheus.NewDesc("hetsched_node_resource_capacity",
		"A node's capacity by resource, in base units (cores for cpu, bytes for memory and ephemeral-storage, units for the rest).",
		[]string{"node", "resource"}, nil)
	nodeAllocatedDesc = prometheus.NewDesc("hetsched_node_resource_allocated",
		"A node's allocated resources by resource, in base units (as hetsched_node_resource_capacity).",
		[]string{"node", "resource"}, nil)
	nodeCPUUtilDesc = prometheus.NewDesc("hetsched_node_cpu_utilization_ratio",
		"The fraction of a node's CPU in use, from its agent's latest heartbeat (absent without an agent).",
		[]string{"node"}, nil)
	nodeMemUsedDesc = prometheus.NewDesc("hetsched_node_memory_used_bytes",
		"A node's memory in use, from its agent's latest heartbeat (absent without an agent).",
		[]string{"node"}, nil)
	deviceAllocDesc = prometheus.NewDesc("hetsched_node_device_allocated_ratio",
		"The allocated share of one device, 0..1 (a whole device is 1).",
		[]string{"node", "type", "device", "model"}, nil)
	deviceHealthyDesc = prometheus.NewDesc("hetsched_node_device_healthy",
		"1 while a device is healthy, 0 while it is not (unhealthy devices take no new work).",
		[]string{"node", "type", "device", "model"}, nil)
	deviceUtilDesc = prometheus.NewDesc("hetsched_node_device_utilization_ratio",
		"A device's utilization, 0..1, from its agent's latest heartbeat (absent when not reported).",
		[]string{"node", "type", "device"}, nil)
	deviceMemUsedDesc = prometheus.NewDesc("hetsched_node_device_memory_used_bytes",
		"A device's memory in use, from its agent's latest heartbeat (absent when not reported).",
		[]string{"node", "type", "device"}, nil)
	deviceMemDesc = prometheus.NewDesc("hetsched_node_device_memory_bytes",
		"A device's memory (absent when unknown).",
		[]string{"node", "type", "device"}, nil)
	nodeCappedDesc = prometheus.NewDesc("hetsched_node_series_capped",
		"1 when the fleet has more nodes than the per-node series limit (--node-metrics-limit), so that no per-node or per-device series is exported; 0 otherwise.",
		nil, nil)
)

// nodeCopy is what the loop copies of one node for a scrape: numbers and
// the strings they are labelled with (shared, never copied), so that the
// loop's part of a scrape is a walk of the nodes. usage's maps are
// replaced, never changed, by a heartbeat: reading them later is safe.
type nodeCopy struct {
	name       string
	cap, alloc [resource.MaxDims]int64
	devs       []core.Device // a window of nodeSnapshot.devs
	usage      agentapi.NodeUsage
	heard      bool
}

// nodeSnapshot is one scrape's copy of the fleet; capped reports a fleet
// of more than the limit's nodes (then there are none).
type nodeSnapshot struct {
	dims   []resource.Name
	nodes  []nodeCopy
	devs   []core.Device
	capped bool
}

// snapshotNodes copies the per-node values on the loop.
func (e *Engine) snapshotNodes(limit int) *nodeSnapshot {
	nodes := e.c.Nodes()
	if len(nodes) > limit {
		return &nodeSnapshot{capped: true}
	}
	dims := e.c.Dims()
	s := &nodeSnapshot{nodes: make([]nodeCopy, len(nodes))}
	for i := 0; i < dims.Len(); i++ {
		s.dims = append(s.dims, dims.Name(i))
	}
	nd := 0
	for _, n := range nodes {
		nd += len(n.Devices())
	}
	s.devs = make([]core.Device, 0, nd)
	for i, n := range nodes {
		c := &s.nodes[i]
		c.name = n.Name()
		c.cap, c.alloc = *n.Capacity(), *n.Allocated()
		first := len(s.devs)
		s.devs = append(s.devs, n.Devices()...)
		c.devs = s.devs[first:len(s.devs):len(s.devs)]
		c.usage, c.heard = e.sessions.usage[c.name] // the loop writes usage: it reads it without the lock
	}
	return s
}

// metrics sends the snapshot's series.
func (s *nodeSnapshot) metrics(ch chan<- prometheus.Metric) {
	capped := 0.0
	if s.capped {
		capped = 1
	}
	ch <- prometheus.MustNewConstMetric(nodeCappedDesc, prometheus.GaugeValue, capped)
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for i := range s.nodes {
		n := &s.nodes[i]
		for d, r := range s.dims {
			if n.cap[d] == 0 && n.alloc[d] == 0 {
				continue
			}
			gauge(nodeCapacityDesc, baseUnits(r, n.cap[d]), n.name, string(r))
			gauge(nodeAllocatedDesc, baseUnits(r, n.alloc[d]), n.name, string(r))
		}
		if n.heard && !n.usage.Simulated { // a simulated node's CPU is not measured
			gauge(nodeCPUUtilDesc, n.usage.CPU, n.name)
			if n.usage.MemoryUsed > 0 {
				gauge(nodeMemUsedDesc, float64(n.usage.MemoryUsed), n.name)
			}
		}
		for j := range n.devs {
			d := &n.devs[j]
			healthy := 0.0
			if d.Healthy {
				healthy = 1
			}
			gauge(deviceAllocDesc, float64(d.Used)/1000, n.name, d.Type, d.ID, d.Model)
			gauge(deviceHealthyDesc, healthy, n.name, d.Type, d.ID, d.Model)
			if d.Memory > 0 {
				gauge(deviceMemDesc, float64(d.Memory), n.name, d.Type, d.ID)
			}
			if b, ok := n.usage.Devices[d.ID]; n.heard && ok {
				gauge(deviceUtilDesc, b.Utilization, n.name, d.Type, d.ID)
				if b.MemoryUsed > 0 {
					gauge(deviceMemUsedDesc, float64(b.MemoryUsed), n.name, d.Type, d.ID)
				}
			}
		}
	}
}

// nodeSnapshotCmd runs snapshotNodes on the loop.
type nodeSnapshotCmd struct {
	answer
	limit int
	out   *nodeSnapshot
}

func (c *nodeSnapshotCmd) run(e *Engine, _ time.Time) { c.out = e.snapshotNodes(c.limit) }

// NodeCollector exports the per-node and per-device series of the engine
// current returns (nil: none, as on a standby) while the fleet has at most
// limit nodes (limit > 0). Each scrape costs the loop one walk of the
// nodes, bounded by timeout.
func NodeCollector(current func() *Engine, limit int, timeout time.Duration) prometheus.Collector {
	return &nodeCollector{current: current, limit: limit, timeout: timeout}
}

type nodeCollector struct {
	current func() *Engine
	limit   int
	timeout time.Duration
}

// Describe sends nothing: the series are many and change with the fleet
// (an unchecked collector).
func (c *nodeCollector) Describe(chan<- *prometheus.Desc) {}

// Collect asks the loop for the samples and sends them.
func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.current()
	if e == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	cmd := &nodeSnapshotCmd{limit: c.limit}
	if err := e.read(ctx, cmd, c.timeout); err != nil {
		return // a stopped engine, or a loop too busy to answer in time: no series this scrape
	}
	cmd.out.metrics(ch)
}

// baseUnits is canonical value v of r in the unit Prometheus expects:
// cores for cpu, bytes for memory and storage, whole units (devices) for
// the rest, whose canonical unit is the thousandth.
func baseUnits(r resource.Name, v int64) float64 {
	if r.Scale() == resource.Milli {
		return float64(v) / 1000
	}
	return float64(v)
}
