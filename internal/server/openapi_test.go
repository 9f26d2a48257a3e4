package server

import (
	"fmt"
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

// schemaKeywords are the members an OpenAPI 3 schema object may have.
var schemaKeywords = map[string]bool{"type": true, "format": true, "description": true, "properties": true, "items": true,
	"additionalProperties": true, "required": true, "enum": true, "default": true, "minimum": true, "maximum": true,
	"maxItems": true, "minItems": true, "maxProperties": true, "minProperties": true, "oneOf": true, "anyOf": true,
	"allOf": true, "$ref": true, "example": true, "pattern": true, "nullable": true, "readOnly": true, "writeOnly": true,
	"title": true, "maxLength": true, "minLength": true, "deprecated": true, "uniqueItems": true, "not": true,
	"exclusiveMinimum": true, "exclusiveMaximum": true, "multipleOf": true, "discriminator": true}

// responseKeywords are the members of a response object.
var responseKeywords = map[string]bool{"description": true, "content": true, "headers": true, "links": true, "$ref": true}

// parameterKeywords are the members of a parameter object.
var parameterKeywords = map[string]bool{"name": true, "in": true, "required": true, "schema": true, "description": true,
	"deprecated": true, "example": true, "style": true, "explode": true, "allowEmptyValue": true}

// TestOpenAPILints (issue 45 §3): every operation has a unique
// operationId, and no schema or parameter object has a member OpenAPI
// does not know: an unquoted description with a comma in a flow mapping
// ("{description: a, b}") becomes such a member and the text after the
// comma is lost.
func TestOpenAPILints(t *testing.T) {
	b, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	paths, _ := doc["paths"].(map[string]any)
	for p, item := range paths {
		for method, op := range item.(map[string]any) {
			if method == "parameters" {
				lintParameters(t, p+".parameters", op)
				continue
			}
			o := op.(map[string]any)
			id, _ := o["operationId"].(string)
			if id == "" {
				t.Errorf("%s %s has no operationId", strings.ToUpper(method), p)
			} else if other, dup := ids[id]; dup {
				t.Errorf("operationId %s is %s's and %s %s's", id, other, strings.ToUpper(method), p)
			}
			ids[id] = strings.ToUpper(method) + " " + p
			lintParameters(t, p+"."+method+".parameters", o["parameters"])
			responses, _ := o["responses"].(map[string]any)
			for code, r := range responses {
				for k := range r.(map[string]any) {
					if !responseKeywords[k] {
						t.Errorf("%s %s response %s: unknown member %q (a description cut at a comma?)", strings.ToUpper(method), p, code, k)
					}
				}
			}
			lintSchemas(t, p+"."+method, o, false)
		}
	}
	comps, _ := doc["components"].(map[string]any)
	schemas, _ := comps["schemas"].(map[string]any)
	for name, s := range schemas {
		lintSchemas(t, "components.schemas."+name, s, true)
	}
}

func lintParameters(t *testing.T, at string, v any) {
	list, _ := v.([]any)
	for i, p := range list {
		m, _ := p.(map[string]any)
		for k := range m {
			if !parameterKeywords[k] {
				t.Errorf("%s[%d]: unknown member %q (a description cut at a comma?)", at, i, k)
			}
		}
		lintSchemas(t, at, m["schema"], true)
	}
}

// lintSchemas checks v, a schema when isSchema, else an object holding
// schemas deeper (operations, responses, content).
func lintSchemas(t *testing.T, at string, v any, isSchema bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if isSchema && !schemaKeywords[k] {
				t.Errorf("%s: unknown schema member %q (a description cut at a comma?)", at, k)
			}
			switch {
			case isSchema && k == "properties":
				props, _ := x.(map[string]any)
				for name, p := range props {
					lintSchemas(t, at+".properties."+name, p, true)
				}
			case isSchema && (k == "example" || k == "default" || k == "enum"):
			case k == "schema" || isSchema && (k == "items" || k == "additionalProperties" || k == "not"):
				lintSchemas(t, at+"."+k, x, true)
			case isSchema && (k == "allOf" || k == "oneOf" || k == "anyOf"):
				for i, s := range x.([]any) {
					lintSchemas(t, fmt.Sprintf("%s.%s[%d]", at, k, i), s, true)
				}
			case !isSchema:
				lintSchemas(t, at+"."+k, x, false)
			}
		}
	case []any:
		for i, x := range v {
			lintSchemas(t, fmt.Sprintf("%s[%d]", at, i), x, isSchema)
		}
	}
}
