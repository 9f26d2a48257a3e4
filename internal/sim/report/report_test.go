package report

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hetsched/hetsched/internal/sim"
)

func TestAggregate(t *testing.T) {
	rs := richRuns(50)
	ss := Aggregate(rs)
	if len(ss) != 3 {
		t.Fatalf("got %d summaries, want 3", len(ss))
	}
	for i, want := range []string{"fgd", "best-fit", "load-predict"} {
		if ss[i].Policy != want {
			t.Errorf("summary %d is %q, want %q (order of first appearance)", i, ss[i].Policy, want)
		}
	}
	s := ss[0]
	if s.Runs != 3 || !cmp.Equal(s.Seeds, []int64{1, 2, 3}) {
		t.Errorf("runs %d seeds %v", s.Runs, s.Seeds)
	}
	// Mean and sample sd by hand.
	var vs []float64
	for _, r := range rs[:3] {
		vs = append(vs, r.Utilization["nvidia.com/gpu"])
	}
	mean := (vs[0] + vs[1] + vs[2]) / 3
	var ss2 float64
	for _, v := range vs {
		ss2 += (v - mean) * (v - mean)
	}
	got := s.Utilization["nvidia.com/gpu"]
	if math.Abs(got.Mean-mean) > 1e-12 || math.Abs(got.SD-math.Sqrt(ss2/2)) > 1e-12 || got.N != 3 {
		t.Errorf("gpu util %+v, want mean %v sd %v", got, mean, math.Sqrt(ss2/2))
	}
	if s.Fairness.N != 3 || s.Queues != 3 {
		t.Errorf("fairness %+v queues %d", s.Fairness, s.Queues)
	}

	// Absent measures stay absent; NaN is left out, never propagated.
	f := Aggregate(fgdRuns())
	if f[0].JCTMean.N != 0 || f[0].Fairness.N != 0 || f[0].QueueDelayP99[0].N != 0 || f[0].QueueDelayP99[2].N != 1 {
		t.Errorf("fgd summary %+v", f[0])
	}
	bad := fgdRuns()[:1]
	bad[0].GPUAlloc = math.NaN()
	bad = append(bad, bad[0])
	bad[1].GPUAlloc = 0.5
	if m := Aggregate(bad)[0].GPUAlloc; m.N != 1 || m.Mean != 0.5 || m.SD != 0 {
		t.Errorf("NaN not left out: %+v", m)
	}
	if len(Aggregate(nil)) != 0 {
		t.Error("summaries of no runs")
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := Table(&b, richRuns(50)); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("got %d lines, want header and 3 rows", len(lines))
	}
	for _, col := range []string{"POLICY", "SEEDS", "PLACED/JOBS", "GPU UTIL", "TPU UTIL", "CPU UTIL", "GPU ALLOC", "FRAG",
		"JCT MEAN", "JCT P50", "JCT P99", "MAKESPAN", "DELAY P99 URGENT", "DELAY P99 LOW", "SLO URGENT", "SLO LOW",
		"FAIRNESS", "EVENTS/S"} {
		if !strings.Contains(lines[0], col) {
			t.Errorf("header lacks %s", col)
		}
	}
	for i, p := range []string{"fgd", "best-fit", "load-predict"} {
		f := strings.Fields(lines[i+1])
		if f[0] != p || f[1] != "3" {
			t.Errorf("row %d: %q", i, lines[i+1])
		}
		if !strings.Contains(lines[i+1], "±") {
			t.Errorf("row %d has no spread: %q", i, lines[i+1])
		}
		if !regexp.MustCompile(`\d+(\.\d)?h`).MatchString(lines[i+1]) {
			t.Errorf("row %d has no durations in hours: %q", i, lines[i+1])
		}
	}
	// Columns line up: each header starts at the same offset in every row.
	off := strings.Index(lines[0], "GPU UTIL")
	for _, l := range lines[1:] {
		if r := []rune(l); len(r) <= off || r[off-1] != ' ' || r[off] == ' ' {
			t.Errorf("column GPU UTIL not aligned at %d in %q", off, l)
		}
	}
}

func TestTableOmitsEmptyColumns(t *testing.T) {
	var b bytes.Buffer
	if err := Table(&b, fgdRuns()); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)
	for _, col := range []string{"JCT", "MAKESPAN", "TPU UTIL", "FAIRNESS", "URGENT", "HIGH", "LOW"} {
		if strings.Contains(out, col) {
			t.Errorf("table has empty column %s", col)
		}
	}
	for _, col := range []string{"GPU UTIL", "CPU UTIL", "GPU ALLOC", "FRAG", "DELAY P99 MEDIUM", "SLO MEDIUM", "EVENTS/S"} {
		if !strings.Contains(out, col) {
			t.Errorf("table lacks %s", col)
		}
	}
	if strings.Contains(out, "±") {
		t.Error("spread shown for a single seed")
	}
	if !strings.Contains(out, "fgd ") || !strings.Contains(out, "best-fit ") {
		t.Error("rows missing")
	}

	// No runs: a header, no error.
	b.Reset()
	if err := Table(&b, nil); err != nil || !strings.HasPrefix(b.String(), "POLICY") {
		t.Errorf("empty table %q, %v", b.String(), err)
	}
}

func TestFormat(t *testing.T) {
	for _, c := range []struct {
		sec  float64
		want string
	}{
		{3.4 * 3600, "3.4h"}, {12 * 60, "12m"}, {0.85, "850ms"}, {0, "0s"}, {42, "42s"}, {4.25, "4.2s"},
		{59.7, "1m"}, {0.0003, "300µs"}, {3 * 86400, "3d"}, {36 * 3600, "36h"}, {math.NaN(), "-"},
	} {
		if got := human(c.sec); got != c.want {
			t.Errorf("human(%v) = %q, want %q", c.sec, got, c.want)
		}
	}
	for _, c := range []struct {
		f    float64
		want string
	}{{0.712, "71.2%"}, {1, "100.0%"}, {0.9996, "99.96%"}, {0, "0.0%"}} {
		if got := pct(c.f); got != c.want {
			t.Errorf("pct(%v) = %q, want %q", c.f, got, c.want)
		}
	}
	if got := si(1.234e6); got != "1.2M" {
		t.Errorf("si = %q", got)
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 100, []string{"0", "20", "40", "60", "80", "100"}},
		{0, 130, []string{"0", "50", "100", "150"}},
		{0, 0.73, []string{"0.0", "0.2", "0.4", "0.6", "0.8"}},
		{0, 0, []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
		{5, 5, []string{"0", "1", "2", "3", "4", "5"}},
		{math.NaN(), math.Inf(1), []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}},
	} {
		vs, step := niceTicks(c.lo, c.hi, 6)
		var got []string
		for _, v := range vs {
			got = append(got, tickLabel(v, step))
		}
		if !cmp.Equal(got, c.want) {
			t.Errorf("niceTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	a := logTimeAxis(0.3, 5*3600, "x")
	var got []string
	for _, tk := range a.ticks {
		got = append(got, tk.label)
	}
	if want := []string{"100ms", "1s", "10s", "1m", "10m", "1h", "1d"}; !cmp.Equal(got, want) {
		t.Errorf("log ticks %v, want %v", got, want)
	}
}

func TestLTTB(t *testing.T) {
	var ps []pt
	for i := range 100000 {
		ps = append(ps, pt{float64(i), math.Sin(float64(i) / 1000)})
	}
	ps[50000].Y = 10 // a spike survives
	q := lttb(ps, maxPoints)
	if len(q) != maxPoints || q[0] != ps[0] || q[len(q)-1] != ps[len(ps)-1] {
		t.Fatalf("len %d ends %v %v", len(q), q[0], q[len(q)-1])
	}
	spike := false
	for i, p := range q {
		spike = spike || p.Y == 10
		if i > 0 && p.X <= q[i-1].X {
			t.Fatalf("not increasing at %d", i)
		}
	}
	if !spike {
		t.Error("spike lost")
	}
}

func TestJSONRoundTrip(t *testing.T) {
	for name, rs := range map[string][]sim.Result{"rich": richRuns(30), "fgd": fgdRuns(), "none": nil} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := JSON(&b, rs); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(b.String(), "{\n  \"runs\": [") {
				t.Errorf("not indented, or not runs first: %.40q", b.String())
			}
			var d Document
			dec := json.NewDecoder(&b)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&d); err != nil {
				t.Fatal(err)
			}
			want := rs
			if want == nil {
				want = []sim.Result{}
			}
			if diff := cmp.Diff(want, d.Runs); diff != "" {
				t.Errorf("runs (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(Aggregate(rs), d.Summary); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
		})
	}
	bad := fgdRuns()
	bad[0].Makespan = math.Inf(1)
	if err := JSON(io.Discard, bad); err == nil {
		t.Error("Inf in a run: no error")
	}
}

// checkPage checks what every page must be: balanced tags, no NaN or Inf,
// nothing fetched from elsewhere, no scripts.
func checkPage(t *testing.T, page string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(page))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	var stack []string
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			stack = append(stack, e.Name.Local)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Fatalf("unclosed %v", stack)
	}
	for _, bad := range []string{"NaN", "Inf", "<script", "@import", "<link", "<img", "<iframe"} {
		if i := strings.Index(page, bad); i >= 0 {
			t.Errorf("page has %q: ...%s...", bad, page[max(0, i-80):min(len(page), i+80)])
		}
	}
	// Only SVG's namespace may name another place.
	for _, m := range regexp.MustCompile(`(?i)(?:src|href|xmlns(?::\w+)?)\s*=\s*"([^"]*)"|url\(([^)]*)\)`).FindAllStringSubmatch(page, -1) {
		ref := m[1] + m[2]
		if strings.HasPrefix(strings.ToLower(m[0]), "xmlns") {
			if ref != "http://www.w3.org/2000/svg" {
				t.Errorf("namespace %q", ref)
			}
			continue
		}
		if !strings.HasPrefix(ref, "#") {
			t.Errorf("external reference %q", m[0])
		}
	}
	if n := strings.Count(page, "http"); n != strings.Count(page, `xmlns="http://www.w3.org/2000/svg"`) {
		t.Errorf("%d mentions of http, want only the SVG namespace's", n)
	}
	for _, m := range regexp.MustCompile(`points="([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if n := len(strings.Fields(m[1])); n > maxPoints {
			t.Errorf("polyline of %d points", n)
		}
	}
}

func TestHTML(t *testing.T) {
	rs := richRuns(20000)
	var b bytes.Buffer
	if err := HTML(&b, "openb <1523 nodes> & friends", rs); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkPage(t, page)
	// gpu, tpu, cpu, memory; the CDF; alloc vs arrived; delay bars.
	if n := strings.Count(page, "<svg"); n != 7 {
		t.Errorf("%d plots, want 7", n)
	}
	for _, s := range []string{
		"<title>openb &lt;1523 nodes&gt; &amp; friends</title>",
		">fgd</text>", ">best-fit</text>", ">load-predict</text>", // legends
		"GPU allocated (nvidia.com/gpu)", "TPU allocated (google.com/tpu)", "CPU allocated (cpu)",
		"JCT CDF", "log scale", "GPU allocation ratio vs GPU demand present", "allocated = arrived", "protocol points",
		"Queue delay p99 by priority tier", "tier&#39;s delay target", ">urgent</text>", ">low</text>",
		"openb-1523", "openb-pod-list-default", "1,523 nodes", "6,212 GPUs", "512 TPUs", "1, 2, 3",
		"<td>JCT p99</td>", "<td>Jain&#39;s fairness over queues</td>", ">Queue delay p99</th>", `class="best"`,
		"#0072B2", "#E69F00", "#009E73",
	} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if strings.Contains(page, "<1523") {
		t.Error("title not escaped")
	}
	// Each policy's lines: one per resource plus the CDF (these runs have
	// departures: the allocation is dots against the demand present).
	if n := strings.Count(page, "<polyline"); n != 3*(4+1) {
		t.Errorf("%d polylines, want 15", n)
	}
	if n := strings.Count(page, "<circle cx"); n < 3*7 {
		t.Errorf("%d markers, want the 21 protocol points at least", n)
	}
}

func TestHTMLProtocol(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, "FGD protocol", fgdRuns()); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkPage(t, page)
	// gpu, cpu, memory and alloc vs arrived: no CDF without departures, no
	// bars with one tier.
	if n := strings.Count(page, "<svg"); n != 4 {
		t.Errorf("%d plots, want 4", n)
	}
	for _, s := range []string{"no JCT distribution", "seed 42", ">fgd</text>", ">best-fit</text>"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	for _, s := range []string{"TPU", "Queue delay p99 by priority tier", "<td>JCT", "fairness"} {
		if strings.Contains(page, s) {
			t.Errorf("page has %q", s)
		}
	}
}

func TestHTMLDegenerate(t *testing.T) {
	nan := math.NaN()
	cases := map[string][]sim.Result{
		"none":      nil,
		"empty run": {{Policy: "p"}},
		"one point": {{Policy: "p", Series: []sim.Sample{{T: 0, Alloc: map[string]float64{"nvidia.com/gpu": 0.5}, Arrived: 0.5}},
			JCTCDF: []sim.CDFPoint{{X: 10, P: 1}}, JCT: sim.Stats{N: 1, Mean: 10, P50: 10, P99: 10}, Completed: 1}},
		"all zero": {{Policy: "a", Series: []sim.Sample{{Alloc: map[string]float64{"nvidia.com/gpu": 0, "cpu": 0}}, {T: 0, Alloc: map[string]float64{"nvidia.com/gpu": 0}}},
			JCTCDF: []sim.CDFPoint{{X: 0, P: 1}}, QueueDelay: [4]sim.Stats{{N: 1}, {N: 1}}},
			{Policy: "b", Seed: 1, AllocAt: []sim.AllocPoint{{}}}},
		"nan": {{Policy: "p<&>", Utilization: map[string]float64{"nvidia.com/gpu": nan, "cpu": math.Inf(1)}, GPUAlloc: nan,
			Series: []sim.Sample{{T: nan, Alloc: map[string]float64{"nvidia.com/gpu": nan}, Arrived: nan},
				{T: 1, Alloc: map[string]float64{"nvidia.com/gpu": math.Inf(-1)}, Arrived: math.Inf(1)},
				{T: 2, Alloc: map[string]float64{"nvidia.com/gpu": 0.3}, Arrived: 0.4}},
			JCTCDF:     []sim.CDFPoint{{X: nan, P: 0.5}, {X: 3, P: nan}, {X: 4, P: 1}},
			AllocAt:    []sim.AllocPoint{{Arrived: nan, Alloc: 0.2}, {Arrived: 1, Alloc: 0.5, FragRatio: nan}},
			QueueDelay: [4]sim.Stats{{N: 2, P99: nan}, {N: 2, P99: math.Inf(1)}, {N: 1, P99: 0.002}},
			SLO:        [4]float64{nan, 1, 1, 1}, Queues: 2, Fairness: nan, EventsPerSec: math.Inf(1)}},
	}
	for name, rs := range cases {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := HTML(&b, "", rs); err != nil {
				t.Fatal(err)
			}
			checkPage(t, b.String())
			if err := Table(io.Discard, rs); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestSample writes sample pages where REPORT_SAMPLE names a file (and
// the FGD protocol's next to it, -fgd.html):
// REPORT_SAMPLE=/tmp/sim-sample.html go test -run Sample ./internal/sim/report/
func TestSample(t *testing.T) {
	path := os.Getenv("REPORT_SAMPLE")
	if path == "" {
		t.Skip("REPORT_SAMPLE not set")
	}
	write := func(path, title string, rs []sim.Result) {
		var b bytes.Buffer
		if err := HTML(&b, title, rs); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(path, "openb · 1,523 nodes · 3 policies", richRuns(20000))
	write(strings.TrimSuffix(path, ".html")+"-fgd.html", "FGD protocol", fgdRuns())
	if err := Table(os.Stdout, richRuns(100)); err != nil {
		t.Fatal(err)
	}
}

// TestRender renders the page in a headless Chromium, which must not fail
// and must paint something.
func TestRender(t *testing.T) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium not found; apt-get install -y chromium")
		}
		t.Skip("chromium not found; apt-get install -y chromium")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	dir := t.TempDir()
	page, png := filepath.Join(dir, "report.html"), filepath.Join(dir, "report.png")
	var b bytes.Buffer
	if err := HTML(&b, "render", richRuns(2000)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(page, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--window-size=1280,3200", "--screenshot="+png, "file://"+page)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	st, err := os.Stat(png)
	if err != nil || st.Size() < 50_000 {
		t.Fatalf("screenshot %v, %v", st, err)
	}
	if dst := os.Getenv("REPORT_PNG"); dst != "" {
		data, _ := os.ReadFile(png)
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTableUnderFGD: runs of the FGD protocol (nothing departs, arrivals
// 1 ms apart) show no time averages nor makespan; allocation stays.
func TestTableUnderFGD(t *testing.T) {
	rs := fgdRuns()
	for i := range rs {
		rs[i].Protocol = "fgd"
	}
	var b bytes.Buffer
	if err := Table(&b, rs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, col := range []string{"GPU UTIL", "CPU UTIL", "MAKESPAN", "UNFINISHED"} {
		if strings.Contains(out, col) {
			t.Errorf("an fgd table shows %s:\n%s", col, out)
		}
	}
	for _, col := range []string{"GPU ALLOC", "FRAG", "SLO MEDIUM"} {
		if !strings.Contains(out, col) {
			t.Errorf("an fgd table lacks %s:\n%s", col, out)
		}
	}
	if w := Warnings(rs); len(w) != 0 {
		t.Errorf("fgd runs warned: %v", w)
	}
}

// TestWarnings: a replay whose jobs did not all finish or were mostly
// never placed says so, per policy; the table shows the unfinished and a
// tier whose jobs were never placed (its SLO 0, not hidden).
func TestWarnings(t *testing.T) {
	rs := []sim.Result{
		{Policy: "fifo", Seed: 1, Protocol: "replay", Jobs: 992, Placed: 134, Completed: 100, Unplaced: 858, Unfinished: 892,
			TierJobs: [4]int{0, 0, 992, 0}, SLO: [4]float64{1, 1, 0.05, 1}, JCT: sim.Stats{N: 100, Mean: 60},
			QueueDelay: [4]sim.Stats{2: {N: 134, P99: 30}}},
		{Policy: "ok", Seed: 1, Protocol: "replay", Jobs: 10, Placed: 10, Completed: 10, TierJobs: [4]int{10}, SLO: [4]float64{0, 1, 1, 1},
			JCT: sim.Stats{N: 10, Mean: 5}},
	}
	w := Warnings(rs)
	want := []string{
		"fifo: 892 of 992 jobs (mean over 1 runs) did not finish: JCT is over the 100 that did, and the unfinished are left out",
		"fifo: only 134 of 992 jobs were ever placed (14%)",
	}
	if d := cmp.Diff(want, w); d != "" {
		t.Errorf("warnings (-want +got):\n%s", d)
	}
	var b bytes.Buffer
	if err := Table(&b, rs); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, col := range []string{"UNFINISHED", "SLO URGENT", "SLO MEDIUM"} {
		if !strings.Contains(out, col) {
			t.Errorf("table lacks %s:\n%s", col, out)
		}
	}
}
