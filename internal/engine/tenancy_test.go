package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/api"
)

// TestTenantLabels: a tenant's task carries its tenant as a label, which it
// can neither forge nor clear; the default tenant's tasks carry none; the
// caller's map is never written.
func TestTenantLabels(t *testing.T) {
	for _, c := range []struct {
		tenant string
		in     map[string]string
		want   map[string]string
	}{
		{"team-a", nil, map[string]string{api.MetaTenant: "team-a"}},
		{"team-a", map[string]string{"app": "web", api.MetaTenant: "team-b"}, map[string]string{"app": "web", api.MetaTenant: "team-a"}},
		{DefaultTenant, map[string]string{"app": "web", api.MetaTenant: "team-b"}, map[string]string{"app": "web"}},
		{"", map[string]string{"app": "web"}, map[string]string{"app": "web"}},
		{"", nil, nil},
	} {
		before := cmp.Diff(map[string]string(nil), c.in)
		got := tenantLabels(c.tenant, c.in)
		if d := cmp.Diff(c.want, got); d != "" {
			t.Errorf("tenant %q, labels %v (-want +got):\n%s", c.tenant, c.in, d)
		}
		if after := cmp.Diff(map[string]string(nil), c.in); after != before {
			t.Errorf("tenant %q: the caller's map was written", c.tenant)
		}
	}
}
