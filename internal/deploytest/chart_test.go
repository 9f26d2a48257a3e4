package deploytest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/core"
)

// The chart lints clean (Helm's linter, warnings included, and the chart's
// own rules: every value commented and in the schema, every schema object
// closed) with its default values and with each ci values file.
func TestChartLints(t *testing.T) {
	for _, r := range renderings(t) {
		args := []string{"lint", "--chart", chartDir, "--namespace", r.namespace}
		for _, v := range r.values {
			args = append(args, "--values", v)
		}
		out, err := runTool(t, args...)
		if err != nil || !strings.Contains(out, "linted clean") {
			t.Errorf("lint with %s values: %v\n%s", r.name, err, out)
		}
	}
}

// deploy/kubernetes/ is the chart's default rendering, byte for byte: one
// source for `helm install` and `kubectl apply -f`.
func TestPlainManifestsAreTheDefaultRendering(t *testing.T) {
	out := filepath.Join(t.TempDir(), "kubernetes")
	if msg, err := runTool(t, "generate", "--chart", chartDir, "--out", out); err != nil {
		t.Fatalf("generate: %v\n%s", err, msg)
	}
	want := yamlFiles(t, out)
	got := yamlFiles(t, plainDir)
	if len(want) == 0 {
		t.Fatal("generate wrote nothing")
	}
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("deploy/kubernetes/%s is missing: run `%s`", name, generateCommand)
		case !bytes.Equal(g, w):
			t.Errorf("deploy/kubernetes/%s differs from the chart's default rendering (first difference at line %d): run `%s`", name, firstDiffLine(g, w), generateCommand)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("deploy/kubernetes/%s is not in the chart's default rendering: run `%s` (it removes it)", name, generateCommand)
		}
	}
}

// yamlFiles reads dir's *.yaml (not its subdirectories').
func yamlFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// Values that are wrong are refused, naming the value, by `template` and
// by `lint`: an unknown key (at the top and deep down), a wrong type, a
// combination the schema cannot express, and a value a switch turns off.
func TestBadValuesAreRefused(t *testing.T) {
	for _, c := range []struct{ name, values, want string }{
		{"unknown top-level key", "replica: 2\n", "replica"},
		{"unknown nested key", "scheduler:\n  nmae: x\n", "nmae"},
		{"unknown key of a queue", "queues:\n- name: a\n  wieght: 2\n", "wieght"},
		{"wrong type", "replicas: two\n", "replicas"},
		{"not a quantity", "queues:\n- name: a\n  guaranteed: {cpu: 0.5}\n", "guaranteed"},
		{"unknown policy", "resourceSchedule:\n  policy: fastest\n", "policy"},
		{"part of the tiers", "resourceSchedule:\n  priorityTiers: {urgent: 10}\n", "priorityTiers"},
		{"tiers out of order", "resourceSchedule:\n  priorityTiers: {urgent: 1, high: 10, medium: 0}\n", "resourceSchedule.priorityTiers"},
		{"replicas without leader election", "replicas: 2\nleaderElection: {enabled: false}\n", "replicas is 2 with leaderElection.enabled false"},
		{"a lease setting with leader election off", "replicas: 1\nleaderElection: {enabled: false, leaseName: x}\n", "leaderElection.leaseName is set"},
		{"a TLS secret over plain HTTP", "metrics: {auth: none, tlsSecret: x}\n", "metrics.tlsSecret is set"},
		{"a ServiceMonitor that cannot check the certificate", "serviceMonitor: {enabled: true}\n", "serviceMonitor.tls.insecureSkipVerify"},
		{"a queue twice", "queues:\n- name: a\n- name: a\n", "queues: a is listed twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(f, []byte(c.values), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, cmd := range [][]string{
				{"template", "--chart", chartDir, "--values", f, "--out", filepath.Join(t.TempDir(), "out")},
				{"lint", "--chart", chartDir, "--values", f},
			} {
				out, err := runTool(t, cmd...)
				if err == nil {
					t.Errorf("%s accepted %q:\n%s", cmd[0], c.values, out)
				} else if !strings.Contains(out, c.want) {
					t.Errorf("%s refused %q without naming %q:\n%s", cmd[0], c.values, c.want, out)
				}
			}
		})
	}
}

// kubeFlag is a flag of `hetsched kube --help`.
var kubeFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`)

// Every argument the Deployment gives `hetsched kube`, in every rendering,
// is parsed by the real command (its flags and their types): `hetsched
// kube ARGS --help` fails on an unknown flag or a value of the wrong type,
// as a bogus one shows.
func TestDeploymentArgsAreKubeFlags(t *testing.T) {
	bin := hetschedBinary(t)
	help, err := runKube(bin, "--help")
	if err != nil {
		t.Fatalf("hetsched kube --help: %v\n%s", err, help)
	}
	flags := map[string]bool{}
	for _, m := range kubeFlag.FindAllStringSubmatch(help, -1) {
		flags[m[1]] = true
	}
	if !flags["lease-namespace"] || !flags["listen"] {
		t.Fatalf("hetsched kube --help lists %d flags, not --lease-namespace and --listen:\n%s", len(flags), help)
	}
	if out, err := runKube(bin, "--bogus-flag=1", "--help"); err == nil {
		t.Fatalf("hetsched kube accepted --bogus-flag:\n%s", out)
	}
	for _, r := range renderings(t) {
		args := deploymentArgs(t, render(t, r))
		if len(args) < 2 || args[0] != "kube" {
			t.Fatalf("%s: the container's args %q do not run `hetsched kube`", r.name, args)
		}
		for _, a := range args[1:] {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.HasPrefix(a, "--") || !flags[name] {
				t.Errorf("%s: %q is not a flag of hetsched kube", r.name, a)
			}
		}
		if out, err := runKube(bin, append(args[1:], "--help")...); err != nil {
			t.Errorf("%s: hetsched kube refuses the Deployment's args %q: %v\n%s", r.name, args, err, out)
		}
	}
}

func runKube(bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append([]string{"kube"}, args...)...).CombinedOutput()
	return string(out), err
}

// deploymentArgs reads the container's args from a rendering's
// 30-deployment.yaml.
func deploymentArgs(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "30-deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Kind string `json:"kind"`
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Args []string `json:"args"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.Kind != "Deployment" || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("30-deployment.yaml: a %s with %d containers, want a Deployment with one", d.Kind, len(d.Spec.Template.Spec.Containers))
	}
	return d.Spec.Template.Spec.Containers[0].Args
}

// Every value the schema names is set by some ci values file to something
// other than its default (so that the apply test sees it reach its
// object), and values.yaml sets no value the schema does not name.
func TestEveryValueIsSetByTheCIValues(t *testing.T) {
	var schema map[string]any
	readYAML(t, filepath.Join(chartDir, "values.schema.json"), &schema)
	var defaults map[string]any
	readYAML(t, filepath.Join(chartDir, "values.yaml"), &defaults)
	var sets []map[string]any
	for _, r := range renderings(t)[1:] {
		var v map[string]any
		readYAML(t, r.values[0], &v)
		sets = append(sets, v)
	}
	paths := schemaPaths(schema, schema, "")
	if len(paths) < 50 {
		t.Fatalf("the schema names %d values: %v", len(paths), paths)
	}
	for _, p := range paths {
		def, hasDefault := lookup(defaults, p)
		set, changed := false, false
		for _, v := range sets {
			if got, ok := lookup(v, p); ok {
				set = true
				changed = changed || !hasDefault || !same(got, def)
			}
		}
		switch {
		case !set:
			t.Errorf("%s: no ci values file sets it (deploy/helm/hetsched/ci/all-values.yaml sets every value)", p)
		case !changed:
			t.Errorf("%s: every ci values file sets it to its default %v", p, def)
		}
	}
}

// schemaPaths lists the values a schema names, as dotted paths ([] for a
// list's items); a map (no properties) is one value.
func schemaPaths(s, root map[string]any, at string) []string {
	if ref, ok := s["$ref"].(string); ok {
		defs, _ := root["definitions"].(map[string]any)
		s, _ = defs[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
	}
	if items, ok := s["items"].(map[string]any); ok {
		if sub := schemaPaths(items, root, at+"[]"); len(sub) > 0 && sub[0] != at+"[]" {
			return append([]string{at}, sub...)
		}
		return []string{at}
	}
	props, ok := s["properties"].(map[string]any)
	if !ok {
		return []string{at}
	}
	var out []string
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sub, _ := props[n].(map[string]any)
		out = append(out, schemaPaths(sub, root, strings.TrimPrefix(at+"."+n, "."))...)
	}
	return out
}

// lookup finds a dotted path in values; "a[]" looks in each element of the
// list a, and is found when one element has the rest.
func lookup(v any, path string) (any, bool) {
	if path == "" {
		return v, true
	}
	head, rest, _ := strings.Cut(path, ".")
	if name, ok := strings.CutSuffix(head, "[]"); ok {
		m, _ := v.(map[string]any)
		list, _ := m[name].([]any)
		if rest == "" {
			return list, m[name] != nil
		}
		for _, e := range list {
			if got, ok := lookup(e, rest); ok {
				return got, true
			}
		}
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	sub, ok := m[head]
	if !ok {
		return nil, false
	}
	return lookup(sub, rest)
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// The schema's resourceSchedule.policy names exactly the core's policies
// (and "" for the server's default): a policy added or renamed in
// internal/core fails here until the chart knows it.
func TestSchemaPoliciesAreTheCores(t *testing.T) {
	var schema map[string]any
	readYAML(t, filepath.Join(chartDir, "values.schema.json"), &schema)
	p, _ := lookup(schema, "properties.resourceSchedule.properties.policy.enum")
	enum, _ := p.([]any)
	var got []string
	for _, e := range enum {
		got = append(got, fmt.Sprint(e))
	}
	want := append([]string{""}, core.Policies()...)
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Errorf("values.schema.json's resourceSchedule.policy enum is %q, want %q (core.Policies and \"\")", got, want)
	}
}
