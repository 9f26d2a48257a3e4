package nodepool

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/resource"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func gpuPool(cost float64) api.NodePool {
	devs := make([]api.Device, 8)
	for i := range devs {
		devs[i] = api.Device{Type: "nvidia.com/gpu", ID: string(rune('0' + i)), Model: "H100-80GB"}
	}
	return api.NodePool{Name: "gpu", Min: 0, Max: 4, CostPerHour: cost,
		Template: api.Node{Capacity: resource.List{resource.CPU: 64000, resource.Memory: 512 << 30}, Devices: devs},
		Provider: api.PoolProvider{Exec: &api.ExecPoolProvider{Command: []string{"true"}}}}
}

func cpuPool() api.NodePool {
	return api.NodePool{Name: "cpu", Min: 1, Max: 10, CostPerHour: 1,
		Template: api.Node{Capacity: resource.List{resource.CPU: 16000, resource.Memory: 64 << 30}},
		Provider: api.PoolProvider{Exec: &api.ExecPoolProvider{Command: []string{"true"}}}}
}

func task(id string, res resource.List) api.Task {
	return api.Task{ID: id, Resources: res, Command: []string{"x"}}
}

// TestScaleOutOnlyWhereItHelps: tasks that waited past scaleOutAfter grow
// the pool whose nodes take them, by the nodes the what-if used (three
// 4-GPU tasks: two 8-GPU nodes); a task no pool's node could hold, or one
// that has not waited long enough, grows nothing; a pool under its min is
// topped up; the cheaper pool that helps wins.
func TestScaleOutOnlyWhereItHelps(t *testing.T) {
	pl := New(core.DefaultConfig())
	gpu4 := resource.List{resource.CPU: 8000, "nvidia.com/gpu": 4000}
	waiting := []Waiting{
		{task("a", gpu4), t0.Add(-time.Minute)},
		{task("b", gpu4), t0.Add(-time.Minute)},
		{task("c", gpu4), t0.Add(-time.Minute)},
		{task("tpu", resource.List{"google.com/tpu": 4000}), t0.Add(-time.Hour)},
		{task("fresh", resource.List{resource.CPU: 1000}), t0.Add(-5 * time.Second)},
	}
	d := pl.Plan(t0, []Pool{{Spec: gpuPool(10)}, {Spec: cpuPool()}}, waiting)
	if d.Add["gpu"] != 2 {
		t.Errorf("gpu pool: add %d, want 2 (three 4-GPU tasks); %v", d.Add["gpu"], d.Reasons)
	}
	if d.Add["cpu"] != 1 || !strings.Contains(strings.Join(d.Reasons, "\n"), "min 1") {
		t.Errorf("cpu pool: add %d, want 1 (its min; the fresh task has not waited 30 s); %v", d.Add["cpu"], d.Reasons)
	}

	// Two pools both take a CPU task: the cheaper per task grows.
	cheap, dear := cpuPool(), cpuPool()
	cheap.Name, cheap.Min, cheap.CostPerHour = "cheap", 0, 0.5
	dear.Name, dear.Min, dear.CostPerHour = "dear", 0, 2
	d = pl.Plan(t0, []Pool{{Spec: dear}, {Spec: cheap}}, []Waiting{{task("x", resource.List{resource.CPU: 4000}), t0.Add(-time.Minute)}})
	if d.Add["cheap"] != 1 || d.Add["dear"] != 0 {
		t.Errorf("cheapest pool: %v, want cheap +1", d.Add)
	}

	// Full pools (size plus launching at max) grow no more.
	full := gpuPool(10)
	full.Max = 2
	d = pl.Plan(t0, []Pool{{Spec: full, Launching: 2}}, waiting[:3])
	if d.Add["gpu"] != 0 {
		t.Errorf("a pool at its max: add %d", d.Add["gpu"])
	}
}

// TestScaleInDrainsFirst: a node idle past scaleInAfter is drained, one
// drained and empty is removed, a busy or recently busy one stays, and
// the pool never goes below min; a pool that grows does not shrink.
func TestScaleInDrainsFirst(t *testing.T) {
	pl := New(core.DefaultConfig())
	spec := cpuPool()
	spec.Min = 1
	nodes := []Node{
		{Name: "cpu-1", State: api.NodeReady, Idle: t0.Add(-time.Hour)},
		{Name: "cpu-2", State: api.NodeReady, Idle: t0.Add(-time.Hour)},
		{Name: "cpu-3", State: api.NodeReady, Tasks: 2},
		{Name: "cpu-4", State: api.NodeReady, Idle: t0.Add(-time.Minute)},
		{Name: "cpu-5", State: api.NodeDraining},
	}
	d := pl.Plan(t0, []Pool{{Spec: spec, Nodes: nodes}}, nil)
	if !slices.Equal(d.Remove, []string{"cpu-5"}) {
		t.Errorf("remove %v, want the drained empty cpu-5", d.Remove)
	}
	if !slices.Equal(d.Drain, []string{"cpu-1", "cpu-2"}) {
		t.Errorf("drain %v, want the two idle for an hour", d.Drain)
	}
	spec.Min = 3
	d = pl.Plan(t0, []Pool{{Spec: spec, Nodes: nodes}}, nil)
	if len(d.Drain) != 1 {
		t.Errorf("min 3 of 4 live nodes: drain %v, want one", d.Drain)
	}
	d = pl.Plan(t0, []Pool{{Spec: spec, Nodes: nodes}}, []Waiting{{task("w", resource.List{resource.CPU: 16000}), t0.Add(-time.Minute)}})
	if d.Add["cpu"] != 1 || len(d.Drain) != 0 {
		t.Errorf("a pool that grows: add %v, drain %v; want +1 and no drain", d.Add, d.Drain)
	}
}

// TestPoolValidate: the fields are checked with their names.
func TestPoolValidate(t *testing.T) {
	for _, c := range []struct {
		set   func(*api.NodePool)
		field string
	}{
		{func(p *api.NodePool) { p.Max = 0 }, "max"},
		{func(p *api.NodePool) { p.Min = 5; p.Max = 2 }, "max"},
		{func(p *api.NodePool) { p.Provider = api.PoolProvider{} }, "provider"},
		{func(p *api.NodePool) { p.Provider.Webhook = &api.WebhookPoolProvider{URL: "https://x"} }, "provider"},
		{func(p *api.NodePool) {
			p.Provider = api.PoolProvider{Webhook: &api.WebhookPoolProvider{URL: "http://example.com/x"}}
		}, "provider.webhook.url"},
		{func(p *api.NodePool) { p.Template.Labels = map[string]string{api.PoolLabel: "other"} }, "template.labels." + api.PoolLabel},
		{func(p *api.NodePool) { p.CostPerHour = -1 }, "costPerHour"},
	} {
		p := cpuPool()
		c.set(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("want an error on %s, got %v", c.field, err)
		}
	}
	p := cpuPool()
	if err := p.Validate(); err != nil {
		t.Errorf("valid pool: %v", err)
	}
}
