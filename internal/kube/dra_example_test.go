package kube_test

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestPretendDriverExampleAllocates (issue 42 §1): on a cluster with no DRA
// driver, deploy/kubernetes/examples' pretend driver (its DeviceClasses
// and a node's ResourceSlices) lets dra-claim.yaml's claim and pod be
// scheduled: the claim is allocated the node's TPUs (the pod says they
// finish first) and the pod is bound there. The slices' node is renamed
// to this test's; the objects are otherwise the files'.
func TestPretendDriverExampleAllocates(t *testing.T) {
	e := newEnv(t)
	node := e.prefix + "gpu-node-1"
	e.node("gpu-node-1", nil, nil)
	var classes []*resourcev1.DeviceClass
	var slices []*resourcev1.ResourceSlice
	decodeExample(t, "dra-pretend-driver.yaml", func(kind string, doc []byte) {
		switch kind {
		case "DeviceClass":
			var c resourcev1.DeviceClass
			decodeStrict(t, doc, &c)
			classes = append(classes, &c)
		case "ResourceSlice":
			var s resourcev1.ResourceSlice
			decodeStrict(t, doc, &s)
			s.Name = e.prefix + s.Name
			s.Spec.NodeName = &node
			s.Spec.Pool.Name = node
			slices = append(slices, &s)
		default:
			t.Fatalf("dra-pretend-driver.yaml: an unexpected %s", kind)
		}
	})
	var claim *resourcev1.ResourceClaim
	var pod *corev1.Pod
	decodeExample(t, "dra-claim.yaml", func(kind string, doc []byte) {
		switch kind {
		case "ResourceClaim":
			claim = &resourcev1.ResourceClaim{}
			decodeStrict(t, doc, claim)
		case "Pod":
			pod = &corev1.Pod{}
			decodeStrict(t, doc, pod)
		}
	})
	if len(classes) != 2 || len(slices) != 2 || claim == nil || pod == nil {
		t.Fatalf("the examples hold %d classes, %d slices, claim %v, pod %v", len(classes), len(slices), claim != nil, pod != nil)
	}
	for _, c := range classes { // cluster-scoped: another run may have made them
		if _, err := e.cs.ResourceV1().DeviceClasses().Create(e.ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	for _, s := range slices {
		if _, err := e.cs.ResourceV1().ResourceSlices().Create(e.ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, s := range slices {
			e.cs.ResourceV1().ResourceSlices().Delete(e.ctx, s.Name, metav1.DeleteOptions{})
		}
	})
	claim.Namespace = e.ns
	if _, err := e.cs.ResourceV1().ResourceClaims(e.ns).Create(e.ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Namespace = e.ns
	pod.Spec.SchedulerName = e.sched
	delete(pod.Labels, "hetsched.io/queue") // the example's queue is the install's, not this test's
	e.start()
	e.create(pod)
	bound := e.waitBound(pod.Name)
	if bound.Spec.NodeName != node {
		t.Fatalf("bound to %s, want %s", bound.Spec.NodeName, node)
	}
	got, err := e.cs.ResourceV1().ResourceClaims(e.ns).Get(e.ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := got.Status.Allocation
	if a == nil || len(a.Devices.Results) != 2 {
		t.Fatalf("claim allocation %+v, want the two TPUs", a)
	}
	for _, r := range a.Devices.Results {
		if r.Request != "acc/tpu" || r.Driver != "tpu.example.com" || r.Pool != node || !strings.HasPrefix(r.Device, "tpu-") {
			t.Errorf("allocation result %+v, want acc/tpu of tpu.example.com in pool %s", r, node)
		}
	}
}

// decodeExample calls fn with each document of an example file and its kind.
func decodeExample(t *testing.T, file string, fn func(kind string, doc []byte)) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/kubernetes/examples/" + file)
	if err != nil {
		t.Fatal(err)
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := r.Read()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var meta metav1.TypeMeta
		if err := utilyaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if meta.Kind == "" {
			continue
		}
		fn(meta.Kind, doc)
	}
}

// decodeStrict decodes one document (as the examples' strict-validation
// test applies them; this one only needs their values).
func decodeStrict(t *testing.T, doc []byte, v any) {
	t.Helper()
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096).Decode(v); err != nil {
		t.Fatal(err)
	}
}
