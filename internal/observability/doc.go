// Package observability holds the tests of what operators run beside a
// hetsched control plane: the Prometheus configuration and alert rules in
// deploy/prometheus and the Grafana dashboards in deploy/grafana. It has
// no code of its own; its tests check those files with Debian's promtool
// and prometheus, against docs/metrics.md and against a live server.
//
// Glossary:
//
//   - alert rule: a PromQL condition in deploy/prometheus/alerts.yml that
//     fires once it has held for its `for:` duration; each carries a
//     severity label (critical, warning) and summary and description
//     annotations.
//   - rule unit test: a case of deploy/prometheus/alerts_test.yml, run by
//     `promtool test rules`: synthetic input series, then the alerts
//     expected at an evaluation time (none, or their labels and
//     annotations). Every alert needs a case where it fires and one where
//     it does not.
//   - dashboard: a Grafana dashboard JSON model (deploy/grafana/*.json):
//     uid, title, schemaVersion, templating variables, panels.
//   - panel: one visualization of a dashboard (timeseries, stat, heatmap,
//     bargauge, table), placed by gridPos on a 24-column grid; its targets
//     are PromQL queries (expr) with a refId.
//   - datasource variable: the `datasource` template variable (type
//     datasource, query prometheus) that every panel and target names as
//     ${datasource}, so a dashboard imports into any Grafana.
//   - template variable: $job, $queue, $node, $resource (label_values
//     queries) and Grafana's own $__rate_interval and $__range, which the
//     tests substitute before running a panel's query.
//   - documented metric: a hetsched_* name in a table of docs/metrics.md; a
//     dashboard or rule that names any other (histograms' _bucket, _sum
//     and _count aside) fails the tests, so renaming a metric means
//     updating them.
//   - leader filter: `and on (job, instance) (hetsched_leader == 1)`, which
//     keeps the cluster gauges of the leading server only (an HA standby
//     keeps the values it had when it last led).
//   - exemption: a panel allowed to return no data under the live test's
//     load, listed by title with the reason in the test.
package observability
