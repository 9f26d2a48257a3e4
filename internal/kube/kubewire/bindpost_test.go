package kubewire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
)

// TestEncodeBindingIsClientGosBody: the body bindPoster posts is, byte
// for byte, what client-go's protobuf serializer makes of the Binding,
// and decodes back to it.
func TestEncodeBindingIsClientGosBody(t *testing.T) {
	for _, ann := range []map[string]string{nil, {"hetsched.io/devices": "gpu0,gpu3"}} {
		var got bytes.Buffer
		if err := encodeBinding(&got, "team-a", "train-0", "uid-1", "node-7", ann); err != nil {
			t.Fatal(err)
		}
		want := &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train-0", UID: "uid-1", Annotations: ann},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "node-7"},
		}
		var theirs bytes.Buffer
		gvk := corev1.SchemeGroupVersion.WithKind("Binding")
		enc := scheme.Codecs.EncoderForVersion(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), gvk.GroupVersion())
		if err := enc.Encode(want.DeepCopy(), &theirs); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), theirs.Bytes()) {
			t.Errorf("annotations %v: body\n%q\nclient-go's\n%q", ann, got.Bytes(), theirs.Bytes())
		}
		obj, kind, err := scheme.Codecs.UniversalDeserializer().Decode(got.Bytes(), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if *kind != gvk {
			t.Errorf("decoded as %v, want %v", kind, gvk)
		}
		want.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"}
		if d := cmp.Diff(want, obj); d != "" {
			t.Errorf("decoded binding (-want +got):\n%s", d)
		}
	}
}

// TestBindFailureKeepsTheErrorClass: a refused Binding's error is the
// class client-go would give it, from a protobuf or JSON Status or from
// the code alone.
func TestBindFailureKeepsTheErrorClass(t *testing.T) {
	pbStatus := func(st metav1.Status) []byte {
		raw, err := st.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		env := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Status"}, Raw: raw}
		out, err := env.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return append(append([]byte{}, protobufMagic...), out...)
	}
	jsonStatus := func(st metav1.Status) []byte {
		st.Kind, st.APIVersion = "Status", "v1"
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	conflict := metav1.Status{Status: metav1.StatusFailure, Code: 409, Reason: metav1.StatusReasonConflict, Message: `Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n"`}
	for _, c := range []struct {
		name string
		code int
		body []byte
		is   func(error) bool
		msg  string
	}{
		{"protobuf conflict", 409, pbStatus(conflict), apierrors.IsConflict, "already assigned"},
		{"json not found", 404, jsonStatus(metav1.Status{Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound, Message: `pods "p" not found`}), apierrors.IsNotFound, "not found"},
		{"status without a code", 429, pbStatus(metav1.Status{Reason: metav1.StatusReasonTooManyRequests, Message: "slow down"}), apierrors.IsTooManyRequests, "slow down"},
		{"plain text 500", 500, []byte("etcd is sad\n"), apierrors.IsInternalError, "etcd is sad"},
		{"empty 503", 503, nil, apierrors.IsServiceUnavailable, ""},
		// No Status to read: the code's class for a POST, as client-go
		// gives it.
		{"torn protobuf", 409, pbStatus(conflict)[:12], apierrors.IsAlreadyExists, ""},
	} {
		err := bindFailure(c.code, "p", c.body)
		if err == nil || !c.is(err) {
			t.Errorf("%s: %v (%T), not of its class", c.name, err, err)
			continue
		}
		if !bytes.Contains([]byte(err.Error()), []byte(c.msg)) {
			t.Errorf("%s: %q does not say %q", c.name, err, c.msg)
		}
		if code := apierrors.ReasonForError(err); code == metav1.StatusReasonUnknown && c.code != 500 {
			t.Errorf("%s: no reason in %v", c.name, err)
		}
	}
}

// FuzzBindFailure: whatever a server answers, a refused Binding is an
// error, never a panic.
func FuzzBindFailure(f *testing.F) {
	f.Add(409, append(append([]byte{}, protobufMagic...), 0x0a, 0x02))
	f.Add(404, []byte(`{"kind":"Status","code":404}`))
	f.Add(500, []byte("nope"))
	f.Fuzz(func(t *testing.T, code int, body []byte) {
		if code < 100 || code > 999 {
			code = http.StatusInternalServerError
		}
		if bindFailure(code, "p", body) == nil {
			t.Fatal("no error")
		}
	})
}

// TestNoBindPosterForAFake: a client that is not client-go's REST client
// binds through client-go.
func TestNoBindPosterForAFake(t *testing.T) {
	if p := newBindPoster(fake.NewClientset()); p != nil {
		t.Fatalf("a bindPoster over a fake clientset: %+v", p)
	}
}
