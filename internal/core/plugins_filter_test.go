package core

import (
	"testing"
	"time"

	"github.com/hetsched/hetsched/internal/api"
	"github.com/hetsched/hetsched/internal/resource"
)

// TestCoreFiltersFirst: the core's own dynamic filters run in the order
// their reasons are reported, and no policy lists them again among its
// own.
func TestCoreFiltersFirst(t *testing.T) {
	want := []string{"NodeIdentity", "QueueQuota", "NodeResourcesFit", "DeviceFit"}
	for _, name := range Policies() {
		cfg := DefaultConfig()
		cfg.Policy = name
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		core := c.cf.list()
		if len(core) != len(want) {
			t.Fatalf("%s: %d core filters", name, len(core))
		}
		for i, w := range want {
			if core[i].Name() != w {
				t.Errorf("%s: core filter %d is %s, want %s", name, i, core[i].Name(), w)
			}
		}
		for _, f := range c.Policy().Filters {
			for _, w := range want {
				if f.Name() == w {
					t.Errorf("%s lists the core filter %s among its own", name, w)
				}
			}
		}
	}
}

// TestFilterStatusCodes: a node that may fit once capacity is freed says
// Unschedulable; one that never can (too small, another node's identity,
// the queue's max) says UnschedulableAndUnresolvable.
func TestFilterStatusCodes(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	node := func(name string, gpus int) {
		spec := &api.Node{Name: name, Capacity: resource.List{resource.CPU: 4000, resource.Memory: 8 << 30}}
		for i := 0; i < gpus; i++ {
			spec.Devices = append(spec.Devices, api.Device{Type: "nvidia.com/gpu", ID: string(rune('0' + i))})
		}
		if err := c.UpsertNode(now, spec); err != nil {
			t.Fatal(err)
		}
	}
	node("a", 2)
	node("b", 2)
	if err := c.SetQueue(now, &api.Queue{Name: "q", Max: resource.List{resource.CPU: 1000}}); err != nil {
		t.Fatal(err)
	}
	p := 1
	submit := func(id string, req resource.List, sel map[string]string, queue string) *Task {
		if err := c.Submit(now, &api.Task{ID: id, Priority: &p, Resources: req, NodeSelector: sel, Queue: queue}); err != nil {
			t.Fatal(err)
		}
		tk, _ := c.Task(id)
		return tk
	}
	// Fill node a's CPU and GPUs.
	submit("fill", resource.List{resource.CPU: 4000, "nvidia.com/gpu": 2000}, map[string]string{NodeNameLabel: "a"}, "")
	a, _ := c.Node("a")
	cases := []struct {
		name string
		task *Task
		code Code
	}{
		{"insufficient cpu", submit("cpu", resource.List{resource.CPU: 2000}, map[string]string{NodeNameLabel: "a|b"}, ""), Unschedulable},
		{"too small", submit("big", resource.List{resource.CPU: 8000}, nil, ""), UnschedulableAndUnresolvable},
		{"another node's identity", submit("pinned", resource.List{resource.CPU: 100}, map[string]string{NodeNameLabel: "b"}, ""), UnschedulableAndUnresolvable},
		{"queue max", submit("quota", resource.List{resource.CPU: 2000}, nil, "q"), UnschedulableAndUnresolvable},
	}
	for _, tc := range cases {
		sc := c.beginSearch(false, nil)
		st := c.checkNode(sc, tc.task, &tc.task.cls.opts[0], a)
		if st == nil || st.Code != tc.code {
			t.Errorf("%s: status %+v, want code %d", tc.name, st, tc.code)
		}
	}
	if st := c.checkNode(c.beginSearch(false, nil), cases[0].task, &cases[0].task.cls.opts[0], a); st.IsUnresolvable() {
		t.Errorf("insufficient cpu is resolvable, got %+v", st)
	}
}
