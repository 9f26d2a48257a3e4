package kubewire

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// bindPoster posts Bindings (POST .../pods/NAME/binding) itself, as
// protobuf, over the clientset's own HTTP client (its connection, TLS and
// credentials) and under the clientset's rate limiter: what client-go's
// request builder does for a Binding, without the builder. A Binding is
// a scheduler's one request per pod; through the builder (URL assembly,
// codec negotiation, response decoding) it allocated about 14 KB, this
// way about 5 KB, and side by side hetsched kube spent 7–10 % less CPU
// per pod (BENCHMARKS.md, runs U–Y, X).
//
// It posts to each pod's binding subresource, not to the namespace's
// bindings resource (POST .../namespaces/NS/bindings), though one path
// for every pod would spare HTTP/2's header table an entry per pod (2–3 %
// less CPU per pod side by side, BENCHMARKS.md, runs AA): that resource
// drops the Binding's uid, the precondition that a pod deleted and made
// again under its name is not bound where the old one was placed
// (TestBindDirectAgainstTheAPIServer fails on it).
//
// Failures come back as client-go's do (apierrors' StatusError from the
// API server's Status; IsConflict, IsNotFound, IsTooManyRequests hold).
type bindPoster struct {
	hc      *http.Client
	base    url.URL // the core group's versioned root: https://host/api/v1
	limiter flowcontrol.RateLimiter
	bufs    sync.Pool // *bytes.Buffer for the encoded bodies
}

// protobufMagic starts every Kubernetes protobuf body (runtime.Unknown
// follows it).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

const protobufType = "application/vnd.kubernetes.protobuf"

// maxStatusBytes bounds how much of a failed Binding's answer is read.
const maxStatusBytes = 64 << 10

// newBindPoster returns a bindPoster over cs's core client, or nil when cs
// is not a clientset of client-go's REST clients (a fake, say): then
// Bindings go through client-go.
func newBindPoster(cs kubernetes.Interface) *bindPoster {
	rc := coreRESTClient(cs)
	if rc == nil {
		return nil
	}
	base := rc.Get().URL() // the client's base and versioned path, nothing else
	if base == nil || base.Host == "" {
		return nil
	}
	p := &bindPoster{hc: rc.Client, base: *base, limiter: rc.GetRateLimiter()}
	p.base.RawQuery = ""
	return p
}

// coreRESTClient is cs's core REST client when it is one of client-go's,
// with an HTTP client (nil otherwise: a fake clientset, say).
func coreRESTClient(cs kubernetes.Interface) *rest.RESTClient {
	rc, ok := cs.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil || rc.Client == nil {
		return nil
	}
	return rc
}

// bind posts pod ns/name's (of uid) Binding to node, with annotations
// (nil: none).
func (p *bindPoster) bind(ctx context.Context, ns, name string, uid types.UID, node string, annotations map[string]string) error {
	if p.limiter != nil {
		if err := p.limiter.Wait(ctx); err != nil {
			return err
		}
	}
	buf, _ := p.bufs.Get().(*bytes.Buffer)
	if buf == nil {
		buf = new(bytes.Buffer)
	}
	defer func() {
		if buf.Cap() <= 64<<10 {
			buf.Reset()
			p.bufs.Put(buf)
		}
	}()
	if err := encodeBinding(buf, ns, name, uid, node, annotations); err != nil {
		return err
	}
	u := p.base
	u.Path = p.base.Path + "/namespaces/" + url.PathEscape(ns) + "/pods/" + url.PathEscape(name) + "/binding"
	body := buf.Bytes()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.URL, req.Host = &u, u.Host
	req.Header = http.Header{"Content-Type": {protobufType}, "Accept": {protobufType + ", application/json"}}
	resp, err := p.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxStatusBytes))
		return nil
	}
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxStatusBytes))
	return bindFailure(resp.StatusCode, name, answer)
}

// encodeBinding appends the protobuf body of the pod's Binding to buf.
func encodeBinding(buf *bytes.Buffer, ns, name string, uid types.UID, node string, annotations map[string]string) error {
	b := corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Annotations: annotations},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	raw, err := b.Marshal()
	if err != nil {
		return fmt.Errorf("encode binding: %w", err)
	}
	env := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: "v1", Kind: "Binding"}, Raw: raw}
	out, err := env.Marshal()
	if err != nil {
		return fmt.Errorf("encode binding: %w", err)
	}
	buf.Write(protobufMagic)
	buf.Write(out)
	return nil
}

// bindFailure is the error of a Binding the API server answered with
// code and body: its Status as apierrors' StatusError, else a generic
// one of the code (as client-go's transformResponse makes them).
func bindFailure(code int, name string, body []byte) error {
	var st metav1.Status
	switch {
	case bytes.HasPrefix(body, protobufMagic):
		var env runtime.Unknown
		if env.Unmarshal(body[len(protobufMagic):]) == nil && env.Kind == "Status" && st.Unmarshal(env.Raw) == nil {
			return statusError(code, &st)
		}
	case len(body) > 0 && body[0] == '{':
		if json.Unmarshal(body, &st) == nil && st.Kind == "Status" {
			return statusError(code, &st)
		}
	}
	return apierrors.NewGenericServerResponse(code, http.MethodPost, schema.GroupResource{Resource: "pods"}, name, strings.TrimSpace(string(body)), 0, true)
}

// statusError is a refusal's Status as apierrors' StatusError (the
// answer's code where the Status has none); a Status that says Success
// on a refusal is the code's generic error.
func statusError(code int, st *metav1.Status) error {
	if st.Code == 0 {
		st.Code = int32(code)
	}
	if st.Status == metav1.StatusSuccess {
		return apierrors.NewGenericServerResponse(code, http.MethodPost, schema.GroupResource{Resource: "pods"}, "", st.Message, 0, true)
	}
	st.Status = metav1.StatusFailure
	return &apierrors.StatusError{ErrStatus: *st}
}
