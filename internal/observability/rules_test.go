package observability

import (
	"os"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// ruleFile is deploy/prometheus/alerts.yml.
type ruleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// ruleTests is deploy/prometheus/alerts_test.yml.
type ruleTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// readYAML decodes a YAML file of deploy/ into v.
func readYAML(t *testing.T, rel string, v any) {
	t.Helper()
	b, err := os.ReadFile(deployPath(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
}

// alertRules is every alerting rule of alerts.yml.
func alertRules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	readYAML(t, "prometheus/alerts.yml", &f)
	var rules []rule
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert != "" {
				rules = append(rules, r)
			}
		}
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml has no alerting rules")
	}
	return rules
}

// TestAlertRules checks the rules and the configuration with promtool, runs
// the rules' unit tests, and checks that every alert is complete (for,
// severity, summary, description), names documented metrics only, and has
// unit tests where it fires and where it does not.
func TestAlertRules(t *testing.T) {
	rules := alertRules(t)
	docs := documentedMetrics(t)
	for _, r := range rules {
		if r.For == "" {
			t.Errorf("%s: no for:", r.Alert)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, s)
		}
		for _, a := range []string{"summary", "description"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s annotation", r.Alert, a)
			}
		}
		for _, m := range undocumented(r.Expr, docs) {
			t.Errorf("%s: expr names %s, which docs/metrics.md does not list", r.Alert, m)
		}
	}
	checkRuleTestCoverage(t, rules)

	promtool := need(t, "promtool")
	dir := deployPath(t, "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "alerts_test.yml"},
		{"check", "config", "prometheus.yml"},
	} {
		out, err := run(t, dir, promtool, args...)
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// checkRuleTestCoverage fails for an alert of alerts.yml without a unit
// test where it fires (with its labels and annotations) and one where it
// does not, and for a test of an alert that alerts.yml lacks (promtool
// passes "no alerts expected" for a name no rule has).
func checkRuleTestCoverage(t *testing.T, rules []rule) {
	t.Helper()
	var tests ruleTests
	readYAML(t, "prometheus/alerts_test.yml", &tests)
	if !slices.Contains(tests.RuleFiles, "alerts.yml") {
		t.Errorf("alerts_test.yml's rule_files %v lack alerts.yml", tests.RuleFiles)
	}
	var cfg struct {
		RuleFiles []string `json:"rule_files"`
	}
	readYAML(t, "prometheus/prometheus.yml", &cfg)
	if !slices.Contains(cfg.RuleFiles, "alerts.yml") {
		t.Errorf("prometheus.yml's rule_files %v lack alerts.yml", cfg.RuleFiles)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	known := map[string]bool{}
	for _, r := range rules {
		known[r.Alert] = true
	}
	for _, g := range tests.Tests {
		for _, c := range g.AlertRuleTest {
			if !known[c.Alertname] {
				t.Errorf("alerts_test.yml tests %s, which alerts.yml does not have", c.Alertname)
			}
			if len(c.ExpAlerts) == 0 {
				quiet[c.Alertname] = true
				continue
			}
			complete := true
			for _, a := range c.ExpAlerts {
				if len(a.ExpLabels) == 0 || a.ExpAnnotations["summary"] == "" || a.ExpAnnotations["description"] == "" {
					complete = false
				}
			}
			if !complete {
				t.Errorf("%s at %s: an expected alert without exp_labels or exp_annotations (summary, description)", c.Alertname, c.EvalTime)
			}
			fires[c.Alertname] = true
		}
	}
	for _, r := range rules {
		if !fires[r.Alert] {
			t.Errorf("%s: alerts_test.yml has no case where it fires", r.Alert)
		}
		if !quiet[r.Alert] {
			t.Errorf("%s: alerts_test.yml has no case where it does not fire (exp_alerts: [])", r.Alert)
		}
	}
}
