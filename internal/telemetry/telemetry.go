// Package telemetry sets up hetsched's traces and logs.
//
// Glossary:
//   - Tracing: the tracer provider and the W3C trace-context propagator a
//     process passes to its parts (no global provider is set). Tracing is
//     on when the standard OTEL_EXPORTER_OTLP_ENDPOINT (or
//     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set: spans go out by OTLP over
//     HTTP, sampled as OTEL_TRACES_SAMPLER says (default: parent-based,
//     always on). Off, the provider is OpenTelemetry's no-op one.
//   - Traceparent: a span's W3C trace context as one header value
//     ("00-<trace id>-<span id>-<flags>"), the form in which a task keeps
//     the trace of its submission and hands it to its command
//     (TRACEPARENT).
//   - Logger: a slog logger in text or JSON, at a level, whose lines carry
//     trace_id and span_id when logged with a context that holds a span.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Config says how to set tracing up.
type Config struct {
	// ServiceName is service.name unless OTEL_SERVICE_NAME sets it.
	ServiceName string
	// Exporter, when set, turns tracing on with it instead of OTLP (tests).
	Exporter sdktrace.SpanExporter
	// Getenv reads the environment (default os.Getenv).
	Getenv func(string) string
}

// Tracing is a process's tracer provider and propagator.
type Tracing struct {
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
	// Enabled reports whether spans are recorded and exported.
	Enabled  bool
	shutdown func(context.Context) error
}

// Off is tracing turned off: the no-op provider.
func Off() *Tracing {
	return &Tracing{Provider: noop.NewTracerProvider(), Propagator: propagation.TraceContext{}, shutdown: func(context.Context) error { return nil }}
}

// Setup returns the process's tracing: OTLP over HTTP when the standard
// endpoint variables are set (OTEL_TRACES_EXPORTER=none or
// OTEL_SDK_DISABLED=true turn it off), cfg.Exporter when set, else Off.
func Setup(ctx context.Context, cfg Config) (*Tracing, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	exp := cfg.Exporter
	if exp == nil {
		if !otlpWanted(getenv) {
			return Off(), nil
		}
		var err error
		if exp, err = otlptracehttp.New(ctx); err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: %w", err)
		}
	}
	name := cfg.ServiceName
	if name == "" {
		name = "hetsched"
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", name)), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Tracing{Provider: tp, Propagator: propagation.TraceContext{}, Enabled: true, shutdown: tp.Shutdown}, nil
}

// otlpWanted reports whether the environment asks for OTLP export.
func otlpWanted(getenv func(string) string) bool {
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	if e := getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Shutdown flushes the spans not yet exported (bounded by ctx).
func (t *Tracing) Shutdown(ctx context.Context) error { return t.shutdown(ctx) }

// Tracer is the provider's tracer of hetsched's part name.
func (t *Tracing) Tracer(name string) trace.Tracer {
	return t.Provider.Tracer("github.com/hetsched/hetsched/" + name)
}

// Traceparent is the W3C trace context of ctx's span ("" when ctx holds
// no valid span context).
func Traceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// ContextWith returns ctx holding the remote span context of traceparent
// (ctx itself when traceparent is empty or malformed).
func ContextWith(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// NewLogger is a logger writing to w in format ("text" or "json") from
// level ("debug", "info", "warn", "error"); errors name the flag.
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %q is not debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "text", "":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("--log-format: %q is not text or json", format)
	}
	return slog.New(traceHandler{h}), nil
}

// traceHandler adds the trace and span ids of the record's context.
type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
