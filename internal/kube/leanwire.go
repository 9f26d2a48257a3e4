package kube

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

// The lean watch: Pods and Nodes listed and watched with the fields the
// informers' transform drops anyway (stripManagedFields: every object's
// managedFields, a Node's image list) skipped in the protobuf bytes,
// before client-go decodes them. A Pod's managedFields are over half of
// its bytes as the API server sends it (1,089 of 1,866 for a benchmark
// pod once KWOK ran it) and a fifth of its decoding's allocations; the
// objects in the informers' caches are the same either way.
//
// Only protobuf responses are filtered; JSON (and anything this code does
// not recognise) is decoded unchanged, and the transform still strips
// what a JSON response carried.

// protobufPrefix starts every Kubernetes protobuf object (the
// runtime.Unknown envelope follows).
var protobufPrefix = []byte{0x6b, 0x38, 0x73, 0x00} // "k8s\x00"

// Field numbers (k8s.io/api and apimachinery generated.proto).
const (
	unknownTypeMeta  = 1 // runtime.Unknown
	unknownRaw       = 2
	unknownEncoding  = 3
	typeMetaKind     = 2 // runtime.TypeMeta
	objectMetadata   = 1 // Pod, Node: metadata; their lists: metadata (a ListMeta)
	objectStatus     = 3 // Pod, Node: status
	listItems        = 2 // PodList, NodeList: items
	metaManaged      = 17
	nodeStatusImages = 8
)

// leanWire returns data, a protobuf Pod, Node or list of either, with
// the dropped fields left out; anything else, or bytes it cannot parse
// (the decoder then reports them), comes back as it was.
func leanWire(data []byte) []byte {
	if !bytes.HasPrefix(data, protobufPrefix) {
		return data
	}
	env := data[len(protobufPrefix):]
	kind, raw, rawAt, ok := envelope(env)
	if !ok {
		return data
	}
	var lean []byte
	switch kind {
	case "Pod":
		lean, ok = leanObject(raw, false)
	case "Node":
		lean, ok = leanObject(raw, true)
	case "PodList":
		lean, ok = leanList(raw, false)
	case "NodeList":
		lean, ok = leanList(raw, true)
	default:
		return data
	}
	if !ok || len(lean) == len(raw) {
		return data
	}
	// The envelope again, its raw field replaced.
	out := make([]byte, 0, len(data)-len(raw)+len(lean))
	out = append(out, protobufPrefix...)
	out = append(out, env[:rawAt.start]...)
	out = protowire.AppendTag(out, unknownRaw, protowire.BytesType)
	out = protowire.AppendBytes(out, lean)
	return append(out, env[rawAt.end:]...)
}

// span is where a field (tag included) lies in its message.
type span struct{ start, end int }

// envelope finds a runtime.Unknown's kind and raw bytes; ok is false when
// it is malformed, has no raw field, or its raw bytes are encoded
// (contentEncoding set).
func envelope(b []byte) (kind string, raw []byte, at span, ok bool) {
	seen := false
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return "", nil, span{}, false
		}
		start := i
		i += n
		if typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b[i:])
			if m < 0 {
				return "", nil, span{}, false
			}
			i += m
			continue
		}
		v, m := protowire.ConsumeBytes(b[i:])
		if m < 0 {
			return "", nil, span{}, false
		}
		i += m
		switch num {
		case unknownTypeMeta:
			if kind, ok = field(v, typeMetaKind); !ok {
				return "", nil, span{}, false
			}
		case unknownRaw:
			if seen {
				return "", nil, span{}, false // twice: left to the decoder
			}
			seen, raw, at = true, v, span{start, i}
		case unknownEncoding:
			if len(v) > 0 {
				return "", nil, span{}, false
			}
		}
	}
	return kind, raw, at, seen
}

// field is the last value of a message's string field num.
func field(b []byte, num protowire.Number) (string, bool) {
	var out string
	for i := 0; i < len(b); {
		n, typ, k := protowire.ConsumeTag(b[i:])
		if k < 0 {
			return "", false
		}
		i += k
		m := protowire.ConsumeFieldValue(n, typ, b[i:])
		if m < 0 {
			return "", false
		}
		if n == num && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[i:])
			out = string(v)
		}
		i += m
	}
	return out, true
}

// leanObject is a Pod (or a Node) without its metadata's managedFields
// (and a Node's status without its images).
func leanObject(b []byte, node bool) ([]byte, bool) {
	return rewrite(b, func(num protowire.Number, v []byte) ([]byte, bool, bool) {
		switch {
		case num == objectMetadata:
			return drop(v, metaManaged)
		case num == objectStatus && node:
			return drop(v, nodeStatusImages)
		}
		return nil, false, true
	})
}

// leanList is a list with each item lean.
func leanList(b []byte, node bool) ([]byte, bool) {
	return rewrite(b, func(num protowire.Number, v []byte) ([]byte, bool, bool) {
		if num != listItems {
			return nil, false, true
		}
		lean, ok := leanObject(v, node)
		return lean, ok, ok
	})
}

// drop is message b without its fields num.
func drop(b []byte, num protowire.Number) ([]byte, bool, bool) {
	out, ok := rewrite(b, func(n protowire.Number, _ []byte) ([]byte, bool, bool) {
		return nil, n == num, true
	})
	return out, ok, ok
}

// rewrite copies message b, a field at a time. For each length-delimited
// field, edit says what becomes of it: its new value (replace), dropped
// (value nil, replace true), or kept as it is (replace false); ok false
// means b is malformed. Other fields are copied unchanged. rewrite
// returns b itself when nothing changed.
func rewrite(b []byte, edit func(num protowire.Number, v []byte) (value []byte, replace, ok bool)) ([]byte, bool) {
	var out []byte // nil until a field changes
	for i := 0; i < len(b); {
		num, typ, n := protowire.ConsumeTag(b[i:])
		if n < 0 {
			return nil, false
		}
		start := i
		i += n
		if typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, b[i:])
			if m < 0 {
				return nil, false
			}
			i += m
			if out != nil {
				out = append(out, b[start:i]...)
			}
			continue
		}
		v, m := protowire.ConsumeBytes(b[i:])
		if m < 0 {
			return nil, false
		}
		i += m
		value, replace, ok := edit(num, v)
		if !ok {
			return nil, false
		}
		if replace && value != nil && len(value) == len(v) {
			replace = false // nothing was left out of it
		}
		switch {
		case !replace:
			if out != nil {
				out = append(out, b[start:i]...)
			}
		case out == nil:
			out = append(make([]byte, 0, len(b)), b[:start]...)
			fallthrough
		default:
			if value != nil {
				out = protowire.AppendTag(out, num, protowire.BytesType)
				out = protowire.AppendBytes(out, value)
			}
		}
	}
	if out == nil {
		return b, true
	}
	return out, true
}

// leanCodecs is client-go's codecs with leanDecoder in front of each
// serializer's decoding (of objects; watch events' frames are decoded as
// before, and their objects by these decoders).
type leanCodecs struct{ runtime.NegotiatedSerializer }

func (c leanCodecs) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := c.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	for i, info := range infos {
		if info.Serializer != nil {
			info.Serializer = leanDecoder{info.Serializer}
		}
		out[i] = info
	}
	return out
}

// leanDecoder decodes what leanWire makes of the bytes.
type leanDecoder struct{ runtime.Serializer }

func (d leanDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	return d.Serializer.Decode(leanWire(data), defaults, into)
}

// leanClient is a REST client for the core group that decodes through
// leanCodecs.
func leanClient(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &corev1.SchemeGroupVersion
	c.APIPath = "/api"
	c.NegotiatedSerializer = leanCodecs{scheme.Codecs.WithoutConversion()}
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientFor(c)
}

// leanInformer lists and watches resource ("pods", "nodes") of every
// namespace through rc, as client-go's informer for obj does through the
// clientset (cs says whether watch-list streams are supported).
func leanInformer(rc rest.Interface, cs kubernetes.Interface, resource string, obj, list runtime.Object, resync time.Duration) cache.SharedIndexInformer {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			out := list.DeepCopyObject()
			var timeout time.Duration
			if opts.TimeoutSeconds != nil {
				timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
			}
			err := rc.Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeout).Do(ctx).Into(out)
			return out, err
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			var timeout time.Duration
			if opts.TimeoutSeconds != nil {
				timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
			}
			opts.Watch = true
			return rc.Get().Resource(resource).VersionedParams(&opts, scheme.ParameterCodec).Timeout(timeout).Watch(ctx)
		},
	}
	lw.ListFunc = func(opts metav1.ListOptions) (runtime.Object, error) {
		return lw.ListWithContextFunc(context.Background(), opts)
	}
	lw.WatchFunc = func(opts metav1.ListOptions) (watch.Interface, error) {
		return lw.WatchFuncWithContext(context.Background(), opts)
	}
	// The factory's own informers index by namespace, Nodes too.
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	return cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(lw, cs), obj,
		cache.SharedIndexInformerOptions{ResyncPeriod: resync, Indexers: indexers})
}
