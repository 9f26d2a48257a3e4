package kube

import (
	"net/http"
	"strings"
	"testing"
)

// The default guards /metrics wherever it can be reached from another
// machine; a bad mode is an error naming the flag; a token is read only
// from a well-formed, bounded Authorization header.
func TestMetricsAuthModeAndBearer(t *testing.T) {
	for _, tc := range []struct{ mode, listen, want string }{
		{"", "127.0.0.1:7075", MetricsAuthNone},
		{"auto", "localhost:7075", MetricsAuthNone},
		{"", "[::1]:7075", MetricsAuthNone},
		{"", "0.0.0.0:7075", MetricsAuthKubernetes},
		{"", ":7075", MetricsAuthKubernetes},
		{"", "10.0.0.5:7075", MetricsAuthKubernetes},
		{"", "hetsched.example:7075", MetricsAuthKubernetes},
		{"none", "0.0.0.0:7075", MetricsAuthNone},
		{"kubernetes", "127.0.0.1:0", MetricsAuthKubernetes},
	} {
		got, err := metricsAuthMode(tc.mode, tc.listen)
		if err != nil || got != tc.want {
			t.Errorf("metricsAuthMode(%q, %q) = %q, %v; want %q", tc.mode, tc.listen, got, err, tc.want)
		}
	}
	if _, err := metricsAuthMode("basic", "0.0.0.0:1"); err == nil || !strings.Contains(err.Error(), "metrics-auth") {
		t.Errorf("a bad mode: %v, want an error naming metrics-auth", err)
	}
	for _, tc := range []struct {
		header, tok string
		ok          bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer  abc ", "abc", true},
		{"Basic abc", "", false},
		{"Bearer ", "", false},
		{"Bearer    ", "", false},
		{"", "", false},
		{"Bearer " + strings.Repeat("x", maxBearerToken+1), "", false},
	} {
		r, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		tok, ok := bearerToken(r)
		if tok != tc.tok || ok != tc.ok {
			t.Errorf("bearerToken(%.20q) = %q, %v; want %q, %v", tc.header, tok, ok, tc.tok, tc.ok)
		}
	}
}
