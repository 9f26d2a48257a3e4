// Package kubewire is hetsched kube's own Kubernetes client machinery,
// behind one seam: how a pod's Binding is posted (a Binder), how Pods
// are listed and watched (PodInformer), and how the API server
// connection writes (GatheringDial). Each piece is chosen by Options, and
// client-go's stock path is always one option away (Stock): the
// scheduler's files hold no wire code.
//
// Glossary:
//
//	binder      posts a pod's Binding (Binder): through client-go's
//	            Bind (BindClientGo) or the poster (BindPoster)
//	poster      the Bindings posted without client-go's request builder,
//	            over the clientset's HTTP client (bindpost.go)
//	lean watch  the Pod informer's own REST client, whose protobuf
//	            decoders read watch events in place and leave managedFields
//	            undecoded (leanwatch.go, leanpod.go)
//	decoded     the lean decoder's lists of containers, init containers
//	parts       and tolerations, each decoded once per distinct bytes and
//	            shared by the pods that carry them (leanparts.go)
//	gathering   the API server connection's writes gathered into one
//	dial        system call while one is in the kernel, its reads taking
//	            what the socket holds at once (coalesce.go)
package kubewire

import (
	"context"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// BindVia says how Bindings are posted.
type BindVia string

const (
	// BindClientGo posts through client-go's Pods(ns).Bind: the stock path.
	BindClientGo BindVia = "client-go"
	// BindPoster encodes and posts them itself over the clientset's HTTP
	// client and rate limiter (bindpost.go).
	BindPoster BindVia = "poster"
)

// BindVias are the values BindVia takes, stock first. (An HTTP/2
// connection of the Bindings' own was removed in issue 42: side by side on
// the realistic mix it cost 1.01–1.07 of the poster's CPU per pod.)
var BindVias = []BindVia{BindClientGo, BindPoster}

// ParseBindVia reads a --bind-via value.
func ParseBindVia(s string) (BindVia, error) {
	for _, v := range BindVias {
		if string(v) == s {
			return v, nil
		}
	}
	return "", fmt.Errorf("--bind-via: %q is not one of client-go, poster", s)
}

// Options choose the pieces. The zero value is client-go's stock paths.
type Options struct {
	// BindVia is how Bindings are posted ("": BindClientGo).
	BindVia BindVia
	// LeanWatch lists and watches Pods through the lean watch's own REST
	// client (PodInformer); off: client-go's informer.
	LeanWatch bool
	// GatherWrites dials the API server through GatheringDial; off:
	// client-go's dialer.
	GatherWrites bool
}

// Fast is every piece on: hetsched kube's default.
func Fast() Options { return Options{BindVia: BindPoster, LeanWatch: true, GatherWrites: true} }

// Stock is client-go's paths only.
func Stock() Options { return Options{BindVia: BindClientGo} }

// Binder posts pods' Bindings. Bind may be called from many goroutines.
type Binder interface {
	// Bind posts pod ns/name's (of uid) Binding to node, with annotations
	// (nil: none). Failures come back as client-go's do (apierrors'
	// StatusError from the API server's Status: IsConflict, IsNotFound,
	// IsTooManyRequests hold).
	Bind(ctx context.Context, ns, name string, uid types.UID, node string, annotations map[string]string) error
}

// NewBinder returns the binder via asks for over cs. The poster needs cs
// to be a clientset of client-go's REST clients; a fake one is an error.
func NewBinder(via BindVia, cs kubernetes.Interface) (Binder, error) {
	switch via {
	case "", BindClientGo:
		return clientGoBinder{cs}, nil
	case BindPoster:
		if p := newBindPoster(cs); p != nil {
			return p, nil
		}
		return nil, fmt.Errorf("--bind-via=%s: the client is not a clientset of client-go's REST clients with an HTTP client and a host", via)
	}
	return nil, fmt.Errorf("--bind-via: %q is not one of client-go, poster", via)
}

// clientGoBinder is BindClientGo.
type clientGoBinder struct{ cs kubernetes.Interface }

func (c clientGoBinder) Bind(ctx context.Context, ns, name string, uid types.UID, node string, annotations map[string]string) error {
	b := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid, Annotations: annotations},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}
	return c.cs.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{})
}

// Bind is the Binder's (see bind).
func (p *bindPoster) Bind(ctx context.Context, ns, name string, uid types.UID, node string, annotations map[string]string) error {
	return p.bind(ctx, ns, name, uid, node, annotations)
}

// PodInformer returns the lean watch's Pod informer constructor over cfg
// (a REST client of its own for the core group, sharing cs's HTTP client
// where cs is client-go's), for an informer factory's InformerFor: Pods
// of every namespace, indexed by namespace (add more with AddIndexers
// before the informer starts).
func PodInformer(cfg *rest.Config, cs kubernetes.Interface) (internalinterfaces.NewInformerFunc, error) {
	rc, err := leanClient(cfg, cs)
	if err != nil {
		return nil, err
	}
	return func(cs kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return leanInformer(rc, cs, "pods", &corev1.Pod{}, &corev1.PodList{}, resync,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	}, nil
}

// LeanPod trims p to what a scheduler reads of a cached pod (leanpod.go):
// an informer's transform.
func LeanPod(p *corev1.Pod) { leanPod(p) }

// GatheringDial is d's dialer with the connection's writes gathered
// (coalesce.go), for a rest.Config's Dial.
func GatheringDial(d *net.Dialer) func(ctx context.Context, network, address string) (net.Conn, error) {
	return coalescingDial(d)
}

// DecodePod decodes a Pod's protobuf bytes (no envelope) into p (zero) as
// the lean watch does: only the lean pod's fields. False when b is not a
// Pod it can read (p is then garbage).
func DecodePod(p *corev1.Pod, b []byte) bool { return decodeLeanPod(p, b, nil) }
