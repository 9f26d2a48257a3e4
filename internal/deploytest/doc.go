// Package deploytest holds the tests of hetsched's Helm chart
// (deploy/helm/hetsched) and of deploy/kubernetes/, its default rendering.
// It has no code of its own. The chart is linted and rendered by tools/helm
// (its own module, on Helm's Go SDK), built once per test binary; the
// renderings are applied server-side to a real kube-apiserver with RBAC
// (internal/kube/kubetest), the Deployment's arguments are parsed by the
// real `hetsched kube` command, and the default rendering's are run by it,
// as the rendering's ServiceAccount, against that API server.
//
// Glossary:
//
//   - rendering: the chart's manifests for one set of values, as `helm
//     template` makes them: 05-crds.yaml (the chart's crds/), then one file
//     per template (10-rbac.yaml, 20-queues.yaml, 30-deployment.yaml,
//     40-metrics.yaml), each named as its template.
//   - default rendering: the rendering with the chart's own values.yaml,
//     release hetsched in namespace hetsched-system; deploy/kubernetes/ is
//     it, plus 00-namespace.yaml, written by `go -C tools/helm run .
//     generate`.
//   - ci values: deploy/helm/hetsched/ci/*-values.yaml; all-values.yaml
//     sets every value of the chart, the others the other side of its
//     switches (leader election off, plain-HTTP metrics, the self-signed
//     certificate).
//   - stand-in CRD: a ServiceMonitor CRD made by the test (a subset of
//     prometheus-operator's schema, the fields the chart writes), so that a
//     ServiceMonitor is checked by the API server without prometheus-operator.
package deploytest
