package server

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// TestOpenAPIMatchesRoutes fails when a served route is missing from
// docs/openapi.yaml or the document names a route that is not served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	b, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			if method == "parameters" {
				continue
			}
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	served := New(nil, "", nil, nil, nil, nil).Routes()
	sort.Strings(documented)
	sort.Strings(served)
	if d := cmp.Diff(served, documented); d != "" {
		t.Errorf("served routes (-) and docs/openapi.yaml (+) differ:\n%s", d)
	}
}
