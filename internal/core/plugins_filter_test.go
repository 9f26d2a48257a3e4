package core

import (
	"slices"
	"strings"
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
		sc := c.pl.beginSearch(false, nil)
		st := c.pl.checkNode(sc, tc.task, &tc.task.cls.opts[0], a)
		if st == nil || st.Code != tc.code {
			t.Errorf("%s: status %+v, want code %d", tc.name, st, tc.code)
		}
	}
	if st := c.pl.checkNode(c.pl.beginSearch(false, nil), cases[0].task, &cases[0].task.cls.opts[0], a); st.IsUnresolvable() {
		t.Errorf("insufficient cpu is resolvable, got %+v", st)
	}
}

// TestNodeAffinity: a task goes only where one of its affinity terms
// matches (notin, >, <, exists, absent, and a term on an identity label,
// checked per node); one that matches no node waits saying so, and so does
// one whose only terms reach no node with room.
func TestNodeAffinity(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	nodes := []api.Node{
		{Name: "n1", Labels: map[string]string{"zone": "a", "gpu.memory": "40960", "kubernetes.io/hostname": "n1"}},
		{Name: "n2", Labels: map[string]string{"zone": "b", "gpu.memory": "81920", "kubernetes.io/hostname": "n2"}},
		{Name: "n3", Labels: map[string]string{"zone": "b", "gpu.memory": "81920", "spot": "true", "kubernetes.io/hostname": "n3"}},
	}
	for i := range nodes {
		nodes[i].Capacity = resource.List{resource.CPU: 4000, resource.Memory: 8 << 30}
		if err := c.UpsertNode(now, &nodes[i]); err != nil {
			t.Fatal(err)
		}
	}
	one := 1
	cases := []struct {
		id    string
		terms []string
		want  []string // nodes it may land on; none: it waits
	}{
		{"notin", []string{"zone notin (b)"}, []string{"n1"}},
		{"gt", []string{"gpu.memory>50000,!spot"}, []string{"n2"}},
		{"lt", []string{"gpu.memory<50000"}, []string{"n1"}},
		{"exists", []string{"spot"}, []string{"n3"}},
		{"or", []string{"zone=c", "kubernetes.io/hostname in (n2)"}, []string{"n2"}},
		{"none", []string{"zone=c", "gpu.memory>100000"}, nil},
	}
	for _, tc := range cases {
		spec := &api.Task{ID: tc.id, Priority: &one, Resources: resource.List{resource.CPU: 100}, NodeAffinity: tc.terms}
		if err := spec.Validate(); err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		if err := c.Submit(now, spec); err != nil {
			t.Fatalf("%s: %v", tc.id, err)
		}
		st, _ := c.SavedState(tc.id)
		if tc.want == nil {
			task, _ := c.Task(tc.id)
			if st.State != Pending || !strings.Contains(task.Reason(), "node affinity mismatch") {
				t.Errorf("%s: %s (%q), want pending on node affinity", tc.id, st.State, task.Reason())
			}
			continue
		}
		if st.State != Scheduled || !slices.Contains(tc.want, st.Node) {
			t.Errorf("%s: %s on %q, want scheduled on one of %v", tc.id, st.State, st.Node, tc.want)
		}
	}
	// Two tasks alike but for their affinity are different classes.
	a, _ := c.Task("lt")
	b, _ := c.Task("gt")
	if a.cls == b.cls {
		t.Error("tasks of different affinity share a class")
	}
	if err := checkInvariants(c); err != nil {
		t.Error(err)
	}
}

// A request's deviceClasses takes only devices of the class: on the node
// whose devices are mixed, the class's devices; where no device carries
// the class the option never fits (unresolvable, named); when the class's
// devices are taken it waits, while an alternative without the class may
// go; and the class is part of the scheduling class.
func TestDeviceClasses(t *testing.T) {
	c, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_000_000, 0)
	const gpu = "gpu.example.com/device"
	mixed := api.Node{Name: "mixed", Capacity: resource.List{resource.CPU: 8000, resource.Memory: 8 << 30}, Devices: []api.Device{
		{Type: gpu, ID: "gpu-0", Classes: []string{"small"}},
		{Type: gpu, ID: "gpu-1", Classes: []string{"big", "small"}},
		{Type: gpu, ID: "gpu-2", Classes: []string{"small"}},
	}}
	plain := api.Node{Name: "plain", Capacity: resource.List{resource.CPU: 8000, resource.Memory: 8 << 30}, Devices: []api.Device{
		{Type: gpu, ID: "gpu-0"},
	}}
	for _, n := range []*api.Node{&mixed, &plain} {
		if err := c.UpsertNode(now, n); err != nil {
			t.Fatal(err)
		}
	}
	one := 1
	submit := func(id, class string, alts ...api.Alternative) Saved {
		t.Helper()
		spec := &api.Task{ID: id, Priority: &one, Resources: resource.List{resource.CPU: 100, gpu: 1000}, Alternatives: alts}
		if class != "" {
			spec.DeviceClasses = map[string]string{gpu: class}
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if err := c.Submit(now, spec); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		st, _ := c.SavedState(id)
		return st
	}
	devs := func(st Saved) []string {
		var out []string
		for _, d := range st.Devices {
			out = append(out, st.Node+"/"+d.ID)
		}
		return out
	}
	if st := submit("big-1", "big"); st.State != Scheduled || !slices.Equal(devs(st), []string{"mixed/gpu-1"}) {
		t.Fatalf("big-1: %s on %v, want scheduled on mixed/gpu-1", st.State, devs(st))
	}
	st := submit("big-2", "big")
	if task, _ := c.Task("big-2"); st.State != Pending || !strings.Contains(task.Reason(), "device of class big") {
		t.Errorf("big-2: %s (%q), want pending for a free device of class big", st.State, task.Reason())
	}
	if st := submit("huge", "huge"); st.State != Pending {
		t.Errorf("huge: %s, want pending", st.State)
	} else if task, _ := c.Task("huge"); !strings.Contains(task.Reason(), "no "+gpu+" device of class huge") {
		t.Errorf("huge: reason %q, want it to name the missing class", task.Reason())
	}
	for _, id := range []string{"small-1", "small-2"} {
		if st := submit(id, "small"); st.State != Scheduled || st.Node != "mixed" || slices.Contains(devs(st), "mixed/gpu-1") {
			t.Errorf("%s: %s on %v, want scheduled on mixed's small-only devices", id, st.State, devs(st))
		}
	}
	// An alternative without the class goes where any device is free (the plain node's).
	alt := api.Alternative{Resources: resource.List{resource.CPU: 100, gpu: 1000}, Speed: 0.5}
	if st := submit("big-or-any", "big", alt); st.State != Scheduled || st.Chosen != 0 || st.Node != "plain" {
		t.Errorf("big-or-any: %s with option %d, want scheduled on its alternative", st.State, st.Chosen)
	}
	a, _ := c.Task("big-2")
	b, _ := c.Task("huge")
	if a.cls == b.cls {
		t.Error("tasks of different device classes share a class")
	}
	if err := checkInvariants(c); err != nil {
		t.Error(err)
	}
}
