package kube

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourcev1 "k8s.io/api/resource/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/api"
)

func draSlice(name, node, driver, pool string, gen, count int64, devs ...resourcev1.Device) *resourcev1.ResourceSlice {
	return &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourcev1.ResourceSliceSpec{
		Driver: driver, NodeName: &node, Pool: resourcev1.ResourcePool{Name: pool, Generation: gen, ResourceSliceCount: count}, Devices: devs,
	}}
}

func strAttr(v string) resourcev1.DeviceAttribute { return resourcev1.DeviceAttribute{StringValue: &v} }

func deviceClass(name string, exprs ...string) *resourcev1.DeviceClass {
	dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, e := range exprs {
		dc.Spec.Selectors = append(dc.Spec.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return dc
}

// Slices become devices: only complete pools at their newest generation,
// ids from device names (pool-qualified when taken), model and memory
// from the attributes and capacity, taints making a device unusable,
// devices the model cannot hold left out; selectors' classes on the
// devices they match, with the counts that say which drivers a selector
// can use.
func TestDRATranslate(t *testing.T) {
	d := newDRAState()
	gpu := resourcev1.Device{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": strAttr("H100 80GB")},
		Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: k8sresource.MustParse("80Gi")}}}
	small := resourcev1.Device{Name: "gpu-1", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": strAttr("L4")}}
	tainted := resourcev1.Device{Name: "gpu-2", Taints: []resourcev1.DeviceTaint{{Key: "broken", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}
	parted := resourcev1.Device{Name: "mig-0", ConsumesCounters: []resourcev1.DeviceCounterConsumption{{CounterSet: "gpu-0"}}}
	var warned []string
	warn := func(msg string, _ ...any) { warned = append(warned, msg) }

	sel, err := d.selector(deviceClass("gpu", `device.driver == "gpu.example.com"`), nil)
	if err != nil {
		t.Fatal(err)
	}
	big, err := d.selector(deviceClass("gpu", `device.driver == "gpu.example.com"`),
		[]resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0`}}})
	if err != nil {
		t.Fatal(err)
	}
	if sel.name != "gpu" || !strings.HasPrefix(big.name, "gpu.") || api.ValidateDeviceClass(big.name) != nil {
		t.Errorf("selector names %q and %q, want the class's name and the class's name with a hash", sel.name, big.name)
	}
	devs := d.translate("n1", []*resourcev1.ResourceSlice{
		draSlice("a", "n1", "gpu.example.com", "n1", 2, 1, gpu, small, tainted, parted),
		draSlice("old", "n1", "gpu.example.com", "n1", 1, 1, resourcev1.Device{Name: "stale"}),
		draSlice("b", "n1", "gpu.example.com", "other", 1, 1, resourcev1.Device{Name: "gpu-0"}),
		draSlice("c", "n1", "nic.example.com", "half", 1, 2, resourcev1.Device{Name: "nic-0"}),
	}, api.MaxNodeDevices, warn)
	want := []api.Device{
		{Type: "gpu.example.com/dra", ID: "gpu-0", Model: "H100-80GB", Memory: 80 << 30, Classes: []string{"gpu", big.name}},
		{Type: "gpu.example.com/dra", ID: "gpu-1", Model: "L4", Classes: []string{"gpu"}},
		{Type: "gpu.example.com/dra", ID: "gpu-2", Unhealthy: true, Classes: []string{"gpu"}},
		{Type: "gpu.example.com/dra", ID: "other.gpu-0", Classes: []string{"gpu"}},
	}
	if diff := cmp.Diff(want, devs); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	n := api.Node{Name: "n1", Devices: devs}
	if err := n.Validate(); err != nil {
		t.Errorf("the node does not validate: %v", err)
	}
	if len(warned) != 2 || !strings.Contains(strings.Join(warned, "|"), "incomplete") || !strings.Contains(strings.Join(warned, "|"), "left out") {
		t.Errorf("warnings %q, want the incomplete pool and the partitionable device", warned)
	}
	if got := d.driversOf(big); !cmp.Equal(got, []string{"gpu.example.com"}) {
		t.Errorf("drivers of the 40Gi selector %v", got)
	}
	ref, classes, ok := d.lookup("n1", "gpu.example.com/dra", "other.gpu-0")
	if !ok || ref != (draDevice{"gpu.example.com", "other", "gpu-0"}) || !cmp.Equal(classes, []string{"gpu"}) {
		t.Errorf("lookup other.gpu-0: %v %v %v", ref, classes, ok)
	}
	if hd, ok := d.hetschedDevice("n1", draDevice{"gpu.example.com", "n1", "gpu-1"}); !ok || hd.ID != "gpu-1" {
		t.Errorf("hetsched device of n1/gpu-1: %v %v", hd, ok)
	}

	// A selector that matches no device yet; then a node brings one.
	v := d.currentVersion()
	l4, err := d.selector(deviceClass("l4", `device.attributes["gpu.example.com"].model == "L40S"`), nil)
	if err != nil || len(d.driversOf(l4)) != 0 || d.currentVersion() != v {
		t.Fatalf("L40S selector: %v, drivers %v, version %d->%d", err, d.driversOf(l4), v, d.currentVersion())
	}
	l40s := resourcev1.Device{Name: "gpu-0", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": strAttr("L40S")}}
	d.translate("n2", []*resourcev1.ResourceSlice{draSlice("d", "n2", "gpu.example.com", "n2", 1, 1, l40s)}, api.MaxNodeDevices, warn)
	if got := d.driversOf(l4); len(got) != 1 || d.currentVersion() == v {
		t.Errorf("after n2: L40S drivers %v, version %d (was %d): want one driver and a new version", got, d.currentVersion(), v)
	}
	d.drop("n2")
	if got := d.driversOf(l4); len(got) != 0 {
		t.Errorf("after n2 went: L40S drivers %v, want none", got)
	}

	if _, err := d.selector(deviceClass("bad", `device.driver ==`), nil); err == nil || !strings.Contains(err.Error(), "selector") {
		t.Errorf("a selector that does not compile: %v", err)
	}
}

// A pod's requests combine into options, first choices first, leaving out
// those asking one driver for two classes; speeds come from the
// annotation.
func TestDRACombineAndSpeeds(t *testing.T) {
	u := func(req, typ, class string) draChoice {
		return draChoice{use: draUse{request: req, typ: typ, class: class, count: 1}, speed: 1}
	}
	got := combine([][]draChoice{
		{u("acc/gpu", "g/dra", "gpu"), u("acc/tpu", "t/dra", "tpu")},
		{u("nic", "n/dra", "nic")},
		{u("more/gpu", "g/dra", "gpu"), u("more/big", "g/dra", "big")},
	})
	var keys []string
	for _, c := range got {
		var parts []string
		for _, x := range c.uses {
			parts = append(parts, x.request)
		}
		keys = append(keys, strings.Join(parts, "+"))
	}
	want := []string{"acc/gpu+nic+more/gpu", "acc/tpu+nic+more/gpu", "acc/tpu+nic+more/big"}
	if !cmp.Equal(keys, want) {
		t.Errorf("options %q, want %q", keys, want)
	}

	sp, err := parseDRASpeeds("gpu=1, acc/tpu=1.5,cpu=0.25")
	if err != nil || sp["gpu"] != 1 || sp["acc/tpu"] != 1.5 || sp["cpu"] != 0.25 {
		t.Errorf("speeds %v %v", sp, err)
	}
	for _, bad := range []string{"gpu", "gpu=0", "gpu=-1", "=1", "gpu=fast", "gpu=1e9"} {
		if _, err := parseDRASpeeds(bad); err == nil || !strings.Contains(err.Error(), AnnotationDRASpeeds) {
			t.Errorf("speeds %q: %v, want an error naming the annotation", bad, err)
		}
	}
}

// The devices of allocated claims are known by claim: another claim's
// device is busy, the claim's own is not, and a deallocated or deleted
// claim frees its devices.
func TestDRADevicesInUse(t *testing.T) {
	s := &Scheduler{}
	s.dra = newDRAAllocator(s)
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-a"}}
	claim.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"},
	}}}
	s.dra.noteAllocation("ns/a", claim)
	gpu0 := draDevice{"gpu.example.com", "n1", "gpu-0"}
	if got := s.dra.claimUsing(gpu0, "uid-b"); got != "ns/a" {
		t.Errorf("gpu-0 for another claim: busy with %q, want ns/a", got)
	}
	if got := s.dra.claimUsing(gpu0, "uid-a"); got != "" {
		t.Errorf("gpu-0 for its own claim: busy with %q", got)
	}
	if got := s.dra.claimUsing(draDevice{"gpu.example.com", "n1", "gpu-1"}, "uid-b"); got != "" {
		t.Errorf("gpu-1: busy with %q", got)
	}
	claim.Status.Allocation = nil
	s.dra.noteAllocation("ns/a", claim)
	if got := s.dra.claimUsing(gpu0, "uid-b"); got != "" || len(s.dra.allocs) != 0 {
		t.Errorf("after deallocation: busy with %q, allocations %v", got, s.dra.allocs)
	}
	err := error(&deviceBusyError{device: gpu0, claim: "ns/a"})
	if !strings.Contains(err.Error(), "gpu.example.com/n1/gpu-0") || !strings.Contains(err.Error(), "ns/a") {
		t.Errorf("busy error %q names neither the device nor the claim", err)
	}
}
