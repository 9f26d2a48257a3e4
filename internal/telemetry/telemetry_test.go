package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestSetupFollowsTheEnvironment: tracing is on only when an OTLP endpoint
// is set, and the standard switches turn it off again.
func TestSetupFollowsTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
	} {
		if got := otlpWanted(env(c.env)); got != c.want {
			t.Errorf("%v: tracing %v, want %v", c.env, got, c.want)
		}
	}
	off, err := Setup(context.Background(), Config{Getenv: env(nil)})
	if err != nil || off.Enabled {
		t.Fatalf("no endpoint: %+v %v", off, err)
	}
	if _, span := off.Tracer("x").Start(context.Background(), "s"); span.SpanContext().IsValid() {
		t.Error("tracing off made a real span")
	}
}

// TestLoggerCarriesTraceIDs: a line logged with a context holding a span
// names its trace and span; one without does not; bad flags are named.
func TestLoggerCarriesTraceIDs(t *testing.T) {
	var b bytes.Buffer
	lg, err := NewLogger(&b, "json", "info")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Setup(context.Background(), Config{Exporter: tracetest.NewNoopExporter()})
	if err != nil || !tr.Enabled {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	ctx, span := tr.Tracer("test").Start(context.Background(), "op")
	lg.InfoContext(ctx, "inside", "k", "v")
	span.End()
	lg.With("a", 1).InfoContext(context.Background(), "outside")
	lg.Debug("below the level")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines %q", lines)
	}
	var in, out map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &in); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &out); err != nil {
		t.Fatal(err)
	}
	if in["trace_id"] != span.SpanContext().TraceID().String() || in["span_id"] != span.SpanContext().SpanID().String() || in["k"] != "v" {
		t.Errorf("line within the span: %v", in)
	}
	if _, ok := out["trace_id"]; ok || out["a"] != 1.0 {
		t.Errorf("line outside any span: %v", out)
	}
	if _, err := NewLogger(&b, "xml", "info"); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Errorf("bad format: %v", err)
	}
	if _, err := NewLogger(&b, "text", "loud"); err == nil || !strings.Contains(err.Error(), "--log-level") {
		t.Errorf("bad level: %v", err)
	}
}

// TestTraceparentRoundTrip: a span's traceparent, read back, is the same
// span context.
func TestTraceparentRoundTrip(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	defer span.End()
	p := Traceparent(ctx)
	if !strings.HasPrefix(p, "00-"+span.SpanContext().TraceID().String()+"-"+span.SpanContext().SpanID().String()) {
		t.Fatalf("traceparent %q", p)
	}
	if Traceparent(context.Background()) != "" || ContextWith(context.Background(), "junk") == nil {
		t.Error("no span: a traceparent")
	}
}
