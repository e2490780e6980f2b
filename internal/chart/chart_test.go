package chart

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func sample() []Chart {
	kib := func(v float64) string { return number(v/1024) + " KiB" }
	return []Chart{
		{Title: "all_reduce <bf16> & co", XLabel: "bytes", YLabel: "microseconds", XTick: kib, XBase: 2, Series: []Series{
			{Name: "irisgen one_shot", Points: []Point{{8192, 4}, {1 << 20, 20}, {64 << 20, 300}}},
			{Name: "nccl", Points: []Point{{8192, 9}, {1 << 20, math.NaN()}, {64 << 20, 280}}},
			{Name: "empty", Points: []Point{{0, 1}, {8192, -1}, {math.Inf(1), 2}}},
		}},
		{Title: "bus bandwidth", XLabel: "bytes", YLabel: "GB/s"},
	}
}

func render(t *testing.T, cs ...Chart) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, WriteSVG(&b, cs...))
	return b.String()
}

// TestWellFormed parses the output as XML: every element closed, every text
// escaped.
func TestWellFormed(t *testing.T) {
	svg := render(t, sample()...)
	d := xml.NewDecoder(strings.NewReader(svg))
	texts := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, svg)
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "text" {
			texts++
		}
	}
	require.Greater(t, texts, 10)
	require.Contains(t, svg, "all_reduce &lt;bf16&gt; &amp; co")
	require.Contains(t, svg, `width="840" height="339"`, "two panels side by side, one legend row (two series) beneath")
}

// TestSeries: a line and a legend entry for every series with a drawable
// point; points off a log axis (zero, negative, NaN, infinite) left out.
func TestSeries(t *testing.T) {
	svg := render(t, sample()[0])
	require.Equal(t, 2, strings.Count(svg, "<polyline"), "the series with no usable point draws nothing")
	require.Contains(t, svg, ">irisgen one_shot</text>")
	require.Contains(t, svg, ">nccl</text>")
	require.NotContains(t, svg, ">empty</text>")
	lines := regexp.MustCompile(`points="([^"]*)"`).FindAllStringSubmatch(svg, -1)
	require.Len(t, strings.Fields(lines[0][1]), 3)
	require.Len(t, strings.Fields(lines[1][1]), 2, "NaN left out")
	require.Contains(t, svg, `stroke-dasharray="6,3"`, "the second series is dashed")
}

// TestTicks: x ticks at powers of XBase labelled by XTick; y ticks at
// decades covering the data.
func TestTicks(t *testing.T) {
	svg := render(t, sample()[0])
	// 8 KiB .. 64 MiB in powers of 2, at most 6 x ticks: every third power.
	for _, want := range []string{">8 KiB<", ">64 KiB<", ">512 KiB<", ">32768 KiB<", ">262144 KiB<", ">1<", ">10<", ">100<", ">1000<"} {
		require.Contains(t, svg, want)
	}
	require.NotContains(t, svg, ">16 KiB<")
	a := newAxis(8192, 256<<20, 2, 8, nil, 0, 100)
	require.Equal(t, []float64{1 << 13, 1 << 15, 1 << 17, 1 << 19, 1 << 21, 1 << 23, 1 << 25, 1 << 27, 1 << 29}, a.ticks, "15 powers thinned to every second")
	require.InDelta(t, 0, a.pos(8192), 1e-9)
	require.InDelta(t, 100, a.pos(1<<29), 1e-9)
	b := newAxis(3, 700, 10, 8, nil, 0, 100)
	require.Equal(t, []float64{1, 10, 100, 1000}, b.ticks)
	one := newAxis(5, 5, 10, 8, nil, 0, 100)
	require.Equal(t, []float64{1, 10}, one.ticks, "a single value still spans a decade")
	require.Equal(t, "1000", number(1000))
	require.Equal(t, "0.5", number(0.5))
	require.Equal(t, "1e+09", number(1e9))
}

func TestEmptyAndDeterministic(t *testing.T) {
	svg := render(t, Chart{Title: "nothing"})
	require.Contains(t, svg, ">nothing<")
	require.NotContains(t, svg, "<polyline")
	require.Equal(t, render(t, sample()...), render(t, sample()...))
}

// TestLinearY: a YLinear panel's ticks are a step of 1, 2 or 5 times a
// power of ten around the data, labelled with the step's digits; points
// of 0 and below are drawn, NaN and infinities are not.
func TestLinearY(t *testing.T) {
	a := newLinearAxis(0.97, 1.31, 8, 0, 100)
	require.Equal(t, []string{"0.95", "1.00", "1.05", "1.10", "1.15", "1.20", "1.25", "1.30", "1.35"}, labels(a))
	require.InDelta(t, 0, a.pos(0.95), 1e-9)
	require.InDelta(t, 50, a.pos(1.15), 1e-9, "linear: the middle value at the middle")
	require.Equal(t, []string{"0", "2", "4", "6", "8", "10"}, labels(newLinearAxis(0, 10, 8, 0, 100)))
	require.Equal(t, []string{"1.90", "1.95", "2.00", "2.05", "2.10"}, labels(newLinearAxis(2, 2, 8, 0, 100)), "a single value: room around it")
	c := Chart{Title: "slowdown", YLinear: true, Series: []Series{{Name: "s", Points: []Point{{1, 1.02}, {2, 0}, {4, -0.5}, {8, math.NaN()}, {16, math.Inf(1)}}}}}
	svg := render(t, c)
	lines := regexp.MustCompile(`points="([^"]*)"`).FindAllStringSubmatch(svg, -1)
	require.Len(t, lines, 1)
	require.Len(t, strings.Fields(lines[0][1]), 3, "1.02, 0 and -0.5 drawn")
	require.Contains(t, svg, ">-0.6<")
	require.Contains(t, svg, ">1.2<")
}

func labels(a *axis) []string {
	var out []string
	for _, v := range a.ticks {
		out = append(out, a.label(v))
	}
	return out
}
