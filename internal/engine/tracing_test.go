package engine

import (
	"context"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// TestTaskTrace: tasks submitted within a sampled span continue its trace
// — the submission, the placement (with the reason it waited for as an
// event, and node and devices), the run, the commits — and the task's
// trace, kept in its record, survives a restart; a task whose submission
// was not sampled is not traced.
func TestTaskTrace(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	exp := tracetest.NewInMemoryExporter()
	// The engine samples only what its parent sampled
	// (OTEL_TRACES_SAMPLER=parentbased_always_off); the client samples all.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample())))
	defer tp.Shutdown(ctx)
	clientTP := sdktrace.NewTracerProvider()
	defer clientTP.Shutdown(ctx)
	openTraced := func() (*Engine, store.Store) {
		st, err := store.OpenDisk(dir, store.DiskOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Config{Core: core.DefaultConfig(), Tracer: tp.Tracer("test")}, st)
		if err != nil {
			st.Close()
			t.Fatal(err)
		}
		return e, st
	}
	e, st := openTraced()
	if err := e.UpsertNode(ctx, gpuNode("g1")); err != nil {
		t.Fatal(err)
	}
	gpus := func(id string) api.Task {
		return api.Task{ID: id, Priority: prio(0), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 2000}}
	}
	client, root := clientTP.Tracer("client").Start(ctx, "client")
	if _, _, err := e.Submit(client, "default", []api.Task{gpus("a"), gpus("b")}); err != nil {
		t.Fatal(err)
	}
	root.End()
	if _, _, err := e.Submit(ctx, "default", []api.Task{{ID: "untraced", Priority: prio(3)}}); err != nil {
		t.Fatal(err)
	}
	traceID := root.SpanContext().TraceID()
	ra, _ := e.Task("a")
	if ra.Trace == "" {
		t.Fatal("a has no trace")
	}
	if r, _ := e.Task("untraced"); r.Trace != "" {
		t.Errorf("an untraced submission's task has trace %q", r.Trace)
	}
	if err := e.Finished(ctx, "a", core.Result{ExitCode: 3}); err != nil {
		t.Fatal(err)
	}
	deadline, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rb, err := e.WaitPlaced(deadline, "b")
	if err != nil || rb.State != "scheduled" {
		t.Fatalf("b: %+v %v", rb, err)
	}
	// A restart keeps b's trace (its placement's): its run ends under it.
	e.Close()
	st.Close()
	e, st = openTraced()
	defer func() { e.Close(); st.Close() }()
	if r, _ := e.Task("b"); r.Trace != rb.Trace {
		t.Fatalf("b's trace after the restart %q, was %q", r.Trace, rb.Trace)
	}
	if err := e.Finished(ctx, "b", core.Result{}); err != nil {
		t.Fatal(err)
	}

	byName := map[string][]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() != traceID {
			t.Errorf("span %s is in trace %s, not the submission's", s.Name, s.SpanContext.TraceID())
		}
		byName[s.Name] = append(byName[s.Name], s)
	}
	if n := len(byName["hetsched.submit"]); n != 1 {
		t.Errorf("%d submit spans, want 1", n)
	}
	places := byName["hetsched.task.place"]
	if len(places) != 2 {
		t.Fatalf("place spans %d, want a's and b's: %v", len(places), byName)
	}
	var bPlace tracetest.SpanStub
	for _, s := range places {
		if attr(s, "hetsched.task") == "b" {
			bPlace = s
		}
	}
	if attr(bPlace, "hetsched.node") != "g1" || attr(bPlace, "hetsched.tier") != "urgent" {
		t.Errorf("b's place span attributes: %v", bPlace.Attributes)
	}
	if len(bPlace.Events) == 0 || bPlace.Events[0].Name != "waiting" {
		t.Errorf("b's place span events %v, want the reason it waited for", bPlace.Events)
	}
	runs := map[string]tracetest.SpanStub{}
	for _, s := range byName["hetsched.task.run"] {
		runs[attr(s, "hetsched.task")] = s
	}
	if len(runs) != 2 || attr(runs["a"], "hetsched.exit_code") != "3" || attr(runs["b"], "hetsched.exit_code") != "0" {
		t.Errorf("run spans: %v", byName["hetsched.task.run"])
	}
	if runs["b"].Parent.SpanID() != bPlace.SpanContext.SpanID() {
		t.Error("b's run span, after the restart, is not under its placement")
	}
	if len(byName["hetsched.store.commit"]) == 0 {
		t.Error("no commit spans")
	}
	linked := false
	for _, s := range byName["hetsched.store.commit"] {
		linked = linked || len(s.Links) > 0
	}
	if !linked {
		t.Error("no commit span links a second traced change (a and b were submitted in one)")
	}
}

// attr is a span's attribute value as text ("" when absent).
func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
