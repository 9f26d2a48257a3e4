package kube_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hetsched/hetsched/internal/kube"
)

// draEnv is a test's DRA drivers and classes (cluster-scoped, so named
// after the test).
type draEnv struct {
	*env
	gpuDriver, tpuDriver string
	gpuClass, tpuClass   string
}

func newDRAEnv(t *testing.T) *draEnv {
	e := newEnv(t)
	d := &draEnv{env: e, gpuDriver: "gpu." + e.ns + ".example.com", tpuDriver: "tpu." + e.ns + ".example.com",
		gpuClass: e.ns + "-gpu", tpuClass: e.ns + "-tpu"}
	for class, driver := range map[string]string{d.gpuClass: d.gpuDriver, d.tpuClass: d.tpuDriver} {
		dc := &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Spec: resourcev1.DeviceClassSpec{
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.driver == "` + driver + `"`}}},
		}}
		if _, err := e.cs.ResourceV1().DeviceClasses().Create(e.ctx, dc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// slice publishes a node's devices of a driver: n devices named
// <prefix>-<i> of a model with memory.
func (d *draEnv) slice(node, driver, prefix string, n int, model, memory string) {
	d.t.Helper()
	nodeName := d.prefix + node
	sl := &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: nodeName + "-" + prefix}, Spec: resourcev1.ResourceSliceSpec{
		Driver: driver, NodeName: &nodeName,
		Pool: resourcev1.ResourcePool{Name: nodeName, Generation: 1, ResourceSliceCount: 1},
	}}
	for i := range n {
		m := model
		sl.Spec.Devices = append(sl.Spec.Devices, resourcev1.Device{
			Name:       fmt.Sprintf("%s-%d", prefix, i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: &m}},
			Capacity:   map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{"memory": {Value: k8sresource.MustParse(memory)}},
		})
	}
	if _, err := d.cs.ResourceV1().ResourceSlices().Create(d.ctx, sl, metav1.CreateOptions{}); err != nil {
		d.t.Fatal(err)
	}
}

// claim creates a ResourceClaim with the requests.
func (d *draEnv) claim(name string, reqs ...resourcev1.DeviceRequest) {
	d.t.Helper()
	c := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.ns}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: reqs},
	}}
	if _, err := d.cs.ResourceV1().ResourceClaims(d.ns).Create(d.ctx, c, metav1.CreateOptions{}); err != nil {
		d.t.Fatal(err)
	}
}

func exactly(name, class string, count int64, cel ...string) resourcev1.DeviceRequest {
	r := resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, Count: count, AllocationMode: resourcev1.DeviceAllocationModeExactCount}}
	for _, e := range cel {
		r.Exactly.Selectors = append(r.Exactly.Selectors, resourcev1.DeviceSelector{CEL: &resourcev1.CELDeviceSelector{Expression: e}})
	}
	return r
}

func sub(name, class string, count int64) resourcev1.DeviceSubRequest {
	return resourcev1.DeviceSubRequest{Name: name, DeviceClassName: class, Count: count, AllocationMode: resourcev1.DeviceAllocationModeExactCount}
}

// claimPod creates a pod of the test's scheduler using the claims.
func (d *draEnv) claimPod(name string, claims ...string) {
	d.t.Helper()
	p := d.podSpec(name, map[string]string{"cpu": "100m"})
	for _, c := range claims {
		c := c
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimName: &c})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: c})
	}
	d.create(p)
}

func (d *draEnv) getClaim(name string) *resourcev1.ResourceClaim {
	d.t.Helper()
	c, err := d.cs.ResourceV1().ResourceClaims(d.ns).Get(d.ctx, name, metav1.GetOptions{})
	if err != nil {
		d.t.Fatal(err)
	}
	return c
}

// allocated checks that a bound pod's claim is allocated on its node for
// it, by kube-scheduler's rules, and returns the allocated devices.
func (d *draEnv) allocated(pod, claim string, wantRequest, wantDriver string, wantCount int) []string {
	d.t.Helper()
	p := d.waitBound(pod)
	c := d.getClaim(claim)
	a := c.Status.Allocation
	if a == nil {
		d.t.Fatalf("claim %s of bound pod %s is not allocated", claim, pod)
	}
	if a.NodeSelector == nil || len(a.NodeSelector.NodeSelectorTerms) != 1 || len(a.NodeSelector.NodeSelectorTerms[0].MatchFields) != 1 ||
		a.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values[0] != p.Spec.NodeName {
		d.t.Errorf("claim %s allocated with node selector %v, want pod %s's node %s", claim, a.NodeSelector, pod, p.Spec.NodeName)
	}
	if !slices.ContainsFunc(c.Status.ReservedFor, func(r resourcev1.ResourceClaimConsumerReference) bool {
		return r.UID == p.UID && r.Resource == "pods" && r.Name == pod
	}) {
		d.t.Errorf("claim %s reserved for %v, want pod %s among them", claim, c.Status.ReservedFor, pod)
	}
	if !slices.Contains(c.Finalizers, "resource.kubernetes.io/delete-protection") {
		d.t.Errorf("allocated claim %s has finalizers %v, want the delete protection", claim, c.Finalizers)
	}
	var devs []string
	for _, r := range a.Devices.Results {
		if r.Request != wantRequest || r.Driver != wantDriver || r.Pool != p.Spec.NodeName {
			d.t.Errorf("claim %s result %+v, want request %s of driver %s in pool %s", claim, r, wantRequest, wantDriver, p.Spec.NodeName)
		}
		devs = append(devs, r.Device)
	}
	if len(devs) != wantCount {
		d.t.Errorf("claim %s allocated %v, want %d devices", claim, devs, wantCount)
	}
	return devs
}

// Claims are allocated on concrete devices from the ResourceSlices, by
// their classes' and requests' CEL selectors, before their pods are bound:
// a model no device has waits with the reason; a claim shared by two pods
// puts both on its node; a firstAvailable request takes the TPUs when the
// GPUs are full; a restarted Scheduler counts the allocated claims (a new
// claim waits) and takes a device its claim gave back.
func TestDRAClaimsAreAllocatedOnConcreteDevices(t *testing.T) {
	d := newDRAEnv(t)
	d.node("gpu", map[string]string{}, nil)
	d.node("tpu", map[string]string{}, nil)
	d.slice("gpu", d.gpuDriver, "gpu", 2, "H100", "80Gi")
	d.slice("tpu", d.tpuDriver, "tpu", 4, "v5e", "16Gi")
	r := d.start()

	h100 := `device.attributes["` + d.gpuDriver + `"].model == "H100" && device.capacity["` + d.gpuDriver + `"].memory.compareTo(quantity("40Gi")) >= 0`
	d.claim("c1", exactly("gpu", d.gpuClass, 1, h100))
	d.claimPod("p1", "c1")
	got1 := d.allocated("p1", "c1", "gpu", d.gpuDriver, 1)
	if p := d.get("p1"); p.Spec.NodeName != d.prefix+"gpu" || !strings.Contains(p.Annotations[kube.AnnotationDevices], d.gpuDriver+"/dra="+got1[0]) {
		t.Errorf("p1 on %s with devices %q, want %sgpu and its claim's device %s", p.Spec.NodeName, p.Annotations[kube.AnnotationDevices], d.prefix, got1[0])
	}

	d.claim("c2", exactly("gpu", d.gpuClass, 1))
	d.claimPod("p2", "c2")
	got2 := d.allocated("p2", "c2", "gpu", d.gpuDriver, 1)
	if len(got1) == 1 && len(got2) == 1 && got1[0] == got2[0] {
		t.Errorf("claims c1 and c2 both got device %s", got1[0])
	}

	d.claim("a100", exactly("gpu", d.gpuClass, 1, `device.attributes["`+d.gpuDriver+`"].model == "A100"`))
	d.claimPod("p-a100", "a100")
	d.waitReason("p-a100", "no device matches request gpu")

	// Shared: a second pod of c1 goes where c1's device is, reserving it too.
	d.claimPod("p1b", "c1")
	if p := d.waitBound("p1b"); p.Spec.NodeName != d.prefix+"gpu" {
		t.Errorf("p1b, sharing c1, on %s, want %sgpu", p.Spec.NodeName, d.prefix)
	}
	d.allocated("p1b", "c1", "gpu", d.gpuDriver, 1)

	// GPUs full: GPU or else two TPUs takes the TPUs.
	d.claim("c3", resourcev1.DeviceRequest{Name: "acc", FirstAvailable: []resourcev1.DeviceSubRequest{sub("gpu", d.gpuClass, 1), sub("tpu", d.tpuClass, 2)}})
	d.claimPod("p3", "c3")
	d.allocated("p3", "c3", "acc/tpu", d.tpuDriver, 2)
	if p := d.get("p3"); p.Spec.NodeName != d.prefix+"tpu" {
		t.Errorf("p3 on %s, want %stpu", p.Spec.NodeName, d.prefix)
	}

	// A restarted Scheduler counts what the claims hold: no GPU is free.
	r.stop()
	d.start()
	d.claim("c4", exactly("gpu", d.gpuClass, 1))
	d.claimPod("p4", "c4")
	d.waitReason("p4", "insufficient "+d.gpuDriver+"/dra")
	// c2 given back (as kube-controller-manager does once its pod is
	// gone): p4 takes its device.
	c2 := d.getClaim("c2")
	c2.Status.Allocation, c2.Status.ReservedFor = nil, nil
	if _, err := d.cs.ResourceV1().ResourceClaims(d.ns).UpdateStatus(d.ctx, c2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := d.allocated("p4", "c4", "gpu", d.gpuDriver, 1); len(got) == 1 && len(got2) == 1 && got[0] != got2[0] {
		t.Errorf("p4 got %s, want c2's device %s (the other is c1's)", got[0], got2[0])
	}
}

// A claim outlives its pod: when the pod finishes (KWOK runs a Job's pod
// to Succeeded) its allocated claim's device stays taken (a claim task
// holds it, from the same engine step) until the claim is given back; and
// a firstAvailable request goes where it is expected to finish first
// (hetsched.io/dra-speeds), not only to the first that fits.
func TestDRAClaimOutlivesItsPodAndSpeedsChoose(t *testing.T) {
	d := newDRAEnv(t)
	d.node("gpu", map[string]string{}, nil)
	d.node("tpu", map[string]string{}, nil)
	d.slice("gpu", d.gpuDriver, "gpu", 1, "H100", "80Gi")
	d.slice("tpu", d.tpuDriver, "tpu", 2, "v5e", "16Gi")
	r := d.start()

	// GPU free, but the TPUs are expected to be three times as fast.
	d.claim("fast", resourcev1.DeviceRequest{Name: "acc", FirstAvailable: []resourcev1.DeviceSubRequest{sub("gpu", d.gpuClass, 1), sub("tpu", d.tpuClass, 2)}})
	p := d.podSpec("fast", map[string]string{"cpu": "100m"})
	name := "fast"
	p.Annotations[kube.AnnotationDRASpeeds] = "acc/tpu=3"
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "acc", ResourceClaimName: &name}}
	d.create(p)
	d.allocated("fast", "fast", "acc/tpu", d.tpuDriver, 2)

	d.claim("c1", exactly("gpu", d.gpuClass, 1))
	job := d.podSpec("job", map[string]string{"cpu": "100m"})
	c1 := "c1"
	job.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &c1}}
	job.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "0b0e5b46-1a9c-4b1e-9a57-5d8f3c1e2a02"}}
	d.create(job)
	dev := d.allocated("job", "c1", "gpu", d.gpuDriver, 1)
	d.wait("job Succeeded", func() (bool, string) {
		p := d.get("job")
		return p.Status.Phase == corev1.PodSucceeded, string(p.Status.Phase)
	})
	d.claim("c2", exactly("gpu", d.gpuClass, 1))
	d.claimPod("next", "c2")
	d.waitReason("next", "insufficient "+d.gpuDriver+"/dra")
	if rec, ok := r.eng.Task(string(d.get("job").UID)); !ok || rec.State != "cancelled" || !strings.Contains(rec.Reason, "claim-") {
		t.Errorf("the finished pod's task: %+v, want it displaced by its claim's task", rec)
	}
	claim := d.getClaim("c1")
	claim.Status.Allocation, claim.Status.ReservedFor = nil, nil
	if _, err := d.cs.ResourceV1().ResourceClaims(d.ns).UpdateStatus(d.ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := d.allocated("next", "c2", "gpu", d.gpuDriver, 1); !slices.Equal(got, dev) {
		t.Errorf("next got %v, want the given-back %v", got, dev)
	}
}
