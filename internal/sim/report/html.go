package report

import (
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/hetsched/hetsched/internal/core"
	"github.com/hetsched/hetsched/internal/sim"
)

const pageCSS = `
:root{--ink:#1f2937;--muted:#6b7280;--line:#e5e7eb;--bg:#f8fafc;--card:#ffffff}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1180px;margin:0 auto;padding:28px 24px 48px}
h1{font-size:26px;margin:0 0 4px;letter-spacing:-.01em}
h2{font-size:18px;margin:0 0 4px}
.sub{color:var(--muted);margin:0 0 18px}
.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(220px,1fr));gap:12px;margin:0 0 28px}
.facts div{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:10px 14px}
.facts dt{font-size:12px;text-transform:uppercase;letter-spacing:.06em;color:var(--muted)}
.facts dd{margin:2px 0 0;font-weight:500}
.chip{display:inline-flex;align-items:center;gap:6px;margin:0 12px 0 0;white-space:nowrap}
.chip i{display:inline-block;width:12px;height:12px;border-radius:3px}
section{background:var(--card);border:1px solid var(--line);border-radius:12px;padding:18px 20px;margin:0 0 22px}
.cap{color:var(--muted);margin:0 0 12px;font-size:14px}
.scroll{overflow-x:auto}
table{border-collapse:collapse;font-size:13.5px;font-variant-numeric:tabular-nums;white-space:nowrap}
table{min-width:60%}
thead th{font-size:14px;color:var(--ink);font-weight:600;text-align:right;padding:6px 14px;border-bottom:2px solid var(--line)}
thead th:first-child{font-size:11.5px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted)}
tr.group th{text-align:left;font-size:11.5px;text-transform:uppercase;letter-spacing:.05em;color:var(--muted);font-weight:600;padding:14px 14px 4px 0;border-bottom:1px solid var(--line)}
td{text-align:right;padding:6px 14px;border-bottom:1px solid var(--line)}
th:first-child,td:first-child{text-align:left;padding-left:0;padding-right:28px}
thead .chip{margin:0}
tbody tr:hover{background:#f1f5f9}
td .sd{color:var(--muted);font-size:12px;margin-left:3px}
td.best{font-weight:700}
.grid{display:grid;grid-template-columns:repeat(auto-fit,minmax(460px,1fr));gap:16px}
figure{margin:0}
svg{display:block;max-width:100%;height:auto}
.empty{color:var(--muted);font-style:italic}
footer{color:var(--muted);font-size:12.5px;text-align:center}
`

// HTML writes one self-contained page about rs to w: a header naming the
// cluster, workload, policies and seeds; the summary table; and inline
// SVG plots (no scripts, stylesheets or fonts from elsewhere):
// utilization over time per resource type, the JCT CDF, the GPU
// allocation ratio against arrived GPU demand with the protocol's points
// marked, and per-tier p99 queue delays. The time plots show each
// policy's lowest seed; the bars are means over seeds with ±1 sd.
func HTML(w io.Writer, title string, rs []sim.Result) error {
	p := newPage(title, rs)
	if _, err := io.WriteString(w, p.render()); err != nil {
		return errorf("html: %w", err)
	}
	return nil
}

type page struct {
	title  string
	rs     []sim.Result
	ss     []Summary
	names  []string
	runs   map[string][]*sim.Result
	styles map[string]style
	nplot  int
}

func newPage(title string, rs []sim.Result) *page {
	p := &page{title: title, rs: rs, ss: Aggregate(rs), styles: map[string]style{}}
	p.names, p.runs = policies(rs)
	for i, n := range p.names {
		p.styles[n] = styleFor(i)
	}
	if strings.TrimSpace(p.title) == "" {
		p.title = "Simulation report"
	}
	return p
}

func (p *page) render() string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	b.WriteString("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n")
	b.WriteString("<title>" + esc(p.title) + "</title>\n<style>" + pageCSS + "</style>\n</head>\n<body>\n<main>\n")
	p.header(&b)
	if len(p.rs) == 0 {
		b.WriteString("<section><p class=\"empty\">No runs to report.</p></section>\n")
	} else {
		p.table(&b)
		p.utilPlots(&b)
		p.cdfPlot(&b)
		p.allocPlot(&b)
		p.delayPlot(&b)
	}
	b.WriteString("<footer>hetsched simulator report · " + strconv.Itoa(len(p.rs)) + " runs</footer>\n")
	b.WriteString("</main>\n</body>\n</html>\n")
	return b.String()
}

func commas(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	if neg {
		return "-" + string(out)
	}
	return string(out)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return commas(n) + " " + one
	}
	return commas(n) + " " + many
}

// intRange formats the range of vs: "12" or "10–14".
func intRange(vs []int, one, many string) string {
	lo, hi := slices.Min(vs), slices.Max(vs)
	if lo == hi {
		return plural(lo, one, many)
	}
	return commas(lo) + "–" + commas(hi) + " " + many
}

func (p *page) header(b *strings.Builder) {
	b.WriteString("<header>\n<h1>" + esc(p.title) + "</h1>\n")
	seeds := map[int64]bool{}
	for _, r := range p.rs {
		seeds[r.Seed] = true
	}
	b.WriteString("<p class=\"sub\">" + plural(len(p.names), "policy", "policies") + " × " + plural(len(seeds), "seed", "seeds") +
		" = " + plural(len(p.rs), "run", "runs") + "</p>\n<dl class=\"facts\">\n")

	// Clusters and workloads in order of appearance.
	type agg struct {
		name                    string
		nodes, gpus, tpus, jobs []int
	}
	var clusters, workloads []*agg
	find := func(list *[]*agg, name string) *agg {
		for _, a := range *list {
			if a.name == name {
				return a
			}
		}
		a := &agg{name: name}
		*list = append(*list, a)
		return a
	}
	for _, r := range p.rs {
		c := find(&clusters, r.Cluster)
		c.nodes, c.gpus, c.tpus = append(c.nodes, r.Nodes), append(c.gpus, r.GPUs), append(c.tpus, r.TPUs)
		wl := find(&workloads, r.Workload)
		wl.jobs = append(wl.jobs, r.Jobs)
	}
	var cl, wl []string
	for _, c := range clusters {
		parts := []string{intRange(c.nodes, "node", "nodes")}
		if slices.Max(c.gpus) > 0 {
			parts = append(parts, intRange(c.gpus, "GPU", "GPUs"))
		}
		if slices.Max(c.tpus) > 0 {
			parts = append(parts, intRange(c.tpus, "TPU", "TPUs"))
		}
		cl = append(cl, "<strong>"+esc(orDash(c.name))+"</strong> · "+strings.Join(parts, " · "))
	}
	for _, w := range workloads {
		wl = append(wl, "<strong>"+esc(orDash(w.name))+"</strong> · "+intRange(w.jobs, "job", "jobs"))
	}
	fact := func(k, v string) { b.WriteString("<div><dt>" + k + "</dt><dd>" + v + "</dd></div>\n") }
	if len(p.rs) > 0 {
		fact("Cluster", strings.Join(cl, "<br/>"))
		fact("Workload", strings.Join(wl, "<br/>"))
	}
	var chips []string
	for _, n := range p.names {
		chips = append(chips, p.chip(n))
	}
	fact("Policies", orDash(strings.Join(chips, "")))
	var ss []int64
	for s := range seeds {
		ss = append(ss, s)
	}
	slices.Sort(ss)
	var st []string
	for _, s := range ss {
		st = append(st, strconv.FormatInt(s, 10))
	}
	fact("Seeds", esc(orDash(strings.Join(st, ", "))))
	b.WriteString("</dl>\n</header>\n")
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func (p *page) chip(policy string) string {
	return "<span class=\"chip\"><i style=\"background:" + p.styles[policy].color + "\"></i>" + esc(policy) + "</span>"
}

// table writes the summary with measures as rows and policies as
// columns, which fits the page however many measures there are.
func (p *page) table(b *strings.Builder) {
	cols := columns(p.ss)
	bests := best(cols, p.ss)
	b.WriteString("<section>\n<h2>Summary</h2>\n<p class=\"cap\">Means over each policy's seeds, ± the standard deviation across seeds where there are several; bold marks the best policy per measure. Queue delay is placement minus arrival per priority tier; SLO attainment is the share of a tier's jobs placed within the tier's delay target.</p>\n")
	b.WriteString("<div class=\"scroll\"><table>\n<thead><tr><th>measure</th>")
	for _, s := range p.ss {
		b.WriteString("<th>" + p.chip(s.Policy) + "</th>")
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	group := ""
	for i, c := range cols[1:] {
		i++
		if c.group != group {
			group = c.group
			b.WriteString("<tr class=\"group\"><th colspan=\"" + strconv.Itoa(len(p.ss)+1) + "\">" + esc(group) + "</th></tr>\n")
		}
		b.WriteString("<tr><td>" + esc(c.label) + "</td>")
		for j, s := range p.ss {
			v := c.get(s)
			if bests[i] == j {
				b.WriteString("<td class=\"best\">")
			} else {
				b.WriteString("<td>")
			}
			b.WriteString(esc(v.main))
			if v.sd != "" {
				b.WriteString("<span class=\"sd\">±" + esc(v.sd) + "</span>")
			}
			b.WriteString("</td>")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table></div>\n</section>\n")
}

// first returns each policy's lowest-seed run, and a caption naming it.
func (p *page) first() ([]*sim.Result, string) {
	var out []*sim.Result
	seeds := map[int64]bool{}
	for _, n := range p.names {
		r := p.runs[n][0]
		out = append(out, r)
		seeds[r.Seed] = true
	}
	if len(seeds) == 1 {
		return out, "seed " + strconv.FormatInt(out[0].Seed, 10)
	}
	return out, "each policy's lowest seed"
}

func (p *page) legend() []legendItem {
	var l []legendItem
	for _, n := range p.names {
		l = append(l, legendItem{label: n, style: p.styles[n]})
	}
	return l
}

func (p *page) newChart(title string, w, h float64) *chart {
	p.nplot++
	return &chart{id: "plot" + strconv.Itoa(p.nplot), title: title, w: w, h: h, legend: p.legend()}
}

// resourceOrder sorts resource types: accelerators first, then cpu, memory.
func resourceOrder(keys []string) []string {
	rank := func(k string) int {
		switch k {
		case resGPU:
			return 0
		case resTPU:
			return 1
		case resCPU:
			return 3
		case resMem:
			return 4
		}
		return 2
	}
	sort.Slice(keys, func(i, j int) bool {
		if ri, rj := rank(keys[i]), rank(keys[j]); ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	return keys
}

func (p *page) utilPlots(b *strings.Builder) {
	runs, which := p.first()
	types := map[string]bool{}
	maxT := 0.0
	for _, r := range runs {
		for _, s := range r.Series {
			for k := range s.Alloc {
				types[k] = true
			}
			if finite(s.T) {
				maxT = math.Max(maxT, s.T)
			}
		}
	}
	if len(types) == 0 {
		return
	}
	var keys []string
	for k := range types {
		keys = append(keys, k)
	}
	keys = resourceOrder(keys)
	b.WriteString("<section>\n<h2>Utilization over time</h2>\n<p class=\"cap\">Allocated share of each resource type's schedulable capacity over simulated time, one line per policy (" + esc(which) + ").</p>\n<div class=\"grid\">\n")
	for _, k := range keys {
		maxY := 1.0
		for _, r := range runs {
			for _, s := range r.Series {
				if v, ok := s.Alloc[k]; ok && finite(v) {
					maxY = math.Max(maxY, v)
				}
			}
		}
		title := resLabel(k) + " allocated"
		if resLabel(k) != k {
			title += " (" + k + ")"
		}
		c := p.newChart(title, 560, 300)
		c.x = timeAxis(0, maxT, 6, "simulated time")
		c.y = linearAxis(0, maxY, 0.01, 6, "allocated (%)")
		b.WriteString("<figure>")
		c.begin(b)
		for i, r := range runs {
			var ps []pt
			for _, s := range r.Series {
				if v, ok := s.Alloc[k]; ok {
					ps = append(ps, pt{s.T, v})
				}
			}
			c.line(b, ps, p.styles[p.names[i]], p.names[i])
		}
		c.end(b)
		b.WriteString("</figure>\n")
	}
	b.WriteString("</div>\n</section>\n")
}

func (p *page) cdfPlot(b *strings.Builder) {
	runs, which := p.first()
	lo, hi := math.Inf(1), 0.0
	have := false
	for _, r := range runs {
		for _, q := range r.JCTCDF {
			if !finite(q.X) || !finite(q.P) {
				continue
			}
			have = true
			hi = math.Max(hi, q.X)
			if q.X > 0 {
				lo = math.Min(lo, q.X)
			}
		}
	}
	b.WriteString("<section>\n<h2>Job completion time</h2>\n")
	if !have {
		b.WriteString("<p class=\"empty\">No job completed in these runs (no departures), so there is no JCT distribution.</p>\n</section>\n")
		return
	}
	logX := lo < math.Inf(1) && hi/lo > 100
	c := p.newChart("JCT CDF", 1100, 380)
	caption := "Share of completed jobs whose completion time (completion minus arrival) is at most x, one line per policy (" + esc(which) + ")"
	if logX {
		c.x = logTimeAxis(lo, hi, "job completion time (log scale)")
		caption += "; x is logarithmic, the times spanning more than two decades"
	} else {
		c.x = timeAxis(0, hi, 8, "job completion time")
	}
	c.y = linearAxis(0, 1, 0.01, 6, "completed jobs (%)")
	b.WriteString("<p class=\"cap\">" + caption + ".</p>\n<figure>")
	c.begin(b)
	for i, r := range runs {
		var ps []pt
		for _, q := range r.JCTCDF {
			if finite(q.X) && finite(q.P) {
				ps = append(ps, pt{q.X, q.P})
			}
		}
		sort.SliceStable(ps, func(i, j int) bool { return ps[i].X < ps[j].X })
		c.line(b, cdfSteps(ps), p.styles[p.names[i]], p.names[i])
	}
	c.end(b)
	b.WriteString("</figure>\n</section>\n")
}

// cdfSteps draws a short empirical CDF as the step function it is,
// rising from 0 at its first point; a long one is dense enough as is.
func cdfSteps(ps []pt) []pt {
	if len(ps) == 0 {
		return nil
	}
	out := []pt{{ps[0].X, 0}}
	if len(ps) > maxPoints/2 {
		return append(out, ps...)
	}
	for i, q := range ps {
		if i > 0 {
			out = append(out, pt{q.X, ps[i-1].Y})
		}
		out = append(out, q)
	}
	return out
}

func (p *page) allocPlot(b *strings.Builder) {
	runs, which := p.first()
	lines := make([][]pt, len(runs))
	maxX, maxY := 0.0, 1.0
	have := false
	// With departures (a replay), the arrived demand only grows: the
	// allocation is set against the demand present (arrived, not
	// completed) instead, one dot per sample.
	replay := false
	for _, r := range runs {
		replay = replay || r.Completed > 0
	}
	xOf := func(s sim.Sample) float64 {
		if replay {
			return s.Demand
		}
		return s.Arrived
	}
	for i, r := range runs {
		// Up to the end of the arrivals: after it the arrived demand stands
		// still while departures drain the allocation.
		last := 0.0
		for _, s := range r.Series {
			if finite(xOf(s)) {
				last = math.Max(last, xOf(s))
			}
		}
		for _, s := range r.Series {
			v, ok := s.Alloc[resGPU]
			if !ok || !finite(v) || !finite(xOf(s)) {
				continue
			}
			lines[i] = append(lines[i], pt{xOf(s), v})
			maxY = math.Max(maxY, v)
			if !replay && xOf(s) >= last {
				break
			}
		}
		if last > 0 && len(lines[i]) > 0 {
			have = true
		}
		maxX = math.Max(maxX, last)
		for _, a := range r.AllocAt {
			if finite(a.Arrived) && finite(a.Alloc) {
				have = true
				maxX = math.Max(maxX, a.Arrived)
				maxY = math.Max(maxY, a.Alloc)
			}
		}
	}
	if !have {
		return
	}
	title, axis := "GPU allocation ratio vs arrived GPU demand", "arrived GPU demand (% of GPU capacity)"
	if replay {
		title, axis = "GPU allocation ratio vs GPU demand present", "GPU demand present: arrived, not completed (% of GPU capacity)"
	}
	c := p.newChart(title, 1100, 400)
	c.x = linearAxis(0, maxX, 0.01, 8, axis)
	c.y = linearAxis(0, maxY, 0.01, 6, "GPU allocated (%)")
	ref := style{inkAxis, "5 4"}
	c.legend = append(c.legend, legendItem{label: "allocated = arrived", style: ref})
	hasPts := false
	for _, r := range runs {
		hasPts = hasPts || len(r.AllocAt) > 0
	}
	if hasPts {
		c.legend = append(c.legend, legendItem{label: "protocol points", style: style{color: inkMuted}, kind: legDot})
	}
	if replay {
		b.WriteString("<section>\n<h2>GPU allocation ratio</h2>\n<p class=\"cap\">Allocated GPU share against the GPU demand present (arrived and not completed), one dot per sample over time, one colour per policy (" + esc(which) + "). Below the dashed diagonal, demand is waiting")
	} else {
		b.WriteString("<section>\n<h2>GPU allocation ratio</h2>\n<p class=\"cap\">Allocated GPU share as GPU demand arrives (the FGD protocol), until the last arrival, one line per policy (" + esc(which) + "). Where the line falls below the dashed diagonal, arrived demand is waiting or could not be placed")
	}
	if hasPts {
		b.WriteString("; dots mark the allocation when the arrived demand first reached each protocol level (hover for the fragmentation ratio)")
	}
	b.WriteString(".</p>\n<figure>")
	c.begin(b)
	m := math.Min(c.x.hi, c.y.hi)
	b.WriteString(`<line x1="` + ff(c.px(0)) + `" y1="` + ff(c.py(0)) + `" x2="` + ff(c.px(m)) + `" y2="` + ff(c.py(m)) + `" stroke="` + ref.color + `" stroke-width="1.5" stroke-dasharray="` + ref.dash + `"/>`)
	for i := range runs {
		if !replay {
			c.line(b, lines[i], p.styles[p.names[i]], p.names[i])
			continue
		}
		col := p.styles[p.names[i]].color
		for _, q := range lines[i] {
			b.WriteString(`<circle cx="` + ff(c.px(q.X)) + `" cy="` + ff(c.py(q.Y)) + `" r="2" fill="` + col + `" fill-opacity="0.5"/>`)
		}
	}
	for i, r := range runs {
		st := p.styles[p.names[i]]
		for _, a := range r.AllocAt {
			if !finite(a.Arrived) || !finite(a.Alloc) {
				continue
			}
			tip := p.names[i] + ": arrived " + pct(a.Arrived) + ", allocated " + pct(a.Alloc)
			if finite(a.FragRatio) {
				tip += ", fragmented " + pct(a.FragRatio)
			}
			b.WriteString(`<circle cx="` + ff(c.px(a.Arrived)) + `" cy="` + ff(c.py(a.Alloc)) + `" r="4" fill="` + st.color + `" stroke="#ffffff" stroke-width="1.5"><title>` + esc(tip) + `</title></circle>`)
		}
	}
	c.end(b)
	b.WriteString("</figure>\n</section>\n")
}

func (p *page) delayPlot(b *strings.Builder) {
	tiers := tiersWithJobs(p.ss)
	if len(tiers) < 2 {
		return
	}
	targets := make([]float64, len(tiers))
	cfg := core.DefaultConfig()
	for i, t := range tiers {
		targets[i] = cfg.Tiers[t].Target.Seconds()
	}
	lo, hi := math.Inf(1), 0.0
	note := func(v float64) {
		if finite(v) && v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	for _, s := range p.ss {
		for _, t := range tiers {
			m := s.QueueDelayP99[t]
			if m.N > 0 {
				note(m.Mean)
				note(m.Mean + m.SD)
			}
		}
	}
	for _, v := range targets {
		note(v)
	}
	var groups []string
	for _, t := range tiers {
		groups = append(groups, tierName(t))
	}
	c := p.newChart("Queue delay p99 by priority tier", 1100, 380)
	c.xCategories = groups
	logY := lo < math.Inf(1) && hi/lo > 100
	if logY {
		c.y = logTimeAxis(lo, hi*1.5, "queue delay p99 (log)") // headroom for labels
	} else {
		c.y = timeAxis(0, hi*1.08, 6, "queue delay p99")
	}
	c.x = axis{lo: 0, hi: 1}
	tgt := style{inkText, "4 3"}
	c.legend = append(c.legend, legendItem{label: "tier's delay target", style: tgt})
	for i := range p.names {
		c.legend[i].kind = legBox
	}
	caption := "p99 of placement minus arrival in each tier that had jobs, mean over seeds"
	if p.multiSeed() {
		caption += " with ±1 sd whiskers"
	}
	if logY {
		caption += "; the delay axis is logarithmic"
	}
	b.WriteString("<section>\n<h2>Queue delay by tier</h2>\n<p class=\"cap\">" + caption + ". Dashed marks are the tiers' delay targets.</p>\n<figure>")
	c.begin(b)
	pw := c.w - c.left - c.right
	gw := pw / float64(len(tiers))
	bw := math.Min(gw*0.76/float64(max(1, len(p.ss))), 90) // no slabs when few policies
	inner := bw * float64(max(1, len(p.ss)))
	base := c.py(c.y.lo)
	var labels strings.Builder
	for gi, t := range tiers {
		g0 := c.left + gw*float64(gi) + (gw-inner)/2
		for si, s := range p.ss {
			m := s.QueueDelayP99[t]
			if m.N == 0 {
				continue
			}
			st := p.styles[s.Policy]
			x := g0 + bw*float64(si) + 1.5
			w := math.Max(bw-3, 1)
			top := base
			if m.Mean > c.y.lo || (!c.y.log && m.Mean > 0) {
				top = c.py(m.Mean)
			}
			tip := s.Policy + " · " + tierName(t) + ": p99 " + human(m.Mean)
			if m.N > 1 {
				tip += " ± " + human(m.SD) + " over " + strconv.Itoa(m.N) + " seeds"
			}
			b.WriteString(`<rect x="` + ff(x) + `" y="` + ff(top) + `" width="` + ff(w) + `" height="` + ff(math.Max(base-top, 0)) + `" rx="2" fill="` + st.color + `"><title>` + esc(tip) + `</title></rect>`)
			labelY := top
			if m.N > 1 && m.SD > 0 {
				hiV := m.Mean + m.SD
				loV := m.Mean - m.SD
				yHi := c.py(hiV)
				yLo := base
				if loV > c.y.lo || (!c.y.log && loV > 0) {
					yLo = c.py(loV)
				}
				cx := x + w/2
				b.WriteString(`<path d="M` + ff(cx) + ` ` + ff(yLo) + `V` + ff(yHi) + `M` + ff(cx-4) + ` ` + ff(yHi) + `H` + ff(cx+4) + `" stroke="` + inkText + `" stroke-width="1.2" fill="none"/>`)
				labelY = math.Min(labelY, yHi)
			}
			if bw >= 30 {
				// haloed, so a target line behind stays readable
				labels.WriteString(`<text x="` + ff(x+w/2) + `" y="` + ff(labelY-5) + `" font-size="10" text-anchor="middle" fill="` + inkText +
					`" stroke="#ffffff" stroke-width="3" stroke-linejoin="round" paint-order="stroke">` + esc(human(m.Mean)) + `</text>`)
			}
		}
		if y := c.py(targets[gi]); finite(y) {
			b.WriteString(`<line x1="` + ff(g0-6) + `" y1="` + ff(y) + `" x2="` + ff(g0+inner+6) + `" y2="` + ff(y) + `" stroke="` + tgt.color + `" stroke-width="1.5" stroke-dasharray="` + tgt.dash + `"><title>` + esc(tierName(tiers[gi])+" target "+human(targets[gi])) + `</title></line>`)
		}
	}
	b.WriteString(labels.String())
	c.end(b)
	b.WriteString("</figure>\n</section>\n")
}

func (p *page) multiSeed() bool {
	for _, s := range p.ss {
		if s.Runs > 1 {
			return true
		}
	}
	return false
}
