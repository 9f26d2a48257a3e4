package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hetsched/hetsched/internal/engine"
	"github.com/hetsched/hetsched/internal/errs"
)

// events is GET /api/v1/events?since=N: Server-Sent Events of task, job
// and node changes after event N (or Last-Event-ID); since=0 replays from the
// oldest event retained; without either, from now. Tenants get their own
// tasks' and jobs' events and every node event. Event numbers go on across restarts
// (the store keeps the next one); a since older than what is retained is
// a 400 saying to list again.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	since := engine.FromNow
	v := r.URL.Query().Get("since")
	if v == "" {
		v = r.Header.Get("Last-Event-ID")
	}
	if v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == engine.FromNow {
			writeError(w, errs.Invalid("since", "must be an event number, got %q", v))
			return
		}
		since = n
	}
	p := principalOf(w, r)
	owner := streamOwner(p)
	if err := s.streams.take(owner); err != nil {
		if s.metrics != nil {
			s.metrics.Refused.WithLabelValues("event_streams").Inc()
		}
		writeError(w, err)
		return
	}
	defer s.streams.give(owner)
	rc := http.NewResponseController(w)
	stream, stop := s.streamContext(r)
	defer stop()
	first := true
	for {
		wait := 15 * time.Second
		if first {
			wait = 0 // the headers go out at once: the first read only checks since and takes what is there
		}
		ctx, cancel := context.WithTimeout(stream, wait)
		evs, next, err := s.eng.Events(ctx, since, 1000)
		cancel()
		if err != nil {
			if first {
				writeError(w, err)
			}
			return
		}
		if first {
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			w.WriteHeader(http.StatusOK)
			first = false
		}
		if stream.Err() != nil {
			return
		}
		var b strings.Builder
		if wait == 0 {
			// How long a client waits before it reconnects (with
			// Last-Event-ID), as EventSource reads it.
			b.WriteString("retry: " + strconv.Itoa(eventRetryMillis) + "\n\n")
		}
		if len(evs) == 0 && wait > 0 {
			b.WriteString(": keep-alive\n\n")
		}
		for _, ev := range evs {
			if ev.Kind == "task" || ev.Kind == "job" || ev.Kind == "service" {
				if !p.sees(ev.Tenant) {
					continue
				}
				ev.ID, ev.Reason = engine.LocalID(p.scope(), ev.ID), engine.LocalReason(p.scope(), ev.Reason)
			}
			data, _ := json.Marshal(ev)
			fmt.Fprintf(&b, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Kind, data)
		}
		since = next
		// A subscriber that stopped reading is dropped once a write has
		// waited streamWrite (the connection's buffers are full).
		_ = rc.SetWriteDeadline(time.Now().Add(s.streamWrite))
		if _, err := io.WriteString(w, b.String()); err != nil {
			return
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// eventRetryMillis is the reconnection delay an event stream asks for.
const eventRetryMillis = 2000

// streamContext is r's context, ended also when the server closes, so that
// long-lived streams (events, assignments) do not hold up a shutdown.
func (s *Server) streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	stream, stop := context.WithCancel(r.Context())
	go func() {
		select {
		case <-s.closing:
			stop()
		case <-stream.Done():
		}
	}()
	return stream, stop
}
