package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Tokens not in the cache are reviewed within a budget per client
// address: 2,000 random tokens from one address cost the API server the
// burst's reviews, the rest get 429 with Retry-After; another address
// still has its own budget, a cached verdict needs none, and the budget
// comes back with time.
func TestMetricsReviewsPerAddressAreBounded(t *testing.T) {
	cs := fake.NewClientset()
	var reviews atomic.Int64
	cs.PrependReactor("create", "tokenreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
		reviews.Add(1)
		return true, &authnv1.TokenReview{}, nil // not authenticated
	})
	rv := newMetricsReviewer(cs)
	now := time.Unix(1000, 0)
	rv.now = func() time.Time { return now }
	h := rv.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	get := func(addr, tok string) *httptest.ResponseRecorder {
		req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, "/metrics", nil)
		req.RemoteAddr = addr
		req.Header.Set("Authorization", "Bearer "+tok)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	codes := map[int]int{}
	for i := range 2000 {
		w := get(fmt.Sprintf("10.0.0.1:%d", 40000+i%100), fmt.Sprintf("random-%d", i))
		codes[w.Code]++
		if w.Code == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
			t.Fatal("429 without Retry-After")
		}
	}
	if n := reviews.Load(); n != metricsReviewBurst || codes[http.StatusUnauthorized] != metricsReviewBurst || codes[http.StatusTooManyRequests] != 2000-metricsReviewBurst {
		t.Errorf("2,000 random tokens from one address: %d reviews, answers %v; want %d reviews", n, codes, metricsReviewBurst)
	}
	// A token reviewed already is answered from the cache, budget or not.
	if w := get("10.0.0.1:1", "random-0"); w.Code != http.StatusUnauthorized {
		t.Errorf("a cached verdict: %d", w.Code)
	}
	// Another address has its own budget.
	if w := get("10.0.0.2:1", "other"); w.Code != http.StatusUnauthorized {
		t.Errorf("another address: %d", w.Code)
	}
	// The budget refills.
	now = now.Add(time.Second)
	if w := get("10.0.0.1:1", "later"); w.Code != http.StatusUnauthorized {
		t.Errorf("a second later: %d", w.Code)
	}
	if n := reviews.Load(); n != metricsReviewBurst+2 {
		t.Errorf("%d reviews, want %d", n, metricsReviewBurst+2)
	}
}
