package kube

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
)

// protobufInfo is the protobuf serializer of codecs.
func protobufInfo(t testing.TB, codecs runtime.NegotiatedSerializer) runtime.SerializerInfo {
	t.Helper()
	for _, info := range codecs.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeProtobuf {
			return info
		}
	}
	t.Fatal("no protobuf serializer")
	return runtime.SerializerInfo{}
}

// encode is obj as the API server sends it in protobuf.
func encode(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	info := protobufInfo(t, scheme.Codecs)
	var buf bytes.Buffer
	enc := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
	if err := enc.Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// decodeStock is data decoded by client-go's own protobuf serializer.
func decodeStock(t testing.TB, data []byte) (runtime.Object, error) {
	t.Helper()
	obj, _, err := protobufInfo(t, scheme.Codecs).Serializer.Decode(data, nil, nil)
	return obj, err
}

func managed(manager string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Time: &metav1.Time{Time: time.Unix(1764000000, 0)}, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:containers":{"k:{\"name\":\"c\"}":{".":{},"f:image":{}}}}}`)}}
}

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "u-" + "name", ResourceVersion: "42", Generation: 1,
			Labels: map[string]string{"hetsched.io/queue": "a"}, Annotations: map[string]string{"hetsched.io/devices": "nvidia.com/gpu=3"},
			Finalizers: []string{"f"}, ManagedFields: []metav1.ManagedFieldsEntry{managed("hetsched"), managed("kwok")}},
		Spec: corev1.PodSpec{SchedulerName: "hetsched", NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("500m"), "nvidia.com/gpu": k8sresource.MustParse("1")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true}}},
	}
}

func testNode(name string) *corev1.Node {
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"nvidia.com/gpu.product": "H100"},
			ManagedFields: []metav1.ManagedFieldsEntry{managed("kwok")}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{"nvidia.com/gpu": k8sresource.MustParse("8")},
			Images:     []corev1.ContainerImage{{Names: []string{"registry/a@sha256:1"}, SizeBytes: 1 << 30}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// TestLeanWireDecodesWhatTheTransformKeeps: a lean decoding is the stock
// decoding with the transform applied, for each kind it filters; the
// bytes it filters are shorter, the others the same slice.
func TestLeanWireDecodesWhatTheTransformKeeps(t *testing.T) {
	podList := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "7"},
		Items: []corev1.Pod{*testPod("a"), *testPod("b"), *testPod("c")}}
	podList.Items[1].ManagedFields = nil // one without: kept as it is
	nodeList := &corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}, Items: []corev1.Node{*testNode("n1"), *testNode("n2")}}
	bare := testPod("bare")
	bare.ManagedFields = nil
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{managed("x")}}}
	for _, tc := range []struct {
		name    string
		obj     runtime.Object
		shorter bool
	}{
		{"pod", testPod("p"), true},
		{"node", testNode("n"), true},
		{"pod list", podList, true},
		{"node list", nodeList, true},
		{"pod without managed fields", bare, false},
		{"another kind", cm, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := encode(t, tc.obj)
			lean := leanWire(data)
			if tc.shorter != (len(lean) < len(data)) {
				t.Fatalf("lean %d bytes from %d: shorter %v, want %v", len(lean), len(data), len(lean) < len(data), tc.shorter)
			}
			if !tc.shorter && &lean[0] != &data[0] {
				t.Fatal("unfiltered bytes were copied")
			}
			want, err := decodeStock(t, data)
			if err != nil {
				t.Fatal(err)
			}
			got, err := decodeStock(t, lean)
			if err != nil {
				t.Fatalf("the lean bytes do not decode: %v", err)
			}
			if tc.name != "another kind" {
				want = transformed(t, want)
			}
			if d := objDiff(want, got); d != "" {
				t.Fatalf("lean decoding differs from the transformed stock one (-want +got):\n%s", d)
			}
		})
	}
}

// objDiff is cmp.Diff for API objects (quantities compared by value).
func objDiff(a, b any) string {
	return cmp.Diff(a, b, cmp.Comparer(func(x, y k8sresource.Quantity) bool { return x.Cmp(y) == 0 }))
}

// transformed is obj (a Pod, Node or a list of them) as the informers'
// transform leaves it.
func transformed(t testing.TB, obj runtime.Object) runtime.Object {
	t.Helper()
	switch o := obj.(type) {
	case *corev1.PodList:
		for i := range o.Items {
			stripManagedFields(&o.Items[i])
		}
	case *corev1.NodeList:
		for i := range o.Items {
			stripManagedFields(&o.Items[i])
		}
	default:
		if _, err := stripManagedFields(obj); err != nil {
			t.Fatal(err)
		}
	}
	return obj
}

// TestLeanWireLeavesWhatItCannotRead: JSON, a truncated envelope and
// encoded raw bytes come back as they were.
func TestLeanWireLeavesWhatItCannotRead(t *testing.T) {
	data := encode(t, testPod("p"))
	for name, in := range map[string][]byte{
		"json":      []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"managedFields":[{}]}}`),
		"truncated": data[:len(data)/2],
		"prefix":    protobufPrefix,
		"empty":     {},
	} {
		if got := leanWire(in); !bytes.Equal(got, in) {
			t.Errorf("%s: changed (%d bytes from %d)", name, len(got), len(in))
		}
	}
}

// TestLeanDecoderFiltersThroughTheCodecs: the client's codecs decode a
// pod through leanWire (the path the lean informers' lists and watch
// events take).
func TestLeanDecoderFiltersThroughTheCodecs(t *testing.T) {
	info := protobufInfo(t, leanCodecs{scheme.Codecs.WithoutConversion()})
	obj, _, err := info.Serializer.Decode(encode(t, testPod("p")), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Name != "p" || p.ManagedFields != nil || p.Spec.NodeName != "n1" {
		t.Fatalf("decoded %T %+v", obj, obj)
	}
}

// FuzzLeanWire: whatever the bytes, leanWire does not panic, and where
// the stock decoder reads them, it reads the lean bytes to the same
// object once transformed.
func FuzzLeanWire(f *testing.F) {
	f.Add(encode(f, testPod("p")))
	f.Add(encode(f, testNode("n")))
	f.Add(encode(f, &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{*testPod("a")}}))
	f.Add([]byte("k8s\x00\x0a\x05\x12\x03Pod\x12\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		lean := leanWire(data)
		want, err := decodeStock(t, data)
		if err != nil {
			return
		}
		got, err := decodeStock(t, lean)
		if err != nil {
			t.Fatalf("stock decodes the bytes, not their lean form: %v", err)
		}
		if d := objDiff(transformed(t, want), transformed(t, got)); d != "" {
			t.Fatalf("(-stock +lean):\n%s", d)
		}
	})
}
