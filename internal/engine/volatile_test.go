package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
	"github.com/hetsched/hetsched/internal/store"
)

// An engine on a store that keeps nothing (the Kubernetes front end's)
// schedules and publishes as on a durable one: the task is placed, its
// record and its events are there, and the store was told nothing but the
// events' mark; a new engine on it starts empty.
func TestEngineOnAStoreThatKeepsNothing(t *testing.T) {
	st := &recordingDiscard{}
	e, err := New(Config{Core: core.DefaultConfig()}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx := context.Background()
	if _, err := e.UpsertNodes(ctx, []api.Node{gpuNode("g1")}); err != nil {
		t.Fatal(err)
	}
	since := e.LatestEvent()
	if _, errs, err := e.Submit(ctx, "", []api.Task{{ID: "t1", Priority: prio(1), Resources: resource.List{resource.CPU: 1000, "nvidia.com/gpu": 1000}}}); err != nil || errs[0] != nil {
		t.Fatalf("submit: %v %v", err, errs)
	}
	rec, ok := e.Task("t1")
	if !ok || rec.State != "scheduled" || rec.Node != "g1" || len(rec.Devices) != 1 {
		t.Fatalf("t1: %+v", rec)
	}
	// No spec encoding is made for the store; the record's view still
	// has the spec, and specs are still validated.
	if rec.spec != nil {
		t.Errorf("t1's record carries an encoded spec no store keeps: %s", rec.spec)
	}
	view, err := json.Marshal(rec)
	if err != nil || !strings.Contains(string(view), `"spec":{"id":"t1"`) || !strings.Contains(string(view), `"priority":1`) {
		t.Errorf("t1's view %s (%v) lacks its spec", view, err)
	}
	if _, errs, err := e.Submit(ctx, "", []api.Task{{ID: "bad", Priority: prio(9)}}); err != nil || errs[0] == nil {
		t.Errorf("a task of priority 9 was admitted: %v %v", err, errs)
	}
	evs, _, err := e.Events(ctx, since, 100)
	if err != nil || len(evs) == 0 || evs[len(evs)-1].ID != "t1" {
		t.Fatalf("events since the submission: %+v %v", evs, err)
	}
	for _, r := range st.recs {
		if r.Kind != KindMeta {
			t.Errorf("a volatile store was given a %s record %q", r.Kind, r.Key)
		}
	}
	e2, err := New(Config{Core: core.DefaultConfig()}, &store.Discard{})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if _, ok := e2.Task("t1"); ok {
		t.Error("a new engine on a store that keeps nothing found t1")
	}
}

// recordingDiscard is a store.Discard that remembers what it was given.
type recordingDiscard struct {
	store.Discard
	recs []store.Record
}

func (d *recordingDiscard) Commit(ctx context.Context, recs []store.Record) error {
	d.recs = append(d.recs, recs...)
	return d.Discard.Commit(ctx, recs)
}
