package engine

import (
	"context"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/telemetry"
)

// A task's trace. A task submitted within a sampled span (an HTTP request
// with a sampled W3C traceparent, say) keeps that span's context in its
// record (TaskRecord.Trace), so that its life continues the trace across
// steps and restarts:
//
//	hetsched.submit              the submission: admission and its commit (Submit's caller)
//	hetsched.task.place          from entering the queue to the placement (node, devices, policy,
//	                             alternative, attempt), the reasons it waited for as events;
//	                             the task's command continues the trace from it (TRACEPARENT)
//	hetsched.task.run            from the placement (or the agent's start) to the attempt's end
//	hetsched.store.commit        a durable commit that held traced tasks' changes: under the
//	                             first one's span, linked to the others' (at most 128)
//
// Spans are made on the loop from the records it stages, with the times
// the records carry; with tracing off (no tracer) none of this runs. The
// reasons a task waited for are kept in memory until its placement: a
// restart forgets those of the tasks waiting then (their traces go on).

// maxTracedReasons bounds the reasons kept per traced waiting task, and
// maxTracedWaiting the traced waiting tasks whose reasons are kept.
const (
	maxTracedReasons = 16
	maxTracedWaiting = 100_000
)

// taskTracing is the loop's tracing state.
type taskTracing struct {
	tr      trace.Tracer // nil: off
	policy  string
	reasons map[string][]reasonEvent // traced waiting tasks' reasons, until placed
	links   []trace.Link             // this step's traced changes (the commit span's links)
}

type reasonEvent struct {
	at     time.Time
	reason string
}

// on reports whether tasks are traced.
func (tt *taskTracing) on() bool { return tt.tr != nil }

// staged notes a traced record's change (stage): prev is its state
// before, ended the attempt that ended in it (re-queued or placed again),
// if any.
func (tt *taskTracing) staged(r *TaskRecord, prev, prevReason string, ended *Attempt, now time.Time) {
	if tt.tr == nil || r.Trace == "" {
		return
	}
	parent := telemetry.ContextWith(context.Background(), r.Trace)
	if ended != nil {
		tt.run(parent, r, ended.Attempt, ended.Node, firstTime(ended.Started, ended.Scheduled), ended.Finished, ended.ExitCode, ended.Reason)
	}
	defer tt.link(r)
	switch {
	case r.State == "pending" && r.Reason != "" && (prev != "pending" || prevReason != r.Reason):
		if l := tt.reasons[r.Spec.ID]; len(l) < maxTracedReasons && (l != nil || len(tt.reasons) < maxTracedWaiting) {
			tt.reasons[r.Spec.ID] = append(l, reasonEvent{now, r.Reason})
		}
	case (r.State == "scheduled" || r.State == "running") && prev != "scheduled" && prev != "running":
		tt.place(parent, r, now)
	case terminalState(r.State) && prev != r.State:
		delete(tt.reasons, r.Spec.ID)
		if prev == "scheduled" || prev == "running" {
			tt.run(parent, r, r.Attempt, r.Node, firstTime(r.Started, r.Scheduled), now, r.ExitCode, r.Reason)
		}
	}
}

// place records the placement span and makes it the task's trace from
// now on: its command and its later attempts continue from it.
func (tt *taskTracing) place(parent context.Context, r *TaskRecord, now time.Time) {
	since := r.Submitted
	if n := len(r.Attempts); n > 0 {
		since = r.Attempts[n-1].Finished
	}
	attrs := []attribute.KeyValue{
		attribute.String("hetsched.task", r.Spec.ID), attribute.String("hetsched.queue", queueName(r)),
		attribute.String("hetsched.tier", api.TierNames[r.Spec.PriorityOrDefault()]),
		attribute.Int("hetsched.attempt", r.Attempt), attribute.String("hetsched.node", r.Node),
		attribute.String("hetsched.policy", tt.policy), attribute.Int("hetsched.alternative", r.Chosen),
	}
	if len(r.Devices) > 0 {
		ids := make([]string, len(r.Devices))
		for i, d := range r.Devices {
			ids[i] = d.Type + "/" + d.ID
		}
		attrs = append(attrs, attribute.StringSlice("hetsched.devices", ids))
	}
	ctx, span := tt.tr.Start(parent, "hetsched.task.place", trace.WithTimestamp(since), trace.WithAttributes(attrs...))
	for _, ev := range tt.reasons[r.Spec.ID] {
		span.AddEvent("waiting", trace.WithTimestamp(ev.at), trace.WithAttributes(attribute.String("hetsched.reason", ev.reason)))
	}
	delete(tt.reasons, r.Spec.ID)
	span.End(trace.WithTimestamp(now))
	if tp := telemetry.Traceparent(ctx); tp != "" {
		r.Trace = tp
	}
}

// maxCommitLinks bounds the links of one commit span.
const maxCommitLinks = 128

// link notes r's trace for this step's commit span.
func (tt *taskTracing) link(r *TaskRecord) {
	if len(tt.links) < maxCommitLinks {
		sc := trace.SpanContextFromContext(telemetry.ContextWith(context.Background(), r.Trace))
		tt.links = append(tt.links, trace.Link{SpanContext: sc})
	}
}

// run records one attempt's run span.
func (tt *taskTracing) run(parent context.Context, r *TaskRecord, attempt int, node string, from *time.Time, to time.Time, exit *int, reason string) {
	start := to
	if from != nil {
		start = *from
	}
	_, span := tt.tr.Start(parent, "hetsched.task.run", trace.WithTimestamp(start), trace.WithAttributes(
		attribute.String("hetsched.task", r.Spec.ID), attribute.Int("hetsched.attempt", attempt), attribute.String("hetsched.node", node)))
	if exit != nil {
		span.SetAttributes(attribute.Int("hetsched.exit_code", *exit))
	}
	if reason != "" {
		span.SetAttributes(attribute.String("hetsched.reason", reason))
	}
	if exit != nil && *exit != 0 || r.State == "failed" || r.State == "timeout" {
		span.SetStatus(codes.Error, "exit "+exitText(exit)+" "+reason)
	}
	span.End(trace.WithTimestamp(to))
}

// commit wraps one durable commit in a span linked to the traced changes
// it holds (none: no span).
func (tt *taskTracing) commit(records int, do func() error) error {
	if tt.tr == nil || len(tt.links) == 0 {
		return do()
	}
	// A child of the first traced change's span (sampled as it is),
	// linked to the others'.
	parent := trace.ContextWithRemoteSpanContext(context.Background(), tt.links[0].SpanContext)
	_, span := tt.tr.Start(parent, "hetsched.store.commit", trace.WithLinks(tt.links[1:]...),
		trace.WithAttributes(attribute.Int("hetsched.records", records), attribute.Int("hetsched.traced_changes", len(tt.links))))
	tt.links = tt.links[:0]
	err := do()
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return err
}

func firstTime(ts ...*time.Time) *time.Time {
	for _, t := range ts {
		if t != nil {
			return t
		}
	}
	return nil
}

func exitText(exit *int) string {
	if exit == nil {
		return "-"
	}
	return strconv.Itoa(*exit)
}

// sampledTraceparent is the traceparent of ctx's span when it is sampled
// ("" otherwise: an unsampled task is not traced).
func sampledTraceparent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsSampled() {
		return ""
	}
	return telemetry.Traceparent(ctx)
}

// terminalState reports whether a record's state is final.
func terminalState(s string) bool {
	st, ok := core.ParseState(s)
	return ok && st.Terminal()
}
