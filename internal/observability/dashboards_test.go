package observability

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dashboard is the part of Grafana's dashboard JSON model the tests read
// (https://grafana.com/docs/grafana/latest/dashboards/build-dashboards/view-dashboard-json-model/).
type dashboard struct {
	file          string
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID          int         `json:"id"`
	Type        string      `json:"type"`
	Title       string      `json:"title"`
	GridPos     *gridPos    `json:"gridPos"`
	Datasource  *datasource `json:"datasource"`
	FieldConfig struct {
		Defaults struct {
			Unit       string `json:"unit"`
			Thresholds struct {
				Steps []struct {
					Value *float64 `json:"value"`
				} `json:"steps"`
			} `json:"thresholds"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []target `json:"targets"`
	Panels  []panel  `json:"panels"` // a collapsed row's
}

type gridPos struct {
	H, W, X, Y *int
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	Expr       string      `json:"expr"`
	RefID      string      `json:"refId"`
	Datasource *datasource `json:"datasource"`
}

type variable struct {
	Name       string          `json:"name"`
	Type       string          `json:"type"`
	Query      json.RawMessage `json:"query"` // a string, or {"query": "..."}
	Datasource *datasource     `json:"datasource"`
}

// queryText is a variable's query, in either of Grafana's forms.
func (v variable) queryText() string {
	var s string
	if json.Unmarshal(v.Query, &s) == nil {
		return s
	}
	var o struct {
		Query string `json:"query"`
	}
	_ = json.Unmarshal(v.Query, &o)
	return o.Query
}

// panelTypes are the panel types the dashboards may use; row and text
// panels have no queries.
var panelTypes = map[string]bool{"timeseries": true, "stat": true, "gauge": true, "bargauge": true,
	"heatmap": true, "table": true, "row": false, "text": false}

// datasourceRef is how every panel and target names the data source: the
// dashboard's datasource variable.
const datasourceRef = "${datasource}"

// decisionTargets are the decision latency targets per tier (seconds): a
// panel of hetsched_scheduling_attempt_duration_seconds for one tier has a
// threshold at its target.
var decisionTargets = map[string]float64{"urgent": 0.001, "high": 0.001, "medium": 0.005, "low": 0.02}

// loadDashboards reads deploy/grafana/*.json.
func loadDashboards(t *testing.T) []dashboard {
	t.Helper()
	files, err := filepath.Glob(deployPath(t, "grafana/*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in deploy/grafana (%v)", err)
	}
	var ds []dashboard
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", filepath.Base(f), err)
		}
		d.file = filepath.Base(f)
		ds = append(ds, d)
	}
	return ds
}

// allPanels is d's panels, those of collapsed rows included.
func (d dashboard) allPanels() []panel {
	var out []panel
	for _, p := range d.Panels {
		out = append(out, p)
		out = append(out, p.Panels...)
	}
	return out
}

// TestDashboardsValid checks every dashboard's structure as Grafana's JSON
// model has it, that its queries name documented metrics and defined
// variables only, and that the decision latency panels show their targets.
func TestDashboardsValid(t *testing.T) {
	docs := documentedMetrics(t)
	uids := map[string]string{}
	for _, d := range loadDashboards(t) {
		if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
			t.Errorf("%s: uid %q, title %q, schemaVersion %d: want a uid, a title and schemaVersion >= 36", d.file, d.UID, d.Title, d.SchemaVersion)
		}
		if other, dup := uids[d.UID]; dup {
			t.Errorf("%s: uid %q is %s's too", d.file, d.UID, other)
		}
		uids[d.UID] = d.file
		vars := checkVariables(t, d, docs)
		checkLayout(t, d)
		for _, p := range d.allPanels() {
			checkPanel(t, d.file, p, vars, docs)
		}
	}
}

// checkVariables checks d's template variables (a datasource variable of
// type prometheus; query variables on it, naming documented metrics) and
// returns their names.
func checkVariables(t *testing.T, d dashboard, docs map[string]bool) map[string]bool {
	t.Helper()
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch v.Type {
		case "datasource":
			if v.Name != "datasource" || v.queryText() != "prometheus" {
				t.Errorf("%s: datasource variable %q of %q, want datasource of prometheus", d.file, v.Name, v.queryText())
			}
		case "query":
			if v.Datasource == nil || v.Datasource.UID != datasourceRef {
				t.Errorf("%s: variable %s's datasource %v, want %s", d.file, v.Name, v.Datasource, datasourceRef)
			}
			if _, _, err := labelValuesQuery(v.queryText()); err != nil {
				t.Errorf("%s: variable %s: %v", d.file, v.Name, err)
			}
			for _, m := range undocumented(v.queryText(), docs) {
				t.Errorf("%s: variable %s names %s, which docs/metrics.md does not list", d.file, v.Name, m)
			}
		}
	}
	if !vars["datasource"] {
		t.Errorf("%s: no datasource template variable", d.file)
	}
	return vars
}

// checkLayout checks that panel ids are unique and that every panel lies
// within the 24-column grid without overlapping another.
func checkLayout(t *testing.T, d dashboard) {
	t.Helper()
	ids, titles := map[int]bool{}, map[string]bool{}
	var placed []panel
	for _, p := range d.allPanels() {
		if ids[p.ID] || p.ID <= 0 {
			t.Errorf("%s: panel %q: id %d is not positive and unique", d.file, p.Title, p.ID)
		}
		ids[p.ID] = true
		if titles[p.Title] || p.Title == "" {
			t.Errorf("%s: panel title %q is empty or not unique", d.file, p.Title)
		}
		titles[p.Title] = true
		g := p.GridPos
		if g == nil || g.H == nil || g.W == nil || g.X == nil || g.Y == nil {
			t.Errorf("%s: panel %q: gridPos lacks h, w, x or y", d.file, p.Title)
			continue
		}
		if *g.H <= 0 || *g.W <= 0 || *g.X < 0 || *g.Y < 0 || *g.X+*g.W > 24 {
			t.Errorf("%s: panel %q: gridPos %d,%d %dx%d is not within the 24 columns", d.file, p.Title, *g.X, *g.Y, *g.W, *g.H)
			continue
		}
		for _, q := range placed {
			o := q.GridPos
			if *g.X < *o.X+*o.W && *o.X < *g.X+*g.W && *g.Y < *o.Y+*o.H && *o.Y < *g.Y+*g.H {
				t.Errorf("%s: panels %q and %q overlap", d.file, p.Title, q.Title)
			}
		}
		placed = append(placed, p)
	}
}

// checkPanel checks one panel: its type, data source, unit and targets.
func checkPanel(t *testing.T, file string, p panel, vars, docs map[string]bool) {
	t.Helper()
	queries, ok := panelTypes[p.Type]
	if !ok {
		t.Errorf("%s: panel %q: type %q is not one of %v", file, p.Title, p.Type, keys(panelTypes))
		return
	}
	if !queries {
		return
	}
	if p.Datasource == nil || p.Datasource.Type != "prometheus" || p.Datasource.UID != datasourceRef {
		t.Errorf("%s: panel %q: datasource %+v, want prometheus %s", file, p.Title, p.Datasource, datasourceRef)
	}
	if p.FieldConfig.Defaults.Unit == "" {
		t.Errorf("%s: panel %q: no fieldConfig.defaults.unit", file, p.Title)
	}
	if len(p.Targets) == 0 {
		t.Errorf("%s: panel %q: no targets", file, p.Title)
	}
	refs := map[string]bool{}
	for _, tg := range p.Targets {
		if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
			t.Errorf("%s: panel %q: a target without an expr or a unique refId (%q)", file, p.Title, tg.RefID)
		}
		refs[tg.RefID] = true
		if tg.Datasource == nil || tg.Datasource.UID != datasourceRef {
			t.Errorf("%s: panel %q target %s: datasource %+v, want %s", file, p.Title, tg.RefID, tg.Datasource, datasourceRef)
		}
		if _, err := substitute(tg.Expr, vars); err != nil {
			t.Errorf("%s: panel %q target %s: %v", file, p.Title, tg.RefID, err)
		}
		for _, m := range undocumented(tg.Expr, docs) {
			t.Errorf("%s: panel %q names %s, which docs/metrics.md does not list", file, p.Title, m)
		}
		checkLatencyTarget(t, file, p, tg.Expr)
	}
}

var tierRe = regexp.MustCompile(`hetsched_scheduling_attempt_duration_seconds_bucket\{[^}]*tier="(\w+)"`)

// checkLatencyTarget: a decision latency panel of one tier has a
// threshold step at that tier's target.
func checkLatencyTarget(t *testing.T, file string, p panel, expr string) {
	t.Helper()
	m := tierRe.FindStringSubmatch(expr)
	if m == nil {
		return
	}
	want, ok := decisionTargets[m[1]]
	if !ok {
		t.Errorf("%s: panel %q: unknown tier %q", file, p.Title, m[1])
		return
	}
	for _, s := range p.FieldConfig.Defaults.Thresholds.Steps {
		if s.Value != nil && *s.Value == want {
			return
		}
	}
	t.Errorf("%s: panel %q: no threshold at the %s target %gs", file, p.Title, m[1], want)
}

var (
	docMetricRe = regexp.MustCompile("`(hetsched_[a-z_]+)`")
	metricRe    = regexp.MustCompile(`hetsched_[a-z_]+`)
)

// documentedMetrics is every metric name in a table of docs/metrics.md.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		for _, m := range docMetricRe.FindAllStringSubmatch(line, -1) {
			names[m[1]] = true
		}
	}
	if len(names) < 20 {
		t.Fatalf("docs/metrics.md: only %d metric names found in its tables", len(names))
	}
	return names
}

// undocumented is the hetsched_* names of expr that docs/metrics.md does
// not list (a histogram's _bucket, _sum and _count series are its own).
func undocumented(expr string, docs map[string]bool) []string {
	var out []string
	for _, name := range metricRe.FindAllString(expr, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && docs[b] {
				base = b
			}
		}
		if !docs[base] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// builtins are the values given to Grafana's own variables: what Grafana
// would use for a short range scraped every second.
var builtins = map[string]string{"__rate_interval": "1m", "__interval": "15s", "__interval_ms": "15000",
	"__range": "5m", "__range_s": "300", "__range_ms": "300000"}

var varRe = regexp.MustCompile(`\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]|\$(\w+)`)

// substitute replaces a query's variables: Grafana's own with builtins,
// the dashboard's with .* (their "All" value; every query matches them
// with =~). A variable the dashboard does not define is an error.
func substitute(expr string, vars map[string]bool) (string, error) {
	var unknown []string
	out := varRe.ReplaceAllStringFunc(expr, func(s string) string {
		m := varRe.FindStringSubmatch(s)
		name := m[1] + m[2] + m[3]
		if v, ok := builtins[name]; ok {
			return v
		}
		if vars[name] {
			return ".*"
		}
		unknown = append(unknown, name)
		return s
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("undefined variables %v in %s", unknown, expr)
	}
	return out, nil
}

var labelValuesRe = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// labelValuesQuery splits label_values(SELECTOR, LABEL).
func labelValuesQuery(q string) (selector, label string, err error) {
	m := labelValuesRe.FindStringSubmatch(strings.TrimSpace(q))
	if m == nil {
		return "", "", fmt.Errorf("query %q is not label_values(SELECTOR, LABEL)", q)
	}
	return m[1], m[2], nil
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
