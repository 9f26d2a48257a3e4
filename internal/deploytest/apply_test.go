package deploytest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/hetsched/hetsched/internal/kube/kubetest"
)

// serviceMonitorCRD stands in for prometheus-operator's ServiceMonitor CRD
// (monitoring.coreos.com/v1), which the test cluster does not have: the
// fields the chart writes, with prometheus-operator's names and types and
// no others, so that strict field validation refuses one the chart
// misspells.
const serviceMonitorCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: servicemonitors.monitoring.coreos.com
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, listKind: ServiceMonitorList, plural: servicemonitors, singular: servicemonitor}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [selector, endpoints]
            properties:
              selector:
                type: object
                properties:
                  matchLabels: {type: object, additionalProperties: {type: string}}
              namespaceSelector:
                type: object
                properties:
                  matchNames: {type: array, items: {type: string}}
              endpoints:
                type: array
                items:
                  type: object
                  properties:
                    port: {type: string}
                    path: {type: string}
                    scheme: {type: string, enum: [http, https]}
                    interval: {type: string}
                    scrapeTimeout: {type: string}
                    bearerTokenFile: {type: string}
                    tlsConfig:
                      type: object
                      properties:
                        insecureSkipVerify: {type: boolean}
                        serverName: {type: string}
                        ca:
                          type: object
                          properties:
                            secret:
                              type: object
                              required: [key]
                              properties:
                                name: {type: string}
                                key: {type: string}
`

const fieldManager = "hetsched-deploytest"

// applier applies manifests server-side, as `helm install` (Helm 4) and
// `kubectl apply --server-side` do.
type applier struct {
	t      *testing.T
	ctx    context.Context
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t *testing.T, ctx context.Context, c *kubetest.Cluster) *applier {
	t.Helper()
	rc := c.JSONConfig(100, 200) // custom resources have no protobuf encoding
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{t: t, ctx: ctx, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// decode reads the objects of a YAML stream.
func decode(t *testing.T, what string, b []byte) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// apply server-side applies objs with strict field validation, forcing
// conflicts (each rendering takes over what an earlier one set, as an
// upgrade would).
func (a *applier) apply(what string, objs []*unstructured.Unstructured) {
	a.t.Helper()
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			a.t.Fatalf("%s: %s %s: %v", what, gvk.Kind, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
		if m.Scope.Name() == "namespace" {
			// kubectl would put it in the current context's namespace.
			if u.GetNamespace() == "" {
				a.t.Fatalf("%s: %s %s has no namespace", what, gvk.Kind, u.GetName())
			}
			ri = a.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		data, err := json.Marshal(u.Object)
		if err != nil {
			a.t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
		force := true
		_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data,
			metav1.PatchOptions{FieldManager: fieldManager, Force: &force, FieldValidation: "Strict"})
		cancel()
		if err != nil {
			a.t.Fatalf("%s: applying %s %s: %v", what, gvk.Kind, u.GetName(), err)
		}
	}
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// applyCRDs applies CRDs and waits until each is established and the
// mapper sees its kind.
func (a *applier) applyCRDs(what string, objs []*unstructured.Unstructured) {
	a.t.Helper()
	a.apply(what, objs)
	for _, o := range objs {
		err := kubetest.WaitFor(a.ctx, 30*time.Second, func() (bool, string, error) {
			u, err := a.dyn.Resource(crdResource).Get(a.ctx, o.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return true, "", nil
				}
			}
			return false, "not established", nil
		})
		if err != nil {
			a.t.Fatalf("CRD %s: %v", o.GetName(), err)
		}
		// Discovery may lag behind Established: wait until the mapper
		// knows the kind.
		group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			version, _ := v.(map[string]any)["name"].(string)
			err := kubetest.WaitFor(a.ctx, 30*time.Second, func() (bool, string, error) {
				a.mapper.Reset()
				_, err := a.mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind}, version)
				return err == nil, fmt.Sprint(err), nil
			})
			if err != nil {
				a.t.Fatalf("CRD %s: discovery: %v", o.GetName(), err)
			}
		}
	}
}

// get reads an object; nil when it does not exist.
func (a *applier) get(gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(a.ctx, 10*time.Second)
	defer cancel()
	var ri dynamic.ResourceInterface = a.dyn.Resource(gvr)
	if ns != "" {
		ri = a.dyn.Resource(gvr).Namespace(ns)
	}
	u, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		a.t.Fatalf("%s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return u
}

// Each rendering (the default values, every ci values file) applies
// server-side, with strict field validation, to a real API server with
// RBAC, after its CRDs (and a stand-in ServiceMonitor CRD) are
// established; then every value is found where it belongs in the objects
// the API server holds, and each Queue and the ResourceSchedule passed
// their CRD's schema.
func TestRenderingsApplyToAnAPIServer(t *testing.T) {
	renders := renderings(t)
	dirs := make([]string, len(renders))
	for i, r := range renders {
		dirs[i] = render(t, r) // the tool's build, before the cluster's start
	}
	c := kubetest.Start(t, kubetest.Options{RBAC: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a := newApplier(t, ctx, c)
	a.applyCRDs("the stand-in ServiceMonitor CRD", decode(t, "serviceMonitorCRD", []byte(serviceMonitorCRD)))
	for i, r := range renders {
		t.Run(r.name, func(t *testing.T) {
			a := *a
			a.t = t
			vals := effectiveValues(t, r)
			// The release namespace (helm install --create-namespace) and
			// the Lease's, which the user makes.
			for _, ns := range []string{r.namespace, str(vals, "leaderElection.leaseNamespace")} {
				if ns != "" {
					a.apply("namespace", []*unstructured.Unstructured{{Object: map[string]any{
						"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}})
				}
			}
			files, err := filepath.Glob(filepath.Join(dirs[i], "*.yaml"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no rendering in %s (%v)", dirs[i], err)
			}
			sort.Strings(files)
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				objs := decode(t, f, b)
				if filepath.Base(f) == "05-crds.yaml" {
					a.applyCRDs(f, objs) // as Helm does crds/ first
				} else {
					a.apply(f, objs)
				}
			}
			e := expect{a: &a, r: r, vals: vals, fullname: fullname(r, vals)}
			e.deployment()
			e.rbac()
			e.metrics()
			e.queues(dirs[i])
			if r.name == "default" {
				e.runs(c, dirs[i])
			}
		})
	}
}

// effectiveValues are the chart's values.yaml with r's files over them,
// merged as Helm merges them (maps key by key, anything else replaced).
func effectiveValues(t *testing.T, r rendering) map[string]any {
	t.Helper()
	var vals map[string]any
	readYAML(t, filepath.Join(chartDir, "values.yaml"), &vals)
	for _, f := range r.values {
		var over map[string]any
		readYAML(t, f, &over)
		vals = mergeValues(vals, over)
	}
	return vals
}

func mergeValues(dst, src map[string]any) map[string]any {
	out := make(map[string]any, len(dst))
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		sm, ok1 := v.(map[string]any)
		dm, ok2 := out[k].(map[string]any)
		if ok1 && ok2 {
			out[k] = mergeValues(dm, sm)
		} else {
			out[k] = v
		}
	}
	return out
}

// fullname is the chart's hetsched.fullname helper, for the test's own
// expectations.
func fullname(r rendering, vals map[string]any) string {
	if o := str(vals, "fullnameOverride"); o != "" {
		return o
	}
	if bytes.Contains([]byte(r.release), []byte("hetsched")) {
		return r.release
	}
	return r.release + "-hetsched"
}

// str reads a string value at a dotted path ("" when absent).
func str(vals map[string]any, path string) string {
	v, _ := lookup(vals, path)
	s, _ := v.(string)
	return s
}

// same compares two values as JSON does (the API server's integers and
// the values file's numbers are equal when their JSON is).
func same(a, b any) bool {
	norm := func(v any) any {
		data, err := json.Marshal(v)
		if err != nil {
			return err.Error()
		}
		var out any
		if err := json.Unmarshal(data, &out); err != nil {
			return err.Error()
		}
		return out
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
