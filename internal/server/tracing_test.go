package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hetsched/hetsched/internal/telemetry"
)

// TestHousekeepingStartsNoTrace (issue 45 §5): with tracing on, an
// agent's heartbeats and health checks make no root spans; an API call
// does.
func TestHousekeepingStartsNoTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr, err := telemetry.Setup(context.Background(), telemetry.Config{Exporter: exp})
	if err != nil {
		t.Fatal(err)
	}
	s := startWith(t, Options{DataDir: t.TempDir(), Tracing: tr})
	api := s.base + "/api/v1"
	if code, m := call(t, "POST", api+"/agents/register", `{"agent":"a1","nodes":[{"name":"n1","capacity":{"cpu":"4"}}]}`); code != 200 {
		t.Fatalf("register: %d %v", code, m)
	}
	for range 3 {
		if code, m := call(t, "POST", api+"/agents/a1/heartbeat", `{"nodes":[{"node":"n1","cpu":0.5}]}`); code != 200 {
			t.Fatalf("heartbeat: %d %v", code, m)
		}
	}
	if resp, err := http.Get(s.base + "/healthz"); err == nil {
		resp.Body.Close()
	}
	if code, _ := call(t, "POST", api+"/tasks", `{"id":"t1","resources":{"cpu":"1"}}`); code != 201 {
		t.Fatalf("submit: %d", code)
	}
	// Flushed before the server stops: the in-memory exporter forgets its
	// spans when it is shut down.
	if err := tr.Provider.(*sdktrace.TracerProvider).ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.stop(t)
	var names []string
	for _, sp := range exp.GetSpans() {
		names = append(names, sp.Name)
	}
	all := strings.Join(names, "\n")
	if strings.Contains(all, "heartbeat") || strings.Contains(all, "healthz") {
		t.Errorf("housekeeping spans:\n%s", all)
	}
	if !strings.Contains(all, "POST /api/v1/tasks") {
		t.Errorf("no span for the submission:\n%s", all)
	}
}
