package observability

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/hetsched/hetsched/internal/childproc"
)

// prom is a Prometheus process started by a test, and its HTTP API.
type prom struct {
	base string
	c    *http.Client
}

// startPrometheus runs Debian's prometheus on a loopback port from :0
// with deploy/prometheus/prometheus.yml, changed for the test: scrapes and
// rule evaluations every second, its hetsched job's target the server at
// target, its rule files by absolute path. It is killed when the test ends.
func startPrometheus(t *testing.T, bin, target string) *prom {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, promConfig(t, target), 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := childproc.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	cmd := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	logs := &childproc.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("prometheus's log:\n%s", logs.String())
		}
	})
	p := &prom{base: "http://" + addr, c: newClient(t)}
	eventually(t, time.Minute, "prometheus ready", func() error {
		select {
		case <-exited:
			t.Fatal("prometheus exited (its log follows)")
		default:
		}
		code, err := call(p.c, "GET", p.base+"/-/ready", "", nil)
		if err == nil && code != 200 {
			err = fmt.Errorf("/-/ready: %d", code)
		}
		return err
	})
	return p
}

// promConfig is deploy/prometheus/prometheus.yml for the test: its hetsched
// job (which must be there) scraping target every second, the rule files
// by absolute path.
func promConfig(t *testing.T, target string) []byte {
	t.Helper()
	var cfg map[string]any
	readYAML(t, "prometheus/prometheus.yml", &cfg)
	cfg["global"] = map[string]any{"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"}
	files, _ := cfg["rule_files"].([]any)
	if len(files) == 0 {
		t.Fatal("prometheus.yml has no rule_files")
	}
	for i, f := range files {
		files[i] = deployPath(t, "prometheus/"+fmt.Sprint(f))
	}
	jobs, _ := cfg["scrape_configs"].([]any)
	var keep []any
	for _, j := range jobs {
		if job, _ := j.(map[string]any); job["job_name"] == "hetsched" {
			job["static_configs"] = []any{map[string]any{"targets": []any{target}}}
			keep = append(keep, job)
		}
	}
	if len(keep) != 1 {
		t.Fatalf("prometheus.yml: %d scrape configs of job hetsched, want 1", len(keep))
	}
	cfg["scrape_configs"] = keep
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// api GETs an API path and decodes its data; an error status or an
// "error" answer is an error.
func (p *prom) api(path string, q url.Values, data any) error {
	var resp struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	u := p.base + path
	if q != nil {
		u += "?" + q.Encode()
	}
	code, err := call(p.c, "GET", u, "", &resp)
	if err != nil {
		return err
	}
	if code != 200 || resp.Status != "success" {
		return fmt.Errorf("%s: %d %s: %s %s", path, code, resp.Status, resp.ErrorType, resp.Error)
	}
	return json.Unmarshal(resp.Data, data)
}

// sample is one series of an instant query's answer.
type sample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// float is the sample's value.
func (s sample) float() float64 {
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// query runs an instant query; its answer must be a vector.
func (p *prom) query(q string) ([]sample, error) {
	var data struct {
		ResultType string   `json:"resultType"`
		Result     []sample `json:"result"`
	}
	if err := p.api("/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "vector" {
		return nil, fmt.Errorf("%s: result type %s, want vector", q, data.ResultType)
	}
	return data.Result, nil
}

// finite reports whether some series of res has a finite value (a
// quantile of a histogram that did not move is NaN: no data).
func finite(res []sample) bool {
	for _, s := range res {
		if v := s.float(); !math.IsNaN(v) && !math.IsInf(v, 0) {
			return true
		}
	}
	return false
}

// has fails unless q returns a series with a finite value.
func (p *prom) has(q string) error {
	res, err := p.query(q)
	if err == nil && !finite(res) {
		err = fmt.Errorf("%s: no series with a finite value (%v)", q, res)
	}
	return err
}

// waitScrapes waits for n more scrapes of the hetsched target.
func (p *prom) waitScrapes(t *testing.T, n int) {
	t.Helper()
	const scrapes = `count_over_time(up{job="hetsched"}[1h])`
	var from float64
	eventually(t, time.Minute, "a first scrape", func() error {
		res, err := p.query(scrapes)
		if err == nil && len(res) == 0 {
			err = fmt.Errorf("no scrapes yet")
		}
		if err == nil {
			from = res[0].float()
		}
		return err
	})
	eventually(t, time.Minute, fmt.Sprintf("%d scrapes", n), func() error {
		return p.has(fmt.Sprintf("%s >= %g", scrapes, from+float64(n)))
	})
}

// targetUp fails unless Prometheus's hetsched target is up.
func (p *prom) targetUp() error {
	var data struct {
		ActiveTargets []struct {
			Labels    map[string]string `json:"labels"`
			Health    string            `json:"health"`
			LastError string            `json:"lastError"`
		} `json:"activeTargets"`
	}
	if err := p.api("/api/v1/targets", url.Values{"state": {"active"}}, &data); err != nil {
		return err
	}
	for _, tg := range data.ActiveTargets {
		if tg.Labels["job"] == "hetsched" {
			if tg.Health != "up" {
				return fmt.Errorf("target %s: %s %s", tg.Labels["instance"], tg.Health, tg.LastError)
			}
			return nil
		}
	}
	return fmt.Errorf("no hetsched target among %d", len(data.ActiveTargets))
}

// rulesHealthy fails unless every alert of want is loaded and has been
// evaluated without an error.
func (p *prom) rulesHealthy(want []rule) error {
	var data struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Type      string `json:"type"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.api("/api/v1/rules", nil, &data); err != nil {
		return err
	}
	type state struct{ health, lastError string }
	loaded := map[string]state{}
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			if r.Type == "alerting" {
				loaded[r.Name] = state{r.Health, r.LastError}
			}
		}
	}
	for _, r := range want {
		st, ok := loaded[r.Alert]
		if !ok {
			return fmt.Errorf("alert %s is not loaded", r.Alert)
		}
		if st.health != "ok" || st.lastError != "" {
			return fmt.Errorf("alert %s: health %q, last error %q", r.Alert, st.health, st.lastError)
		}
	}
	return nil
}
