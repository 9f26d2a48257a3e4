package server

import (
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/hetsched/hetsched/internal/telemetry"
)

// httpTracing makes a server span per request, a child of the client's
// W3C traceparent when it sends one (its sampling decision followed as
// the sampler says), named by the route ("POST /api/v1/tasks") as
// OpenTelemetry's HTTP conventions ask. Off (nil tracer), it does nothing.
type httpTracing struct {
	tr   trace.Tracer
	prop propagation.TextMapPropagator
}

// SetTracing turns request spans on with t (nil or disabled: off).
func (s *Server) SetTracing(t *telemetry.Tracing) {
	if t == nil || !t.Enabled {
		s.tracing = httpTracing{}
		return
	}
	s.tracing = httpTracing{tr: t.Tracer("server"), prop: t.Propagator}
}

// housekeeping reports whether r is the fleet's own chatter (an agent's
// heartbeats, status reports and assignment stream; health checks and
// scrapes), which starts no trace of its own: only a caller's sampled
// traceparent makes it a span (issue 45 §5: heartbeats were most root
// spans).
func housekeeping(r *http.Request) bool {
	p := r.URL.Path
	switch {
	case p == "/healthz" || p == "/readyz" || p == "/metrics":
		return true
	case strings.HasPrefix(p, "/api/v1/agents/"):
		return strings.HasSuffix(p, "/heartbeat") || strings.HasSuffix(p, "/status") || strings.HasSuffix(p, "/assignments")
	}
	return false
}

// start begins r's span; end (with the answered writer) ends it.
func (h *httpTracing) start(r *http.Request) (*http.Request, trace.Span) {
	if h.tr == nil {
		return r, nil
	}
	ctx := h.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	if housekeeping(r) && !trace.SpanContextFromContext(ctx).IsSampled() {
		return r, nil
	}
	ctx, span := h.tr.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	return r.WithContext(ctx), span
}

// end names the span by the route the mux matched and records the status.
func (h *httpTracing) end(span trace.Span, r *http.Request, code int) {
	if span == nil {
		return
	}
	if r.Pattern != "" && r.Pattern != "/" {
		span.SetName(r.Pattern)
		span.SetAttributes(attribute.String("http.route", r.Pattern))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(code))
	}
	span.End()
}
