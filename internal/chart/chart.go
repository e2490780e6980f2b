// Package chart draws log-log line charts as SVG: one or more panels side by
// side, each with a title, labelled axes, a line and markers per series and a
// legend. It is the benchmark report's plotting, small enough to keep the
// module free of a plotting library. Output is deterministic: the same
// charts give the same bytes.
package chart

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
)

// Point is one measurement.
type Point struct{ X, Y float64 }

// Series is one line: its legend name and its points in drawing order.
type Series struct {
	Name   string
	Points []Point
}

// Chart is one panel. Points that are not positive and finite cannot sit on a
// log axis and are left out (on a linear y axis, those that are not finite).
type Chart struct {
	Title, XLabel, YLabel string
	Series                []Series
	// XTick labels a tick of the x axis; nil: the number itself. Ticks sit
	// at powers of XBase (10 when 0), e.g. 4 with a bytes formatter for
	// 1 KiB, 4 KiB, 16 KiB, ...
	XTick func(float64) string
	XBase float64
	// YLinear puts the y axis on a linear scale (ticks at 1, 2 or 5 times
	// a power of ten) for values close to each other, such as ratios near
	// 1 that a log axis would crush; its points may be 0 or negative.
	YLinear bool
}

// Panel size in SVG user units (points) without its legend, which goes
// beneath the plot, two entries a row, so it never hides a line.
const (
	PanelWidth  = 420
	PanelHeight = 320
)

// margins of the plot area inside a panel, and the legend's row height.
const (
	left, right, top, bottom = 62.0, 24.0, 30.0, 44.0
	fontSize                 = 11.0
	legendRow                = 15.0
)

var (
	palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}
	dashes  = []string{"", "6,3", "2,2", "8,3,2,3", "4,4", "10,3", "1,3"}
)

// WriteSVG writes charts side by side as one SVG document.
func WriteSVG(w io.Writer, charts ...Chart) error {
	bw := bufio.NewWriter(w)
	width, height := PanelWidth*len(charts), float64(PanelHeight)
	for _, c := range charts {
		if n := len(c.drawn()); n > 0 {
			height = max(height, PanelHeight+legendRow*float64((n+1)/2)+4)
		}
	}
	fmt.Fprintf(bw, `<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%g" viewBox="0 0 %d %g" font-family="sans-serif" font-size="%g">
<rect width="100%%" height="100%%" fill="white"/>
`, width, height, width, height, fontSize)
	for i, c := range charts {
		fmt.Fprintf(bw, "<g transform=\"translate(%d,0)\">\n", i*PanelWidth)
		c.draw(bw)
		bw.WriteString("</g>\n")
	}
	bw.WriteString("</svg>\n")
	return bw.Flush()
}

// axis maps a log-scaled data range onto a pixel range. Ticks sit at whole
// powers of the base, so their values are exact.
type axis struct {
	lo, hi float64 // log10 of the axis ends (linear: the ends), both ticks
	linear bool
	p0, p1 float64 // pixels of lo and hi
	label  func(float64) string
	ticks  []float64 // tick values, from lo to hi
}

func newAxis(min, max, base float64, maxTicks int, label func(float64) string, p0, p1 float64) *axis {
	if base <= 1 {
		base = 10
	}
	if label == nil {
		label = number
	}
	lb := math.Log10(base)
	// Exponents of the powers of base around the data; a small epsilon so
	// that a value that is a power itself is not pushed a step out.
	kLo := int(math.Floor(math.Log10(min)/lb + 1e-9))
	kHi := int(math.Ceil(math.Log10(max)/lb - 1e-9))
	if kHi <= kLo {
		kHi = kLo + 1
	}
	// At most maxTicks intervals: a wider range skips powers.
	step := (kHi - kLo + maxTicks - 1) / maxTicks
	kHi = kLo + step*((kHi-kLo+step-1)/step)
	a := &axis{lo: float64(kLo) * lb, hi: float64(kHi) * lb, p0: p0, p1: p1, label: label}
	for k := kLo; k <= kHi; k += step {
		a.ticks = append(a.ticks, math.Pow(base, float64(k)))
	}
	return a
}

// newLinearAxis is a linear axis from the tick at or below vmin to the
// one at or above vmax, ticks a step of 1, 2 or 5 times a power of ten apart,
// at most maxTicks intervals.
func newLinearAxis(vmin, vmax float64, maxTicks int, p0, p1 float64) *axis {
	if vmax <= vmin { // one value: a little room around it
		pad := math.Max(math.Abs(vmin), 1) / 20
		vmin, vmax = vmin-pad, vmax+pad
	}
	span := vmax - vmin
	mag := math.Pow(10, math.Floor(math.Log10(span/float64(maxTicks))))
	step := 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag*float64(maxTicks) >= span {
			step = m * mag
			break
		}
	}
	kLo, kHi := math.Floor(vmin/step+1e-9), math.Ceil(vmax/step-1e-9)
	if kHi <= kLo {
		kHi = kLo + 1
	}
	digits := max(0, int(-math.Floor(math.Log10(step)+1e-9)))
	a := &axis{lo: kLo * step, hi: kHi * step, linear: true, p0: p0, p1: p1,
		label: func(v float64) string { return strconv.FormatFloat(v, 'f', digits, 64) }}
	for k := kLo; k <= kHi; k++ {
		a.ticks = append(a.ticks, k*step)
	}
	return a
}

func (a *axis) pos(v float64) float64 {
	if a.linear {
		return a.p0 + (v-a.lo)/(a.hi-a.lo)*(a.p1-a.p0)
	}
	return a.p0 + (math.Log10(v)-a.lo)/(a.hi-a.lo)*(a.p1-a.p0)
}

// number prints a tick value without exponent noise: 1000, 0.01, 1e+09.
func number(v float64) string {
	if v >= 1e-3 && v < 1e7 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// usable reports whether p can be drawn: finite, and positive on log
// axes.
func (c *Chart) usable(p Point) bool {
	return p.X > 0 && (p.Y > 0 || c.YLinear) && !math.IsInf(p.X, 0) && !math.IsInf(p.Y, 0) && !math.IsNaN(p.X) && !math.IsNaN(p.Y)
}

func (c *Chart) draw(w *bufio.Writer) {
	x0, x1 := left, PanelWidth-right
	y0, y1 := PanelHeight-bottom, top // y grows downwards in SVG
	// A bold character is about 0.62 em wide: shrink a long title to fit.
	titleSize := min(fontSize, (PanelWidth-8)/(0.62*float64(len([]rune(c.Title)))))
	fmt.Fprintf(w, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\" font-weight=\"bold\" font-size=\"%.1f\">%s</text>\n", PanelWidth/2.0, top-12, titleSize, esc(c.Title))
	fmt.Fprintf(w, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%s</text>\n", (x0+x1)/2, y0+28, esc(c.XLabel))
	fmt.Fprintf(w, "<text transform=\"translate(14,%g) rotate(-90)\" text-anchor=\"middle\">%s</text>\n", (y0+y1)/2, esc(c.YLabel))
	fmt.Fprintf(w, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"black\"/>\n", x0, y1, x1-x0, y0-y1)

	xmin, xmax, ymin, ymax := math.Inf(1), math.Inf(-1), math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			if c.usable(p) {
				xmin, xmax = math.Min(xmin, p.X), math.Max(xmax, p.X)
				ymin, ymax = math.Min(ymin, p.Y), math.Max(ymax, p.Y)
			}
		}
	}
	if math.IsInf(xmin, 1) {
		return // nothing to draw: the frame and the labels say so
	}
	xa := newAxis(xmin, xmax, c.XBase, 6, c.XTick, x0, x1)
	ya := newAxis(ymin, ymax, 10, 8, nil, y0, y1)
	if c.YLinear {
		ya = newLinearAxis(ymin, ymax, 8, y0, y1)
	}
	for _, t := range xa.ticks {
		px := xa.pos(t)
		fmt.Fprintf(w, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"#dddddd\"/>\n", px, y0, px, y1)
		fmt.Fprintf(w, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%s</text>\n", px, y0+14, esc(xa.label(t)))
	}
	for _, t := range ya.ticks {
		py := ya.pos(t)
		fmt.Fprintf(w, "<line x1=\"%g\" y1=\"%.1f\" x2=\"%g\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", x0, py, x1, py)
		fmt.Fprintf(w, "<text x=\"%g\" y=\"%.1f\" text-anchor=\"end\" dominant-baseline=\"middle\">%s</text>\n", x0-4, py, esc(ya.label(t)))
	}
	for _, i := range c.drawn() {
		color, dash := palette[i%len(palette)], dashes[i%len(dashes)]
		var pts []Point // in pixels
		var coords []string
		for _, p := range c.Series[i].Points {
			if c.usable(p) {
				px := Point{xa.pos(p.X), ya.pos(p.Y)}
				pts = append(pts, px)
				coords = append(coords, fmt.Sprintf("%.1f,%.1f", px.X, px.Y))
			}
		}
		fmt.Fprintf(w, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s points=\"%s\"/>\n", color, dashAttr(dash), strings.Join(coords, " "))
		for _, p := range pts {
			marker(w, i, p.X, p.Y, color)
		}
	}
	// The legend, beneath the axis label: two entries a row.
	colWidth := (x1 - x0) / 2
	for n, i := range c.drawn() {
		x := x0 + float64(n%2)*colWidth
		y := float64(PanelHeight) + float64(n/2)*legendRow
		color, dash := palette[i%len(palette)], dashes[i%len(dashes)]
		fmt.Fprintf(w, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"%s\" stroke-width=\"1.5\"%s/>\n", x, y, x+22, y, color, dashAttr(dash))
		marker(w, i, x+11, y, color)
		fmt.Fprintf(w, "<text x=\"%g\" y=\"%g\" dominant-baseline=\"middle\">%s</text>\n", x+28, y, esc(c.Series[i].Name))
	}
}

// drawn lists the series with at least one point on the axes, by index (the
// index picks colour, dashes and marker, so a series looks the same in every
// panel of a document).
func (c *Chart) drawn() []int {
	var out []int
	for i, s := range c.Series {
		for _, p := range s.Points {
			if c.usable(p) {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

func dashAttr(d string) string {
	if d == "" {
		return ""
	}
	return ` stroke-dasharray="` + d + `"`
}

// marker draws the i-th series' marker shape centred on (x, y).
func marker(w *bufio.Writer, i int, x, y float64, color string) {
	const r = 3.0
	switch i % 4 {
	case 0:
		fmt.Fprintf(w, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"%g\" fill=\"none\" stroke=\"%s\"/>\n", x, y, r, color)
	case 1:
		fmt.Fprintf(w, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"%s\"/>\n", x-r, y-r, 2*r, 2*r, color)
	case 2:
		fmt.Fprintf(w, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"none\" stroke=\"%s\"/>\n", x, y-r, x+r, y+r, x-r, y+r, color)
	default:
		fmt.Fprintf(w, "<path d=\"M%.1f %.1fL%.1f %.1fM%.1f %.1fL%.1f %.1f\" stroke=\"%s\"/>\n", x-r, y-r, x+r, y+r, x-r, y+r, x+r, y-r, color)
	}
}

func esc(s string) string { return html.EscapeString(s) }
