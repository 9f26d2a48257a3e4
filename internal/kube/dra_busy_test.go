package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hetsched/hetsched/internal/api"
)

// busyDeviceScheduler is a Scheduler, with no API server, that knows node
// n1's two GPUs (gpu-0 and gpu-1, class "gpu"), the pod's unallocated
// claim ns/mine and claim ns/other, allocated gpu-0 and not deallocated
// yet; its client is a fake that records every write.
func busyDeviceScheduler(t *testing.T) (*Scheduler, *fake.Clientset, *resourcev1.ResourceClaim) {
	t.Helper()
	d := newDRAState()
	class := deviceClass("gpu", `device.driver == "gpu.example.com"`)
	if _, err := d.selector(class, nil); err != nil {
		t.Fatal(err)
	}
	d.translate("n1", []*resourcev1.ResourceSlice{draSlice("s", "n1", "gpu.example.com", "n1", 1, 1,
		resourcev1.Device{Name: "gpu-0"}, resourcev1.Device{Name: "gpu-1"})}, api.MaxNodeDevices, func(string, ...any) {})
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	mine := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine", UID: "uid-mine"}}
	other := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "uid-other"}}
	other.Status.Allocation = &resourcev1.AllocationResult{Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
		{Request: "gpu", Driver: "gpu.example.com", Pool: "n1", Device: "gpu-0"},
	}}}
	for _, err := range []error{classes.Add(class), claims.Add(mine), claims.Add(other)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	cs := fake.NewClientset(mine.DeepCopy(), other.DeepCopy())
	s := &Scheduler{cfg: Config{RequestTimeout: 5 * time.Second}, client: cs}
	s.dra = newDRAAllocator(s)
	s.dra.devices = d
	s.dra.classLst, s.dra.claimLst = resourcelisters.NewDeviceClassLister(classes), resourcelisters.NewResourceClaimLister(claims)
	s.dra.noteAllocation("ns/other", other)
	return s, cs, mine
}

// A placement on a device that another allocated claim still holds is
// refused before anything is written: the pod's claim is not allocated
// that device, and the error (deviceBusyError, which bindOne hands to
// waitForBusyDevice) names the device and the claim holding it. The same
// placement on the free GPU allocates it.
func TestDRAPlacementOnDeviceAnotherClaimHoldsIsRefused(t *testing.T) {
	ctx := context.Background()
	plan := &draPlan{
		claims:  []draClaimRef{{key: "ns/mine", uid: "uid-mine"}},
		options: [][]draUse{{{claim: 0, request: "gpu", typ: "gpu.example.com/dra", class: "gpu", count: 1, dcName: "gpu"}}},
	}
	pp := func(id string) placedPod {
		return placedPod{uid: "pod-uid", key: "ns/p", task: "pod-uid", node: "n1", chosen: -1,
			devices: []api.DeviceRef{{Type: "gpu.example.com/dra", ID: id}}}
	}

	s, cs, mine := busyDeviceScheduler(t)
	written, err := s.dra.writeClaims(ctx, pp("gpu-0"), plan)
	var busy *deviceBusyError
	if !errors.As(err, &busy) {
		t.Fatalf("placement on gpu-0, which ns/other holds: wrote %d claims, err %v; want a deviceBusyError", len(written), err)
	}
	if want := (draDevice{"gpu.example.com", "n1", "gpu-0"}); busy.device != want || busy.claim != "ns/other" {
		t.Errorf("busy error for %v held by %q, want %v held by ns/other", busy.device, busy.claim, want)
	}
	if len(written) != 0 || len(cs.Actions()) != 0 {
		t.Errorf("a refused placement wrote %d claims and made the API calls %v", len(written), cs.Actions())
	}
	// The allocation itself refuses, whatever calls it.
	if a, err := s.dra.allocation(pp("gpu-0"), mine, plan.options[0], 0, map[api.DeviceRef]bool{}); !errors.As(err, &busy) || a != nil {
		t.Errorf("allocation on gpu-0: %v, %v; want none and a deviceBusyError", a, err)
	}

	s, cs, _ = busyDeviceScheduler(t)
	written, err = s.dra.writeClaims(ctx, pp("gpu-1"), plan)
	if err != nil || len(written) != 1 || !written[0].allocated {
		t.Fatalf("placement on the free gpu-1: wrote %v, err %v; want ns/mine allocated", written, err)
	}
	got, err := cs.ResourceV1().ResourceClaims("ns").Get(ctx, "mine", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := got.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].Device != "gpu-1" || len(got.Status.ReservedFor) != 1 {
		t.Errorf("ns/mine after the placement on gpu-1: allocation %+v, reserved for %v", got.Status.Allocation, got.Status.ReservedFor)
	}
}
