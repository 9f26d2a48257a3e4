package kubewire

import (
	"bytes"
	"context"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The lean watch: the Scheduler's Pod informer lists and watches through
// a REST client of its own whose protobuf decoding copies less than
// client-go's. A watch event's bytes are copied twice before client-go
// decodes the pod in them (into the WatchEvent's RawExtension, then into
// the runtime.Unknown envelope), and every pod's managedFields (often
// half its bytes) are decoded only for the informer's transform to drop
// them. The lean decoders read the event and the envelope in place
// (leanEventDecoder, leanObjectDecoder) and decode a Pod's fields straight
// from the frame, managedFields left out (decodeLeanPod); anything else
// (lists, other kinds, bytes they cannot read) goes through client-go's
// decoders unchanged. The decoded pod owns its memory (the generated
// Unmarshal copies every string and byte field), so the frame buffer the
// stream reuses holds nothing it keeps.
//
// What it saves is garbage: over one bench run hetsched kube allocated
// 449 MB instead of 563 (the watch streams 193 MB instead of 331), and
// side by side, with the dirty set's maps replaced after bursts in the
// same build, it spent 4–5 % less CPU per pod (BENCHMARKS.md, runs U–Y:
// X and the allocations).

// leanCodecs are client-go's codecs with the lean decoders on protobuf;
// their pods share the decoded parts in parts.
type leanCodecs struct {
	runtime.NegotiatedSerializer
	parts *decodedParts
}

func (c leanCodecs) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := c.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	for i, info := range infos {
		if info.MediaType == runtime.ContentTypeProtobuf && info.Serializer != nil && info.StreamSerializer != nil {
			info.Serializer = leanObjectDecoder{info.Serializer, c.parts}
			ss := *info.StreamSerializer
			ss.Serializer = leanEventDecoder{ss.Serializer}
			info.StreamSerializer = &ss
		}
		out[i] = info
	}
	return out
}

// leanEventDecoder reads a watch stream's frame (a metav1.WatchEvent) in
// place: the event's object bytes are the frame's, valid until the
// stream reads its next frame, by when client-go has decoded them
// (rest/watch.Decoder decodes the object right after the event).
type leanEventDecoder struct{ runtime.Serializer }

func (d leanEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	ev, ok := into.(*metav1.WatchEvent)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	typ, raw, ok := readWatchEvent(data)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	*ev = metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: raw}}
	return ev, nil, nil
}

// readWatchEvent reads a WatchEvent's type (field 1) and its object's
// raw bytes (field 2, a RawExtension whose field 1 is the bytes), in
// place. ok is false for anything else.
func readWatchEvent(b []byte) (typ string, raw []byte, ok bool) {
	var sawObject bool
	for len(b) > 0 {
		num, v, rest, ok := nextBytesField(b)
		if !ok {
			return "", nil, false
		}
		b = rest
		switch num {
		case 1:
			typ = string(v)
		case 2:
			r, ok := onlyField(v, 1)
			if !ok {
				return "", nil, false
			}
			raw, sawObject = r, true
		default:
			return "", nil, false
		}
	}
	return typ, raw, sawObject && typ != ""
}

// nextBytesField reads the first field of message b, which must be
// length-delimited (bytes, a string or a message): its number, its bytes
// (in place) and the rest of b. ok is false for another wire type or a
// torn field.
func nextBytesField(b []byte) (num protowire.Number, v, rest []byte, ok bool) {
	num, wt, n := protowire.ConsumeTag(b)
	if n < 0 || wt != protowire.BytesType {
		return 0, nil, nil, false
	}
	v, m := protowire.ConsumeBytes(b[n:])
	if m < 0 {
		return 0, nil, nil, false
	}
	return num, v, b[n+m:], true
}

// onlyField returns the bytes of message b's field num, when that is the
// one field b has (once, or not at all: empty).
func onlyField(b []byte, num protowire.Number) ([]byte, bool) {
	if len(b) == 0 {
		return nil, true
	}
	got, v, rest, ok := nextBytesField(b)
	if !ok || got != num || len(rest) > 0 {
		return nil, false
	}
	return v, true
}

// leanObjectDecoder decodes a protobuf Pod with decodeLeanPod, reading
// its envelope in place, its containers and tolerations through parts
// (nil: each decoded); everything else goes to client-go's decoder.
type leanObjectDecoder struct {
	runtime.Serializer
	parts *decodedParts
}

var podKind = corev1.SchemeGroupVersion.WithKind("Pod")

func (d leanObjectDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	p, isPod := into.(*corev1.Pod)
	if into != nil && !isPod {
		return d.Serializer.Decode(data, defaults, into)
	}
	apiVersion, kind, raw, ok := readEnvelope(data)
	if !ok || kind != "Pod" || apiVersion != "v1" {
		return d.Serializer.Decode(data, defaults, into)
	}
	out := p
	if out == nil {
		out = &corev1.Pod{}
	} else {
		*out = corev1.Pod{}
	}
	if !decodeLeanPod(out, raw, d.parts) {
		return d.Serializer.Decode(data, defaults, into)
	}
	out.APIVersion, out.Kind = apiVersion, kind
	gvk := podKind
	return out, &gvk, nil
}

// readEnvelope reads a Kubernetes protobuf body (the magic, then a
// runtime.Unknown) in place: its type and raw object. ok is false for a
// body it cannot read, or one with a content encoding.
func readEnvelope(data []byte) (apiVersion, kind string, raw []byte, ok bool) {
	if !bytes.HasPrefix(data, protobufMagic) {
		return "", "", nil, false
	}
	b := data[len(protobufMagic):]
	for len(b) > 0 {
		num, v, rest, ok := nextBytesField(b)
		if !ok {
			return "", "", nil, false
		}
		b = rest
		switch num {
		case 1: // typeMeta: apiVersion (1), kind (2)
			for len(v) > 0 {
				tn, s, rest, ok := nextBytesField(v)
				if !ok {
					return "", "", nil, false
				}
				v = rest
				switch tn {
				case 1:
					apiVersion = string(s)
				case 2:
					kind = string(s)
				}
			}
		case 2:
			raw = v
		case 3, 4: // contentEncoding, contentType
			if num == 3 && len(v) > 0 {
				return "", "", nil, false
			}
		default:
			return "", "", nil, false
		}
	}
	return apiVersion, kind, raw, true
}

// metaManagedFields is ObjectMeta's field number of managedFields.
const metaManagedFields = 17

// decodeLeanPod decodes a Pod's protobuf bytes into p (zero) as its
// generated Unmarshal does, but only the lean pod's fields (leanpod.go):
// the metadata's managedFields and what the Scheduler never reads of the
// spec and status are skipped. False when b is not a Pod it can read (p
// is then garbage).
func decodeLeanPod(p *corev1.Pod, b []byte, parts *decodedParts) bool {
	for len(b) > 0 {
		num, v, rest, ok := nextBytesField(b)
		if !ok {
			return false
		}
		b = rest
		var err error
		switch num {
		case 1:
			err = decodeKeeping(&p.ObjectMeta, v, leanMetaFields, 0, nil)
		case 2:
			err = decodeLeanSpec(&p.Spec, v, parts)
		case 3:
			err = decodeLeanStatus(&p.Status, v)
		default:
			return false
		}
		if err != nil {
			return false
		}
	}
	return true
}

// leanClient is a REST client for the core group that decodes through
// leanCodecs, over cs's HTTP client (its connection) where cs is a
// clientset of client-go's REST clients.
func leanClient(cfg *rest.Config, cs kubernetes.Interface) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c.NegotiatedSerializer = leanCodecs{scheme.Codecs.WithoutConversion(), &decodedParts{}}
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if rc := coreRESTClient(cs); rc != nil {
		return rest.RESTClientForConfigAndClient(c, rc.Client)
	}
	return rest.RESTClientFor(c)
}

// leanInformer lists and watches resource ("pods") of every namespace
// through rc, as client-go's informer for obj does through the clientset
// (cs says whether watch-list streams are supported), with indexers.
func leanInformer(rc rest.Interface, cs kubernetes.Interface, resource string, obj, list runtime.Object, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	timeout := func(opts metav1.ListOptions) time.Duration {
		if opts.TimeoutSeconds != nil {
			return time.Duration(*opts.TimeoutSeconds) * time.Second
		}
		return 0
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			out := list.DeepCopyObject()
			err := rc.Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeout(opts)).Do(ctx).Into(out)
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.Watch = true
			return rc.Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeout(opts)).Watch(ctx)
		},
	}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, cs), obj,
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: indexers})
}
