package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
)

// lintChart runs Helm's linter (as `helm lint --strict`: a warning fails
// too) with the values files, renders the chart as `helm install` would
// (the templates' own refusals), then checks the chart's own rules: every
// value of values.yaml is documented by a comment and named by the schema,
// and every object of the schema says what it does with keys it does not
// list.
func lintChart(out io.Writer, chartDir, namespace string, valueFiles []string) error {
	vals, err := loadValues(valueFiles)
	if err != nil {
		return err
	}
	linter := lint.RunAll(chartDir, vals, namespace)
	var problems []string
	for _, m := range linter.Messages {
		fmt.Fprintln(out, m.Error())
		if m.Severity >= support.WarningSev {
			problems = append(problems, m.Error())
		}
	}
	// Helm's linter skips the templates' `fail` (its engine's lint mode):
	// a rendering as `helm install` makes it refuses what they refuse.
	if _, err := render(chartDir, defaultRelease, namespace, valueFiles); err != nil {
		problems = append(problems, "rendering as helm install would: "+err.Error())
	}
	schema, err := readSchema(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		return err
	}
	problems = append(problems, schemaProblems(schema, "values.schema.json")...)
	vy, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(vy, &doc); err != nil {
		return fmt.Errorf("values.yaml: %w", err)
	}
	if len(doc.Content) == 1 {
		problems = append(problems, valuesProblems(doc.Content[0], schema, schema, "")...)
	}
	for _, p := range problems {
		fmt.Fprintln(out, "problem:", p)
	}
	if len(problems) > 0 {
		return fmt.Errorf("lint: %d problem(s) in %s", len(problems), chartDir)
	}
	fmt.Fprintf(out, "%s: linted clean\n", chartDir)
	return nil
}

// schemaNode is a JSON schema object, as decoded.
type schemaNode = map[string]any

func readSchema(file string) (schemaNode, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var s schemaNode
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return s, nil
}

// schemaProblems finds the objects of the schema that do not say what
// becomes of a key they do not list: each "type": "object" needs
// additionalProperties (false, or the schema of a map's values), so that a
// misspelt value is refused rather than ignored.
func schemaProblems(s schemaNode, at string) []string {
	var out []string
	if s["type"] == "object" {
		if _, ok := s["additionalProperties"]; !ok {
			out = append(out, at+": an object without additionalProperties (a misspelt key would be ignored)")
		}
		if _, ok := s["properties"]; ok && s["additionalProperties"] != false {
			out = append(out, at+": an object with properties must have additionalProperties: false")
		}
	}
	for _, key := range []string{"properties", "definitions"} {
		if m, ok := s[key].(map[string]any); ok {
			for _, name := range sortedKeys(m) {
				if sub, ok := m[name].(map[string]any); ok {
					out = append(out, schemaProblems(sub, at+"/"+key+"/"+name)...)
				}
			}
		}
	}
	for _, key := range []string{"items", "additionalProperties", "propertyNames"} {
		if sub, ok := s[key].(map[string]any); ok {
			out = append(out, schemaProblems(sub, at+"/"+key)...)
		}
	}
	for _, key := range []string{"oneOf", "anyOf", "allOf"} {
		if l, ok := s[key].([]any); ok {
			for i, e := range l {
				if sub, ok := e.(map[string]any); ok {
					out = append(out, schemaProblems(sub, fmt.Sprintf("%s/%s/%d", at, key, i))...)
				}
			}
		}
	}
	return out
}

// valuesProblems checks a mapping of values.yaml: each key has a comment
// above it, and the schema names it (a key of a map-valued schema, such as
// resources' quantities, is a map key and needs neither).
func valuesProblems(n *yaml.Node, s, root schemaNode, at string) []string {
	if n.Kind != yaml.MappingNode {
		return nil
	}
	props, _ := resolve(s, root)["properties"].(map[string]any)
	if props == nil {
		return nil // a map: its keys are data, not values of the chart
	}
	var out []string
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p := strings.TrimPrefix(at+"."+k.Value, ".")
		if strings.TrimSpace(k.HeadComment) == "" {
			out = append(out, fmt.Sprintf("values.yaml:%d: %s has no comment saying what it is", k.Line, p))
		}
		sub, ok := props[k.Value].(map[string]any)
		if !ok {
			out = append(out, fmt.Sprintf("values.yaml:%d: %s is not in values.schema.json", k.Line, p))
			continue
		}
		out = append(out, valuesProblems(v, sub, root, p)...)
	}
	return out
}

// resolve follows a local $ref ("#/definitions/NAME").
func resolve(s, root schemaNode) schemaNode {
	ref, ok := s["$ref"].(string)
	if !ok {
		return s
	}
	defs, _ := root["definitions"].(map[string]any)
	d, _ := defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	return d
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
