package kube

// Metrics behind the API server's authentication and authorization, as
// kube-scheduler's secure port and controller-runtime's secure metrics
// serve them. A scrape of /metrics carries a bearer token (Prometheus'
// ServiceAccount token). hetsched asks the API server who it belongs to
// (a TokenReview) and whether that user may GET the path (a
// SubjectAccessReview of a non-resource URL), and serves it only then:
// 401 without a token the API server accepts, 403 for a user it does not
// authorize, 503 when the API server cannot say. /healthz stays open: a
// probe carries no token, and it says "ok" and nothing else. Verdicts are
// cached for metricsReviewTTL per token and path (at most
// metricsReviewMax entries), so a scrape every few seconds costs the API
// server two small requests every ten seconds. A token not in the cache
// is reviewed only within its client address's budget (metricsReviewRate,
// burst metricsReviewBurst): past it the answer is 429 with Retry-After,
// so random tokens from one address cannot turn into as many reviews. With this on, the port
// speaks TLS only (a token never crosses the network in the clear): the
// certificate of --tls-cert and --tls-key, else one made in memory at
// start (self-signed, as kube-scheduler makes when given none).

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/hetsched/hetsched/internal/certs"
	"github.com/hetsched/hetsched/internal/errs"
	"github.com/hetsched/hetsched/internal/netaddr"
)

// Metrics authentication modes (Options.MetricsAuth).
const (
	// MetricsAuthAuto is MetricsAuthKubernetes unless the listen address
	// is a loopback one (then MetricsAuthNone): the default.
	MetricsAuthAuto = "auto"
	// MetricsAuthKubernetes asks the API server about every token.
	MetricsAuthKubernetes = "kubernetes"
	// MetricsAuthNone serves /metrics to anyone who reaches the port.
	MetricsAuthNone = "none"
)

const (
	metricsReviewTTL     = 10 * time.Second
	metricsReviewMax     = 1024
	metricsReviewTimeout = 5 * time.Second
	maxBearerToken       = 16 << 10
	// Reviews of tokens not in the cache, per client address: a scraper
	// needs one every metricsReviewTTL.
	metricsReviewRate  = rate.Limit(2)
	metricsReviewBurst = 10
	metricsAddrMax     = 4096
)

// metricsAuthMode resolves mode for a listen address, or says why it is
// not one.
func metricsAuthMode(mode, listen string) (string, error) {
	switch mode {
	case "", MetricsAuthAuto:
		if netaddr.Loopback(listen) {
			return MetricsAuthNone, nil
		}
		return MetricsAuthKubernetes, nil
	case MetricsAuthKubernetes, MetricsAuthNone:
		return mode, nil
	}
	return "", errs.Invalid("metrics-auth", "must be auto, kubernetes or none, got %q", mode)
}

// metricsTLS is the TLS of an authenticated metrics port: the given
// files (reloaded when they change), else a self-signed certificate made
// now.
func metricsTLS(certFile, keyFile string) (*tls.Config, error) {
	if certFile != "" || keyFile != "" {
		return certs.ServerTLSConfig(certFile, keyFile, "")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: "hetsched-kube-metrics"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(365 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	pair := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	return &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}, Certificates: []tls.Certificate{pair}}, nil
}

// metricsReviewer authenticates and authorizes scrapes through the API
// server.
type metricsReviewer struct {
	cs  kubernetes.Interface
	now func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]metricsVerdict
	// addrs are the client addresses' review budgets (at most
	// metricsAddrMax; full ones are dropped first when there are more).
	addrs map[string]*rate.Limiter
}

// metricsVerdict is a cached answer: the HTTP status (200 allowed) and
// until when it holds.
type metricsVerdict struct {
	code  int
	until time.Time
}

func newMetricsReviewer(cs kubernetes.Interface) *metricsReviewer {
	return &metricsReviewer{cs: cs, now: time.Now, cache: map[[32]byte]metricsVerdict{}, addrs: map[string]*rate.Limiter{}}
}

// wrap serves next only to requests the API server authorizes.
func (rv *metricsReviewer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearerToken(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hetsched"`)
			http.Error(w, "hetsched: "+r.URL.Path+" needs a bearer token the Kubernetes API server accepts", http.StatusUnauthorized)
			return
		}
		switch code := rv.review(r.Context(), clientHost(r), tok, r.URL.Path); code {
		case http.StatusOK:
			next.ServeHTTP(w, r)
		case http.StatusTooManyRequests:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "hetsched: too many tokens to review from this address; try again later", code)
		case http.StatusUnauthorized:
			w.Header().Set("WWW-Authenticate", `Bearer realm="hetsched"`)
			http.Error(w, "hetsched: the Kubernetes API server does not accept this token", code)
		case http.StatusForbidden:
			http.Error(w, "hetsched: this user may not get "+r.URL.Path+" (a ClusterRole with nonResourceURLs ["+r.URL.Path+"] and verb get grants it)", code)
		default:
			http.Error(w, "hetsched: the Kubernetes API server could not review this token; try again", code)
		}
	})
}

// bearerToken is the request's bearer token, when it has one of a sane
// size.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "Bearer "
	if len(h) <= len(p) || len(h) > len(p)+maxBearerToken || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	tok := strings.TrimSpace(h[len(p):])
	return tok, tok != ""
}

// clientHost is the address a request came from, without its port.
func clientHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// review is the status a request from host with tok for path gets: from
// the cache, else, within host's budget (429 past it), from a
// TokenReview and a SubjectAccessReview. Failures to ask are not cached.
func (rv *metricsReviewer) review(ctx context.Context, host, tok, path string) int {
	key := sha256.Sum256([]byte(path + "\x00" + tok))
	now := rv.now()
	rv.mu.Lock()
	v, ok := rv.cache[key]
	cached := ok && now.Before(v.until)
	allowed := cached || rv.budget(host).AllowN(now, 1)
	rv.mu.Unlock()
	switch {
	case cached:
		return v.code
	case !allowed:
		return http.StatusTooManyRequests
	}
	code := rv.ask(ctx, tok, path)
	if code == http.StatusServiceUnavailable {
		return code
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if len(rv.cache) >= metricsReviewMax {
		for k, old := range rv.cache {
			if !now.Before(old.until) {
				delete(rv.cache, k)
			}
		}
		if len(rv.cache) >= metricsReviewMax {
			clear(rv.cache) // bounded: many live tokens at once start over
		}
	}
	rv.cache[key] = metricsVerdict{code: code, until: now.Add(metricsReviewTTL)}
	return code
}

// budget is host's review budget (under mu).
func (rv *metricsReviewer) budget(host string) *rate.Limiter {
	l, ok := rv.addrs[host]
	if ok {
		return l
	}
	if len(rv.addrs) >= metricsAddrMax {
		// Bounded: the addresses with a full budget lose nothing.
		now := rv.now()
		for h, x := range rv.addrs {
			if x.TokensAt(now) >= metricsReviewBurst {
				delete(rv.addrs, h)
			}
		}
		if len(rv.addrs) >= metricsAddrMax {
			clear(rv.addrs)
		}
	}
	l = rate.NewLimiter(metricsReviewRate, metricsReviewBurst)
	rv.addrs[host] = l
	return l
}

// ask is one review by the API server.
func (rv *metricsReviewer) ask(ctx context.Context, tok, path string) int {
	ctx, cancel := context.WithTimeout(ctx, metricsReviewTimeout)
	defer cancel()
	tr, err := rv.cs.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: tok}}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusServiceUnavailable
	}
	if !tr.Status.Authenticated {
		return http.StatusUnauthorized
	}
	u := tr.Status.User
	extra := make(map[string]authzv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = authzv1.ExtraValue(v)
	}
	sar, err := rv.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return http.StatusServiceUnavailable
	}
	if !sar.Status.Allowed {
		return http.StatusForbidden
	}
	return http.StatusOK
}
