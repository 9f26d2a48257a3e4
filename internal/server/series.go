package server

import (
	"context"
	"net/http"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/series"
)

// The server's recent history (package series): a sample every
// seriesEvery, an hour of them, for the web UI's charts.
const (
	DefaultSeriesEvery = 15 * time.Second
	seriesWindow       = time.Hour
)

// StartSeries samples the cluster every period (0: DefaultSeriesEvery)
// into an hour's ring until Close.
func (s *Server) StartSeries(period time.Duration) {
	if period <= 0 {
		period = DefaultSeriesEvery
	}
	s.series, s.seriesEvery = series.New(min(int(seriesWindow/period), 3600)), period
	ctx, cancel := context.WithCancel(context.Background())
	s.stopSeries, s.seriesDone = cancel, make(chan struct{})
	go func() {
		defer close(s.seriesDone)
		s.series.Run(ctx, period, s.sample, func(err error) { s.log.Debug("series: a sample failed", "err", err) })
	}()
}

// sample is the cluster now: allocation and utilization per resource, the
// waiting tasks per tier and per queue.
func (s *Server) sample(ctx context.Context, now time.Time) (series.Point, error) {
	sum, err := s.eng.Summarize(ctx)
	if err != nil {
		return series.Point{}, err
	}
	qs, err := s.eng.QueueViews(ctx, "")
	if err != nil {
		return series.Point{}, err
	}
	p := series.Point{At: now, Allocated: map[string]float64{}, Utilization: map[string]float64{},
		PendingByTier: sum.Pending, PendingByQueue: make(map[string]int, len(qs))}
	for name, r := range sum.Resources {
		p.Allocated[name] = r.AllocatedFraction
		if r.Utilization != nil {
			p.Utilization[name] = *r.Utilization
		}
	}
	for _, q := range qs {
		n := 0
		for _, c := range q.Pending {
			n += c
		}
		p.PendingByQueue[q.Name] = n
	}
	return p, nil
}

// getSeries is GET /api/v1/series?since=: the samples of the last hour
// (or since a time within it), oldest first; a tenant's carry only its
// own queues.
func (s *Server) getSeries(w http.ResponseWriter, r *http.Request) {
	if s.series == nil {
		writeError(w, errs.New(errs.Unavailable, "", "this server keeps no series"))
		return
	}
	now := time.Now()
	since := now.Add(-seriesWindow)
	if v := r.URL.Query().Get("since"); v != "" {
		t, err := api.ParseTime(v, now)
		if err != nil {
			writeError(w, errs.Invalid("since", "%v", err))
			return
		}
		since = t
	}
	p := principalOf(w, r)
	var keep func(string) bool
	if p.Role != RoleAdmin {
		mine := map[string]bool{}
		for _, q := range s.eng.Queues(p.Tenant) {
			mine[q.Name] = true
		}
		keep = func(q string) bool { return mine[q] }
	}
	points := s.series.Points(since, keep)
	if points == nil {
		points = []series.Point{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"every": s.seriesEvery.String(), "points": points})
}
