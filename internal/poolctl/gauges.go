package poolctl

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/nodepool"
)

// Gauges are the pools' metrics. A nil *Gauges records nothing.
type Gauges struct {
	nodes  *prometheus.GaugeVec
	scales *prometheus.CounterVec
	fails  *prometheus.CounterVec
}

// NewGauges registers the pools' metrics on reg.
func NewGauges(reg prometheus.Registerer) *Gauges {
	g := &Gauges{
		nodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hetsched_node_pool_nodes",
			Help: "A node pool's nodes: ready (registered, taking work), draining, launching (asked for, not registered yet)."},
			[]string{"pool", "kind"}),
		scales: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hetsched_node_pool_scales_total",
			Help: "A node pool's scale decisions carried out: out (nodes asked for), in (a node drained)."},
			[]string{"pool", "direction"}),
		fails: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hetsched_node_pool_provider_errors_total",
			Help: "A node pool's provider calls that failed, by action (add, remove)."},
			[]string{"pool", "action"}),
	}
	reg.MustRegister(g.nodes, g.scales, g.fails)
	return g
}

func (g *Gauges) set(pools []nodepool.Pool) {
	if g == nil {
		return
	}
	for _, p := range pools {
		ready, draining := 0, 0
		for _, n := range p.Nodes {
			if n.State == api.NodeDraining {
				draining++
			} else {
				ready++
			}
		}
		g.nodes.WithLabelValues(p.Spec.Name, "ready").Set(float64(ready))
		g.nodes.WithLabelValues(p.Spec.Name, "draining").Set(float64(draining))
		g.nodes.WithLabelValues(p.Spec.Name, "launching").Set(float64(p.Launching))
	}
}

func (g *Gauges) scaled(pool, direction string) {
	if g != nil && pool != "" {
		g.scales.WithLabelValues(pool, direction).Inc()
	}
}

func (g *Gauges) failed(pool, action string) {
	if g != nil {
		g.fails.WithLabelValues(pool, action).Inc()
	}
}
