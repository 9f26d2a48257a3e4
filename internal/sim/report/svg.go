package report

import (
	"html"
	"math"
	"strconv"
	"strings"
)

// maxPoints bounds the points of one drawn line.
const maxPoints = 600

// Okabe & Ito's palette, safe for the common colour-vision deficiencies
// (its yellow left out: too faint on white). Past seven policies the
// colours repeat with a dash pattern.
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000"}

var dashes = []string{"", "6 3", "2 3", "8 3 2 3"}

// style is how one policy is drawn.
type style struct {
	color, dash string
}

func styleFor(i int) style {
	return style{palette[i%len(palette)], dashes[(i/len(palette))%len(dashes)]}
}

const (
	fontStack = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
	inkText   = "#1f2937"
	inkMuted  = "#6b7280"
	inkGrid   = "#e5e7eb"
	inkAxis   = "#9ca3af"
	fontTick  = 11.0
	fontTitle = 14.0
	charW     = 0.58 // average glyph width per font size unit
)

func esc(s string) string { return html.EscapeString(s) }

// ff formats an SVG coordinate: a tenth of a pixel is enough, and a
// non-finite number never reaches the output.
func ff(v float64) string {
	if !finite(v) {
		return "0"
	}
	v = math.Round(v*10) / 10
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func textW(s string, size float64) float64 {
	return float64(len([]rune(s))) * size * charW
}

type pt struct{ X, Y float64 }

type tick struct {
	v     float64
	label string
}

// axis maps data values onto [0, 1].
type axis struct {
	lo, hi float64 // the domain; > 0 on a log axis
	log    bool
	ticks  []tick
	label  string
}

func (a axis) frac(v float64) float64 {
	if a.log {
		if v <= a.lo {
			return 0
		}
		return (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	}
	if a.hi == a.lo {
		return 0
	}
	return (v - a.lo) / (a.hi - a.lo)
}

// niceNum is Heckbert's nice number: 1, 2 or 5 times a power of ten near
// x, rounded or at least x.
func niceNum(x float64, round bool) float64 {
	if !(x > 0) || !finite(x) {
		return 1
	}
	e := math.Floor(math.Log10(x))
	p := math.Pow(10, e)
	f := x / p
	var n float64
	if round {
		switch {
		case f < 1.5:
			n = 1
		case f < 3:
			n = 2
		case f < 7:
			n = 5
		default:
			n = 10
		}
	} else {
		switch {
		case f <= 1:
			n = 1
		case f <= 2:
			n = 2
		case f <= 5:
			n = 5
		default:
			n = 10
		}
	}
	return n * p
}

// niceTicks returns about n round ticks covering [lo, hi], the domain
// widened to the outer ticks. A degenerate or non-finite range becomes a
// sensible one.
func niceTicks(lo, hi float64, n int) (ticks []float64, step float64) {
	if !finite(lo) || !finite(hi) {
		lo, hi = 0, 1
	}
	if lo > hi {
		lo, hi = hi, lo
	}
	if hi == lo {
		switch {
		case lo == 0:
			hi = 1
		case lo > 0:
			lo, hi = 0, lo
		default:
			hi = 0
		}
	}
	step = niceNum(niceNum(hi-lo, false)/float64(n-1), true)
	first := math.Floor(lo/step+1e-9) * step
	last := math.Ceil(hi/step-1e-9) * step
	for i := 0; ; i++ {
		v := first + float64(i)*step
		if v > last+step/2 || i > 100 {
			break
		}
		// Round away binary noise (0.30000000000000004).
		v = math.Round(v/step) * step
		if v == 0 {
			v = 0 // no negative zero
		}
		ticks = append(ticks, v)
	}
	return ticks, step
}

// tickLabel formats a tick value with the decimals its step needs.
func tickLabel(v, step float64) string {
	dec := 0
	if step > 0 && step < 1 {
		dec = int(math.Ceil(-math.Log10(step) - 1e-9))
	}
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if s == "-0" {
		s = "0"
	}
	return s
}

// linearAxis is a linear axis over [lo, hi] data units shown divided by
// scale (a time unit, or 0.01 for percentages).
func linearAxis(lo, hi, scale float64, n int, label string) axis {
	vs, step := niceTicks(lo/scale, hi/scale, n)
	a := axis{lo: vs[0] * scale, hi: vs[len(vs)-1] * scale, label: label}
	for _, v := range vs {
		a.ticks = append(a.ticks, tick{v * scale, tickLabel(v, step)})
	}
	return a
}

// timeAxis is a linear axis over durations in seconds, in the unit that
// reads best for hi.
func timeAxis(lo, hi float64, n int, what string) axis {
	u := unitFor(hi)
	return linearAxis(lo, hi, u.sec, n, what+" ("+u.suffix+")")
}

// logTimeTicks are the ticks a log duration axis picks from.
var logTimeTicks = func() []float64 {
	var ts []float64
	for _, u := range []float64{1e-6, 1e-3} {
		for _, m := range []float64{1, 10, 100} {
			ts = append(ts, m*u)
		}
	}
	return append(ts, 1, 10, 60, 600, 3600, 86400, 864000, 8640000, 86400000)
}()

// logTimeAxis is a log axis over durations in [lo, hi] seconds (lo > 0),
// ticked at round durations: 1ms, 10ms, ..., 1m, 10m, 1h, 1d, 10d.
func logTimeAxis(lo, hi float64, label string) axis {
	if !(lo > 0) || !finite(lo) {
		lo = 1e-6
	}
	if !(hi > lo) || !finite(hi) {
		hi = lo * 10
	}
	a := axis{log: true, label: label}
	a.lo, a.hi = logTimeTicks[0], logTimeTicks[len(logTimeTicks)-1]
	for _, t := range logTimeTicks {
		if t <= lo*(1+1e-9) {
			a.lo = t
		}
	}
	for i := len(logTimeTicks) - 1; i >= 0; i-- {
		if logTimeTicks[i] >= hi*(1-1e-9) {
			a.hi = logTimeTicks[i]
		}
	}
	if a.hi <= a.lo { // beyond the list's ends: decades
		a.lo = math.Pow(10, math.Floor(math.Log10(lo)))
		a.hi = math.Pow(10, math.Ceil(math.Log10(hi)))
		if a.hi <= a.lo {
			a.hi = a.lo * 10
		}
		for v := a.lo; v <= a.hi*(1+1e-9); v *= 10 {
			a.ticks = append(a.ticks, tick{v, tickDur(v)})
		}
		return a
	}
	var ts []tick
	for _, t := range logTimeTicks {
		if t >= a.lo*(1-1e-9) && t <= a.hi*(1+1e-9) {
			ts = append(ts, tick{t, tickDur(t)})
		}
	}
	// Keep the labels apart: at most eight ticks.
	for len(ts) > 8 {
		var thin []tick
		for i, t := range ts {
			if i%2 == 0 || i == len(ts)-1 {
				thin = append(thin, t)
			}
		}
		if len(thin) == len(ts) {
			break
		}
		ts = thin
	}
	a.ticks = ts
	return a
}

// tickDur labels a round duration: whole days in days (1d, not 24h).
func tickDur(sec float64) string {
	if d := sec / 86400; d >= 1 && d == math.Trunc(d) {
		return num(d) + "d"
	}
	return human(sec)
}

// legendKind is how a legend entry is drawn.
type legendKind int

const (
	legLine legendKind = iota
	legBox
	legDot
)

type legendItem struct {
	label string
	style style
	kind  legendKind
}

// chart is the frame of one plot: title, legend, axes, gridlines.
type chart struct {
	id, title string
	w, h      float64
	x, y      axis
	legend    []legendItem
	// xCategories replaces the x ticks with centred group labels (bars).
	xCategories []string

	left, right, top, bottom float64
	legendRows               [][]int
}

// layout sizes the margins around the plot area.
func (c *chart) layout() {
	maxY := 0.0
	for _, t := range c.y.ticks {
		maxY = math.Max(maxY, textW(t.label, fontTick))
	}
	c.left = math.Ceil(maxY) + 10 + 20
	c.right = 18
	if len(c.x.ticks) > 0 && len(c.xCategories) == 0 {
		// room for the last tick label's right half
		c.right = math.Max(c.right, textW(c.x.ticks[len(c.x.ticks)-1].label, fontTick)/2+4)
	}
	c.bottom = 46
	// Legend rows under the title, wrapped to the plot's width.
	avail := c.w - c.left - c.right
	c.legendRows = nil
	var row []int
	x := 0.0
	for i, it := range c.legend {
		iw := 24 + textW(it.label, fontTick) + 16
		if len(row) > 0 && x+iw > avail {
			c.legendRows = append(c.legendRows, row)
			row, x = nil, 0
		}
		row = append(row, i)
		x += iw
	}
	if len(row) > 0 {
		c.legendRows = append(c.legendRows, row)
	}
	c.top = 30 + 18*float64(len(c.legendRows)) + 10
	// Keep the plot area usable however long the legend.
	if min := 120.0; c.h-c.top-c.bottom < min {
		c.h = c.top + c.bottom + min
	}
}

func (c *chart) px(v float64) float64 { return c.left + c.x.frac(v)*(c.w-c.left-c.right) }
func (c *chart) py(v float64) float64 { return c.h - c.bottom - c.y.frac(v)*(c.h-c.top-c.bottom) }

// begin writes the frame up to the plot area's contents.
func (c *chart) begin(b *strings.Builder) {
	c.layout()
	pw, ph := c.w-c.left-c.right, c.h-c.top-c.bottom
	b.WriteString(`<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ` + ff(c.w) + ` ` + ff(c.h) +
		`" width="` + ff(c.w) + `" height="` + ff(c.h) + `" role="img" aria-labelledby="` + c.id + `-t" font-family="` + esc(fontStack) + `">`)
	b.WriteString(`<title id="` + c.id + `-t">` + esc(c.title) + `</title>`)
	b.WriteString(`<defs><clipPath id="` + c.id + `-c"><rect x="` + ff(c.left) + `" y="` + ff(c.top-4) + `" width="` + ff(pw) + `" height="` + ff(ph+8) + `"/></clipPath></defs>`)
	b.WriteString(`<rect width="100%" height="100%" fill="#ffffff"/>`)
	b.WriteString(`<text x="` + ff(c.left) + `" y="20" font-size="` + ff(fontTitle) + `" font-weight="600" fill="` + inkText + `">` + esc(c.title) + `</text>`)
	// legend
	for r, row := range c.legendRows {
		x, y := c.left, 30+18*float64(r)+9
		for _, i := range row {
			it := c.legend[i]
			switch it.kind {
			case legBox:
				b.WriteString(`<rect x="` + ff(x) + `" y="` + ff(y-5) + `" width="16" height="10" rx="2" fill="` + it.style.color + `"/>`)
			case legDot:
				b.WriteString(`<circle cx="` + ff(x+8) + `" cy="` + ff(y) + `" r="3.5" fill="` + it.style.color + `" stroke="#ffffff" stroke-width="1"/>`)
			default:
				b.WriteString(`<line x1="` + ff(x) + `" y1="` + ff(y) + `" x2="` + ff(x+18) + `" y2="` + ff(y) + `" stroke="` + it.style.color + `" stroke-width="2.5"` + dashAttr(it.style.dash) + `/>`)
			}
			b.WriteString(`<text x="` + ff(x+24) + `" y="` + ff(y+4) + `" font-size="` + ff(fontTick) + `" fill="` + inkText + `">` + esc(it.label) + `</text>`)
			x += 24 + textW(it.label, fontTick) + 16
		}
	}
	// gridlines and y ticks
	for _, t := range c.y.ticks {
		y := c.py(t.v)
		b.WriteString(`<line x1="` + ff(c.left) + `" y1="` + ff(y) + `" x2="` + ff(c.w-c.right) + `" y2="` + ff(y) + `" stroke="` + inkGrid + `" stroke-width="1"/>`)
		b.WriteString(`<text x="` + ff(c.left-7) + `" y="` + ff(y+3.5) + `" font-size="` + ff(fontTick) + `" text-anchor="end" fill="` + inkMuted + `">` + esc(t.label) + `</text>`)
	}
	if len(c.xCategories) > 0 {
		gw := pw / float64(len(c.xCategories))
		for i, l := range c.xCategories {
			x := c.left + gw*(float64(i)+0.5)
			b.WriteString(`<text x="` + ff(x) + `" y="` + ff(c.h-c.bottom+17) + `" font-size="` + ff(fontTick+1) + `" text-anchor="middle" fill="` + inkText + `">` + esc(l) + `</text>`)
		}
	} else {
		for _, t := range c.x.ticks {
			x := c.px(t.v)
			b.WriteString(`<line x1="` + ff(x) + `" y1="` + ff(c.top) + `" x2="` + ff(x) + `" y2="` + ff(c.h-c.bottom) + `" stroke="` + inkGrid + `" stroke-width="1"/>`)
			b.WriteString(`<line x1="` + ff(x) + `" y1="` + ff(c.h-c.bottom) + `" x2="` + ff(x) + `" y2="` + ff(c.h-c.bottom+4) + `" stroke="` + inkAxis + `" stroke-width="1"/>`)
			b.WriteString(`<text x="` + ff(x) + `" y="` + ff(c.h-c.bottom+16) + `" font-size="` + ff(fontTick) + `" text-anchor="middle" fill="` + inkMuted + `">` + esc(t.label) + `</text>`)
		}
	}
	// axes
	b.WriteString(`<line x1="` + ff(c.left) + `" y1="` + ff(c.h-c.bottom) + `" x2="` + ff(c.w-c.right) + `" y2="` + ff(c.h-c.bottom) + `" stroke="` + inkAxis + `" stroke-width="1"/>`)
	b.WriteString(`<line x1="` + ff(c.left) + `" y1="` + ff(c.top) + `" x2="` + ff(c.left) + `" y2="` + ff(c.h-c.bottom) + `" stroke="` + inkAxis + `" stroke-width="1"/>`)
	if c.x.label != "" {
		b.WriteString(`<text x="` + ff(c.left+pw/2) + `" y="` + ff(c.h-8) + `" font-size="` + ff(fontTick+0.5) + `" text-anchor="middle" fill="` + inkText + `">` + esc(c.x.label) + `</text>`)
	}
	if c.y.label != "" {
		cx, cy := 13.0, c.top+ph/2
		b.WriteString(`<text x="` + ff(cx) + `" y="` + ff(cy) + `" font-size="` + ff(fontTick+0.5) + `" text-anchor="middle" fill="` + inkText + `" transform="rotate(-90 ` + ff(cx) + ` ` + ff(cy) + `)">` + esc(c.y.label) + `</text>`)
	}
	b.WriteString(`<g clip-path="url(#` + c.id + `-c)">`)
}

func (c *chart) end(b *strings.Builder) {
	b.WriteString(`</g></svg>`)
}

func dashAttr(d string) string {
	if d == "" {
		return ""
	}
	return ` stroke-dasharray="` + d + `"`
}

// project maps data points to pixels, dropping non-finite ones.
func (c *chart) project(ps []pt) []pt {
	out := make([]pt, 0, len(ps))
	for _, p := range ps {
		if !finite(p.X) || !finite(p.Y) {
			continue
		}
		q := pt{c.px(p.X), c.py(p.Y)}
		if finite(q.X) && finite(q.Y) {
			out = append(out, q)
		}
	}
	return out
}

// line draws ps (data units) as one polyline of at most maxPoints points,
// a dot when there is a single point.
func (c *chart) line(b *strings.Builder, ps []pt, st style, name string) {
	q := lttb(c.project(ps), maxPoints)
	switch len(q) {
	case 0:
		return
	case 1:
		b.WriteString(`<circle cx="` + ff(q[0].X) + `" cy="` + ff(q[0].Y) + `" r="3" fill="` + st.color + `"><title>` + esc(name) + `</title></circle>`)
		return
	}
	b.WriteString(`<polyline fill="none" stroke="` + st.color + `" stroke-width="2" stroke-linejoin="round" stroke-linecap="round"` + dashAttr(st.dash) + ` points="`)
	for i, p := range q {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(ff(p.X) + "," + ff(p.Y))
	}
	b.WriteString(`"><title>` + esc(name) + `</title></polyline>`)
}

// lttb downsamples ps to at most n points with Steinarsson's
// largest-triangle-three-buckets, which keeps a line's peaks and shape.
func lttb(ps []pt, n int) []pt {
	if len(ps) <= n || n < 3 {
		return ps
	}
	out := make([]pt, 0, n)
	out = append(out, ps[0])
	every := float64(len(ps)-2) / float64(n-2)
	a := 0
	for i := 0; i < n-2; i++ {
		s := int(float64(i+1)*every) + 1
		e := min(int(float64(i+2)*every)+1, len(ps))
		var ax, ay float64
		for _, p := range ps[s:e] {
			ax += p.X
			ay += p.Y
		}
		if k := float64(e - s); k > 0 {
			ax, ay = ax/k, ay/k
		}
		lo, hi := int(float64(i)*every)+1, int(float64(i+1)*every)+1
		bi, ba := lo, -1.0
		for j := lo; j < hi && j < len(ps); j++ {
			area := math.Abs((ps[a].X-ax)*(ps[j].Y-ps[a].Y) - (ps[a].X-ps[j].X)*(ay-ps[a].Y))
			if area > ba {
				bi, ba = j, area
			}
		}
		out = append(out, ps[bi])
		a = bi
	}
	return append(out, ps[len(ps)-1])
}
