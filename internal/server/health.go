package server

import (
	"github.com/hetsched/hetsched/internal/api"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hetsched/hetsched/internal/errs"
)

func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	sum, err := s.eng.Summarize(r.Context())
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sum)
}

// readyz is 200 while the store is open and the engine runs (it was
// rebuilt before the server started listening), 503 once a commit failed.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.eng.Err(); err != nil {
		writeError(w, errs.New(errs.Unavailable, "", "not ready: the scheduler stopped acknowledging after a store commit failed: %v", err))
		return
	}
	if sp, failed, ok := s.eng.Disk(); ok {
		switch {
		case failed != nil:
			writeError(w, errs.New(errs.Unavailable, "", "not ready: the store failed: %v", failed))
			return
		case sp.Low:
			writeError(w, errs.New(errs.InsufficientStorage, "", "not ready for new work: the store's disk has %d bytes free, below its reserve of %d (reads, cancels, completions and agents go on)", sp.Free, sp.Reserve))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready", "policy": s.policy})
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "policy": s.policy})
}

// MetricsHandler serves reg in the Prometheus text format.
func MetricsHandler(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelError)})
}

// metricsOnly serves GET /metrics from reg and 404 for everything else
// (the --metrics-listen listener).
func metricsOnly(reg *prometheus.Registry, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", MetricsHandler(reg, log))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errs.New(errs.NotFound, "", "this listener serves only GET /metrics"))
	})
	return mux
}

// listServers is GET /api/v1/servers.
func (s *Server) listServers(w http.ResponseWriter, r *http.Request) {
	if s.servers != nil {
		list, err := s.servers(r.Context())
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, list)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	writeJSON(w, http.StatusOK, api.ServerList{Store: "pebble", Leader: r.Host, Servers: []api.ServerInfo{
		{Name: r.Host, URL: scheme + "://" + r.Host, Role: api.RoleLeader, Self: true}}})
}
