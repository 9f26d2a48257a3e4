package kube_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hetsched/hetsched/internal/kube"
	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// checkReviewedMetrics runs `hetsched kube` as the manifests' ServiceAccount
// with --metrics-auth kubernetes and scrapes it: no token or a token the
// API server does not accept gets 401, a user without
// hetsched-metrics-reader 403, one bound to it the metrics; /healthz needs
// no token; the port speaks TLS only. c runs with RBAC and the manifests
// applied.
func checkReviewedMetrics(t *testing.T, ctx context.Context, c *kubetest.Cluster, admin kubernetes.Interface) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, ai := range cfg.AuthInfos {
		ai.Impersonate = "system:serviceaccount:hetsched-system:hetsched"
	}
	kc := filepath.Join(t.TempDir(), "as-hetsched.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, kc); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- kube.Run(rctx, io.Discard, kube.Options{Kubeconfig: kc, QPS: 50, Burst: 100, SchedulerName: "metrics-only",
			BindWorkers: 4, Listen: "127.0.0.1:0", MetricsAuth: kube.MetricsAuthKubernetes, Ready: func(a string) { ready <- a }, Wire: testWire(t)})
	}()
	defer func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("hetsched kube: %v", err)
		}
	}()
	var addr string
	select {
	case u := <-ready:
		var ok bool
		if addr, ok = strings.CutPrefix(u, "https://"); !ok {
			t.Fatalf("the metrics port's URL %q: want https:// (it speaks TLS)", u)
		}
	case err := <-done:
		t.Fatalf("hetsched kube ended before serving: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("no metrics port after 30 s")
	}

	token := func(sa string, bind bool) string {
		if _, err := admin.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if bind {
			if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa + "-metrics"},
				RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "hetsched-metrics-reader"},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: "default"}}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		exp := int64(600)
		tr, err := admin.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	prom, nosy := token("prom", true), token("nosy", false)

	// The certificate is self-signed: a scraper skips verifying it, as
	// Prometheus does for kube-scheduler's.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(scheme, path, tok string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+addr+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct {
		what, path, tok string
		code            int
		body            string
	}{
		{"no token", "/metrics", "", http.StatusUnauthorized, "needs a bearer token"},
		{"a token the API server does not know", "/metrics", "not-a-token", http.StatusUnauthorized, "does not accept"},
		{"a ServiceAccount without the role", "/metrics", nosy, http.StatusForbidden, "may not get /metrics"},
		{"a ServiceAccount bound to hetsched-metrics-reader", "/metrics", prom, http.StatusOK, "go_goroutines"},
		{"the same again (the cached verdict)", "/metrics", prom, http.StatusOK, "go_goroutines"},
		{"the probe, without a token", "/healthz", "", http.StatusOK, "ok"},
	} {
		code, body := get("https", tc.path, tc.tok)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("%s: GET %s got %d %q, want %d with %q", tc.what, tc.path, code, firstLine(body), tc.code, tc.body)
		}
	}
	if code, body := get("http", "/metrics", prom); code == http.StatusOK {
		t.Errorf("plain HTTP with a token got %d %q: a token would cross the network in the clear", code, firstLine(body))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
