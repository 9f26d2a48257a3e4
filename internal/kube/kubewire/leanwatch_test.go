package kubewire

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

var sameQuantity = cmp.Comparer(func(a, b k8sresource.Quantity) bool { return a.Cmp(b) == 0 })

func stockProtobuf() *protobuf.Serializer {
	return protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
}

// richPod has something in every part the Scheduler reads, and
// managedFields.
func richPod() *corev1.Pod {
	now := metav1.NewTime(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	grace := int64(30)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "train-0", Namespace: "team-a", UID: "u-1", ResourceVersion: "42", Generation: 3,
			CreationTimestamp: now, DeletionTimestamp: &now, DeletionGracePeriodSeconds: &grace,
			Labels: map[string]string{"hetsched.io/queue": "research"}, Annotations: map[string]string{"hetsched.io/gang": "g1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "u-j"}},
			Finalizers:      []string{"example.com/keep"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &now, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)},
				{Manager: "kwok", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)},
			},
		},
		Spec: corev1.PodSpec{
			SchedulerName: "hetsched", NodeName: "node-1", PriorityClassName: "urgent",
			NodeSelector:   map[string]string{"nvidia.com/gpu.product": "H100"},
			InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": k8sresource.MustParse("250m")}}}},
			Containers: []corev1.Container{{Name: "c", Image: "trainer", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{"cpu": k8sresource.MustParse("4"), "nvidia.com/gpu": k8sresource.MustParse("2")},
				Limits:   corev1.ResourceList{"nvidia.com/gpu": k8sresource.MustParse("2")}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, HostPort: 80, Protocol: corev1.ProtocolTCP}}}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "train"}}, MatchLabelKeys: []string{"pod-template-hash"}}},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "train"}}}}}},
			Tolerations:    []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr("claim-1")}},
		},
		Status: corev1.PodStatus{
			Phase:             corev1.PodRunning,
			Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}}},
			PodIP:             "10.0.0.7",
		},
	}
}

func ptr[T any](v T) *T { return &v }

func encodeStock(t testing.TB, obj runtime.Object) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := stockProtobuf().Encode(obj, &buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// trimmedStock is what client-go decodes data to, trimmed to the lean
// pod (what the informers' transform keeps of it).
func trimmedStock(t testing.TB, data []byte) (*corev1.Pod, error) {
	t.Helper()
	obj, _, err := stockProtobuf().Decode(data, nil, nil)
	if err != nil {
		return nil, err
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		t.Fatalf("client-go decoded a %T", obj)
	}
	leanPod(p)
	return p, nil
}

// TestLeanPodIsClientGosTrimmed: a Pod decoded by the lean decoder is the
// one client-go decodes, trimmed to the lean pod (managedFields and what
// the Scheduler never reads left out), whether it makes the object or
// decodes into one.
func TestLeanPodIsClientGosTrimmed(t *testing.T) {
	data := encodeStock(t, richPod())
	want, err := trimmedStock(t, data)
	if err != nil {
		t.Fatal(err)
	}
	d := leanObjectDecoder{stockProtobuf(), &decodedParts{}}
	got, gvk, err := d.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if *gvk != podKind {
		t.Errorf("kind %v, want %v", gvk, podKind)
	}
	if diff := cmp.Diff(want, got, sameQuantity); diff != "" {
		t.Errorf("lean pod (-client-go +lean):\n%s", diff)
	}
	into := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "stale"}}
	if _, _, err := d.Decode(data, nil, into); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, into, sameQuantity); diff != "" {
		t.Errorf("decoded into a used pod (-client-go +lean):\n%s", diff)
	}
	// Not a Pod: client-go's decoding, managedFields and all.
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}, ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: richPod().ManagedFields}}
	obj, _, err := d.Decode(encodeStock(t, node), nil, nil)
	if n, ok := obj.(*corev1.Node); err != nil || !ok || len(n.ManagedFields) != 2 {
		t.Errorf("a node through the lean decoder: %v %+v", err, obj)
	}
}

// TestLeanMetaMergesAroundManagedFields: ObjectMeta fields after
// managedFields (any order is valid protobuf) are decoded and merged as
// the generated Unmarshal merges them.
func TestLeanMetaMergesAroundManagedFields(t *testing.T) {
	head, err := (&metav1.ObjectMeta{Name: "p", Labels: map[string]string{"a": "1"}, ManagedFields: richPod().ManagedFields}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	tail, err := (&metav1.ObjectMeta{Labels: map[string]string{"b": "2"}, Finalizers: []string{"f"}, ManagedFields: richPod().ManagedFields[:1]}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	b := append(append([]byte{}, head...), tail...)
	var want metav1.ObjectMeta
	if err := want.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	if len(want.ManagedFields) != 3 {
		t.Fatalf("the stock decoding holds %d managedFields, want 3", len(want.ManagedFields))
	}
	want.ManagedFields = nil
	var got metav1.ObjectMeta
	if err := decodeKeeping(&got, b, leanMetaFields, 0, nil); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-stock +lean):\n%s", diff)
	}
}

// TestLeanEventIsReadInPlace: a watch event's object bytes are the
// frame's own (no copy), its type read; what is not a WatchEvent it can
// read goes to client-go's decoder.
func TestLeanEventIsReadInPlace(t *testing.T) {
	obj := encodeStock(t, richPod())
	frame, err := (&metav1.WatchEvent{Type: "MODIFIED", Object: runtime.RawExtension{Raw: obj}}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	stock := protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)
	d := leanEventDecoder{stock}
	var ev metav1.WatchEvent
	res, _, err := d.Decode(frame, nil, &ev)
	if err != nil || res != &ev {
		t.Fatalf("decode: %v, %v", res, err)
	}
	if ev.Type != "MODIFIED" || !bytes.Equal(ev.Object.Raw, obj) {
		t.Fatalf("event %q with %d bytes, want MODIFIED with %d", ev.Type, len(ev.Object.Raw), len(obj))
	}
	if &ev.Object.Raw[0] != &frame[len(frame)-len(obj)] {
		t.Error("the object's bytes were copied")
	}
	var theirs metav1.WatchEvent
	if _, _, err := stock.Decode(frame, nil, &theirs); err != nil || theirs.Type != ev.Type || !bytes.Equal(theirs.Object.Raw, ev.Object.Raw) {
		t.Errorf("client-go reads %q %d bytes (%v)", theirs.Type, len(theirs.Object.Raw), err)
	}
	var bad metav1.WatchEvent
	if _, _, err := d.Decode([]byte{0x0a, 0xff}, nil, &bad); err == nil {
		t.Error("a torn frame decoded")
	}
}

// FuzzLeanDecoders: no bytes make the lean decoders panic, and a pod both
// they and client-go decode is the same lean pod.
func FuzzLeanDecoders(f *testing.F) {
	f.Add(encodeStock(f, richPod()))
	f.Add(append(append([]byte{}, protobufMagic...), 0x0a, 0x06, 0x0a, 0x02, 'v', '1', 0x12, 0x00))
	f.Add([]byte{0x0a, 0x05, 'A', 'D', 'D', 'E', 'D', 0x12, 0x02, 0x0a, 0x00})
	parts := &decodedParts{} // across inputs, as across a watch's events
	f.Fuzz(func(t *testing.T, data []byte) {
		got, _, err := leanObjectDecoder{stockProtobuf(), parts}.Decode(data, nil, nil)
		if want, werr := trimmedStock(t, data); werr == nil && err == nil {
			if diff := cmp.Diff(want, got, sameQuantity); diff != "" {
				t.Fatalf("(-client-go +lean):\n%s", diff)
			}
		}
		var ev metav1.WatchEvent
		_, _, _ = leanEventDecoder{protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)}.Decode(data, nil, &ev)
	})
}
