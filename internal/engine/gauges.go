package engine

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// gaugeSeries rewrites labelled gauges whose set of series changes (per
// queue, per reason) without a gap: a Reset before setting them again let a
// scrape that ran meanwhile see none of a vector's series. Series set in
// the previous round and not in this one are deleted by sweep. Only the
// engine loop uses it.
type gaugeSeries struct {
	prev, cur map[*prometheus.GaugeVec]map[string][]string
}

// set sets one series and notes it for this round.
func (g *gaugeSeries) set(v *prometheus.GaugeVec, val float64, labels ...string) {
	v.WithLabelValues(labels...).Set(val)
	if g.cur == nil {
		g.cur = map[*prometheus.GaugeVec]map[string][]string{}
	}
	m := g.cur[v]
	if m == nil {
		m = map[string][]string{}
		g.cur[v] = m
	}
	m[strings.Join(labels, "\xff")] = labels
}

// sweep ends a round: series of the previous round not set in this one go.
func (g *gaugeSeries) sweep() {
	for v, keys := range g.prev {
		for k, labels := range keys {
			if _, ok := g.cur[v][k]; !ok {
				v.DeleteLabelValues(labels...)
			}
		}
	}
	g.prev, g.cur = g.cur, nil
}
