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
//	            Bind (BindClientGo), the poster (BindPoster) or the
//	            poster over an HTTP/2 connection of its own (BindH2)
//	poster      the Bindings posted without client-go's request builder,
//	            over the clientset's HTTP client (bindpost.go)
//	h2 binder   the poster's HTTP/2 connection of its own: each Binding's
//	            frames written by its bind worker, the answers read by one
//	            goroutine (h2bind.go, h2read.go); where the configuration
//	            asks for what only client-go's transport does, the poster
//	            sends
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
	"errors"
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
	// BindH2 is the poster over an HTTP/2 connection of its own
	// (h2bind.go), where the configuration allows it; elsewhere the
	// poster sends (NewBinder says why).
	BindH2 BindVia = "h2"
)

// BindVias are the values BindVia takes, stock first.
var BindVias = []BindVia{BindClientGo, BindPoster, BindH2}

// ParseBindVia reads a --bind-via value.
func ParseBindVia(s string) (BindVia, error) {
	for _, v := range BindVias {
		if string(v) == s {
			return v, nil
		}
	}
	return "", fmt.Errorf("--bind-via: %q is not one of client-go, poster, h2", s)
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
func Fast() Options { return Options{BindVia: BindH2, LeanWatch: true, GatherWrites: true} }

// Stock is client-go's paths only.
func Stock() Options { return Options{BindVia: BindClientGo} }

// Binder posts pods' Bindings. Bind may be called from many goroutines.
type Binder interface {
	// Bind posts pod ns/name's (of uid) Binding to node, with annotations
	// (nil: none). Failures come back as client-go's do (apierrors'
	// StatusError from the API server's Status: IsConflict, IsNotFound,
	// IsTooManyRequests hold); Transient says which may go away by
	// themselves besides those.
	Bind(ctx context.Context, ns, name string, uid types.UID, node string, annotations map[string]string) error
	// Close ends what the binder holds (the h2 binder's connection and
	// its reader). Call it once, after the last Bind returned.
	Close()
}

// Transient reports whether err is a Binding that failed on the wire in
// a way sending it again may mend: the h2 binder's connection went away
// before the Binding was processed, or before its answer came (a retry
// then meets "already assigned" if it was bound).
func Transient(err error) bool {
	return errors.Is(err, errH2Lost) || errors.Is(err, errH2Unsent)
}

// BinderOptions are NewBinder's optional parts.
type BinderOptions struct {
	// Observe, when set, counts the h2 binder's connection events
	// (ConnEvents).
	Observe func(event string)
}

// ConnEvents are what BinderOptions.Observe is told of an h2 binder's
// connection.
func ConnEvents() []string { return append([]string(nil), h2ConnEvents...) }

// NewBinder returns the binder via asks for over cs, whose configuration
// is cfg (the h2 binder dials with it). The poster and the h2 binder need
// cs to be a clientset of client-go's REST clients; a fake one is an
// error. The h2 binder runs only where cfg sets nothing but what it
// honours (an allow-list), DISABLE_HTTP2 is unset and no proxy is asked
// for; elsewhere the poster sends, and fallback says why ("" when via
// runs as asked): the caller logs it.
func NewBinder(via BindVia, cs kubernetes.Interface, cfg *rest.Config, opt BinderOptions) (b Binder, fallback string, err error) {
	switch via {
	case "", BindClientGo:
		return clientGoBinder{cs}, "", nil
	case BindPoster, BindH2:
	default:
		return nil, "", fmt.Errorf("--bind-via: %q is not one of client-go, poster, h2", via)
	}
	p := newBindPoster(cs)
	if p == nil {
		return nil, "", fmt.Errorf("--bind-via=%s: the client is not a clientset of client-go's REST clients with an HTTP client and a host", via)
	}
	if via == BindPoster {
		return p, "", nil
	}
	h2, why := newH2Binder(cfg, p.base)
	if h2 == nil {
		return p, "the HTTP/2 binder does not run: " + why + "; the poster sends over client-go's transport", nil
	}
	h2.observe = opt.Observe
	p.h2 = h2
	return p, "", nil
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

func (clientGoBinder) Close() {}

// Bind is the Binder's (see bind).
func (p *bindPoster) Bind(ctx context.Context, ns, name string, uid types.UID, node string, annotations map[string]string) error {
	return p.bind(ctx, ns, name, uid, node, annotations)
}

// Close ends the h2 binder's connection, if any.
func (p *bindPoster) Close() {
	if p.h2 != nil {
		p.h2.close()
	}
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
