package agent

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hetsched/hetsched/internal/errs"
)

// TestClientSpeaksHTTP2OverTLS: the agent's client negotiates HTTP/2 by
// ALPN with an https:// server (its unary calls and its stream share the
// transport), and refuses TLS settings for an http:// server.
func TestClientSpeaksHTTP2OverTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"proto": r.ProtoMajor})
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c, err := newClient(srv.URL, "", &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Proto int }
	if err := c.do(context.Background(), http.MethodGet, "/x", nil, &out); err != nil || out.Proto != 2 {
		t.Fatalf("over TLS: %v, HTTP/%d", err, out.Proto)
	}
	// Without the CA the failure names --ca.
	c2, _ := newClient(srv.URL, "", &tls.Config{})
	if err := c2.do(context.Background(), http.MethodGet, "/x", nil, nil); err == nil || !strings.Contains(err.Error(), "check --ca") {
		t.Fatalf("unknown CA: %v", err)
	}
	if _, err := newClient(strings.Replace(srv.URL, "https://", "http://", 1), "", &tls.Config{}); errs.FieldOf(err) != "server" {
		t.Fatalf("TLS for http://: %v", err)
	}
}
