package engine

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// Adopt counts work placed elsewhere where it runs: on the devices named,
// or on free ones when none are; a second adoption of an id conflicts,
// and one that does not fit waits pinned to its node (its reason says
// why), durable across a restart.
func TestAdoptCountsWorkWhereItRuns(t *testing.T) {
	dir := t.TempDir()
	e, st := open(t, dir)
	ctx := context.Background()
	if _, err := e.UpsertNodes(ctx, []api.Node{gpuNode("g1")}); err != nil {
		t.Fatal(err)
	}
	gpus := func(n int64) resource.List { return resource.List{resource.CPU: 1000, "nvidia.com/gpu": n * 1000} }
	pin := map[string]string{api.NodeNameLabel: "g1"}
	work := []Adoption{
		{Task: api.Task{ID: "named", Resources: gpus(1), NodeSelector: pin}, Node: "g1", Devices: []api.DeviceRef{{Type: "nvidia.com/gpu", ID: "1", Share: 1000}}},
		{Task: api.Task{ID: "any", Resources: gpus(1), NodeSelector: pin}, Node: "g1"},
		{Task: api.Task{ID: "named", Resources: gpus(1)}, Node: "g1"},
		{Task: api.Task{ID: "nonode", Resources: gpus(1)}},
	}
	errs, err := e.Adopt(ctx, "", work)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0] != nil || errs[1] != nil || errs[2] == nil || errs[3] == nil {
		t.Fatalf("errors %v: want the first two adopted, the repeated id and the nodeless one refused", errs)
	}
	named, _ := e.Task("named")
	anyr, _ := e.Task("any")
	if named.State != "running" || named.Node != "g1" || len(named.Devices) != 1 || named.Devices[0].ID != "1" {
		t.Errorf("named: %s on %s with %v", named.State, named.Node, named.Devices)
	}
	if anyr.State != "running" || len(anyr.Devices) != 1 || anyr.Devices[0].ID == "1" {
		t.Errorf("any: %s with %v, want a running task on a device other than 1", anyr.State, anyr.Devices)
	}
	// gpuNode has as many GPUs as it has: fill them, then one more waits.
	var fill []Adoption
	for _, d := range gpuNode("g1").Devices {
		if d.ID == "1" || d.ID == anyr.Devices[0].ID {
			continue
		}
		fill = append(fill, Adoption{Task: api.Task{ID: "fill" + d.ID, Resources: gpus(1), NodeSelector: pin}, Node: "g1",
			Devices: []api.DeviceRef{{Type: d.Type, ID: d.ID, Share: 1000}}})
	}
	fill = append(fill, Adoption{Task: api.Task{ID: "over", Resources: gpus(1), NodeSelector: pin}, Node: "g1"})
	if errs, err := e.Adopt(ctx, "", fill); err != nil || errs[len(errs)-1] != nil {
		t.Fatalf("fill: %v %v", err, errs)
	}
	over, _ := e.Task("over")
	if over.State != "pending" || over.Reason == "" {
		t.Errorf("over: %s (%q), want pending with a reason", over.State, over.Reason)
	}
	e.Close()
	st.Close()
	e2, st2 := open(t, dir)
	defer st2.Close()
	defer e2.Close()
	for _, id := range []string{"named", "any", "over"} {
		a, _ := e.Task(id)
		b, ok := e2.Task(id)
		if !ok || cmp.Diff(a.Devices, b.Devices) != "" || a.State != b.State {
			t.Errorf("%s after a restart: %+v, was %+v", id, b, a)
		}
	}
}
