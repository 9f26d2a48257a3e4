package servicectl

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hetsched/hetsched/internal/service"
)

// Gauges are the services' metrics: replica counts by kind, and each
// autoscale metric's current value and target. A service's series go
// when it does. A nil *Gauges records nothing.
type Gauges struct {
	replicas *prometheus.GaugeVec
	metric   *prometheus.GaugeVec
	scales   *prometheus.CounterVec
}

// NewGauges registers the services' metrics on reg.
func NewGauges(reg prometheus.Registerer) *Gauges {
	g := &Gauges{
		replicas: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hetsched_service_replicas",
			Help: "A service's replicas: desired (what it runs for), current (live replica tasks), ready (running and ready)."},
			[]string{"service", "kind"}),
		metric: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hetsched_service_metric",
			Help: "A service's autoscale metric: its current value (utilization percent, or value per replica) and its target."},
			[]string{"service", "metric", "kind"}),
		scales: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hetsched_service_scales_total",
			Help: "Changes of a service's desired replica count, by direction (up, down)."},
			[]string{"service", "direction"}),
	}
	reg.MustRegister(g.replicas, g.metric, g.scales)
	return g
}

// set records service id's step; scaled: it changed the desired count.
func (g *Gauges) set(id string, st service.Step, scaled bool) {
	if g == nil {
		return
	}
	g.replicas.WithLabelValues(id, "desired").Set(float64(st.Status.Desired))
	g.replicas.WithLabelValues(id, "current").Set(float64(st.Status.Replicas))
	g.replicas.WithLabelValues(id, "ready").Set(float64(st.Status.Ready))
	if ls := st.Status.LastScale; scaled {
		dir := "up"
		if ls.To < ls.From {
			dir = "down"
		}
		g.scales.WithLabelValues(id, dir).Inc()
	}
	if st.Scaled == nil {
		return
	}
	for i, m := range st.Scaled.Metrics {
		name := metricName(m.Metric.Resource, m.Metric.Custom, i)
		g.metric.WithLabelValues(id, name, "current").Set(m.Current)
		if pct, v, err := m.Metric.ParseTarget(""); err == nil {
			if m.Metric.Resource != "" {
				v = float64(pct)
			}
			g.metric.WithLabelValues(id, name, "target").Set(v)
		}
	}
}

// metricName names an autoscale metric in the series: its resource or
// custom name.
func metricName(res, custom string, i int) string {
	switch {
	case res != "":
		return res
	case custom != "":
		return custom
	}
	return strconv.Itoa(i)
}

// forget drops service id's series.
func (g *Gauges) forget(id string) {
	if g == nil {
		return
	}
	g.replicas.DeletePartialMatch(prometheus.Labels{"service": id})
	g.metric.DeletePartialMatch(prometheus.Labels{"service": id})
	g.scales.DeletePartialMatch(prometheus.Labels{"service": id})
}
