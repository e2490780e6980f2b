package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/irisgen/irisgen/internal/chart"
)

// group is the rows of one table or plot: one collective, dtype, world size
// and mode, every implementation and size.
type group struct {
	Collective, DType, Mode string
	World                   int
	Rows                    []Row
}

func (g *group) title() string {
	return fmt.Sprintf("%s %s, %d GPUs, %s", g.Collective, g.DType, g.World, g.Mode)
}

func (g *group) file() string {
	return fmt.Sprintf("%s_%s_w%d_%s", g.Collective, g.DType, g.World, g.Mode)
}

func groups(rows []Row) []*group {
	rows = append([]Row(nil), rows...)
	Sort(rows)
	var out []*group
	idx := map[string]*group{}
	for _, r := range rows {
		if r.Overlap() {
			continue // OverlapMarkdown's and PlotOverlap's
		}
		k := fmt.Sprintf("%s|%s|%d|%s", r.Collective, r.DType, r.World, r.Mode)
		g := idx[k]
		if g == nil {
			g = &group{Collective: r.Collective, DType: r.DType, Mode: r.Mode, World: r.World}
			idx[k] = g
			out = append(out, g)
		}
		g.Rows = append(g.Rows, r)
	}
	return out
}

// series lists a group's series, irisgen's first.
func (g *group) series() []string {
	seen := map[string]bool{}
	var s []string
	for _, r := range g.Rows {
		if !seen[r.Series()] {
			seen[r.Series()] = true
			s = append(s, r.Series())
		}
	}
	sort.SliceStable(s, func(i, j int) bool {
		ii, jj := strings.HasPrefix(s[i], "irisgen"), strings.HasPrefix(s[j], "irisgen")
		if ii != jj {
			return ii
		}
		return s[i] < s[j]
	})
	return s
}

func (g *group) sizes() []int64 {
	seen := map[int64]bool{}
	var s []int64
	for _, r := range g.Rows {
		if !seen[r.Bytes] {
			seen[r.Bytes] = true
			s = append(s, r.Bytes)
		}
	}
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

func (g *group) at(series string, bytes int64) (Row, bool) {
	for _, r := range g.Rows {
		if r.Series() == series && r.Bytes == bytes {
			return r, !math.IsNaN(r.TimeUS) && r.TimeUS > 0
		}
	}
	return Row{}, false
}

// HumanBytes prints a size as 8 KiB, 1 MiB.
func HumanBytes(b int64) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<10 && b%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

// Markdown renders one table per group: time per call in microseconds
// (slowest rank) as the minimum, median and maximum of the repeats, a cell whose
// maximum exceeds TailFactor times its minimum marked (a median hides a
// stall; a rule against the median would miss a cell where most repeats
// stalled), bus bandwidth, and the ratio of irisgen's best
// variant to the best baseline (below 1: irisgen is faster).
func Markdown(rows []Row) string {
	var b strings.Builder
	for _, g := range groups(rows) {
		ss := g.series()
		marked := false
		fmt.Fprintf(&b, "### %s\n\n", g.title())
		b.WriteString("| size |")
		for _, s := range ss {
			fmt.Fprintf(&b, " %s us (min / median / max) |", s)
		}
		b.WriteString(" best irisgen / best baseline (medians) | best busbw GB/s (irisgen, baseline) |\n|---|")
		for range ss {
			b.WriteString("---|")
		}
		b.WriteString("---|---|\n")
		for _, size := range g.sizes() {
			fmt.Fprintf(&b, "| %s |", HumanBytes(size))
			bestI, bestB := math.Inf(1), math.Inf(1)
			bwI, bwB := 0.0, 0.0
			for _, s := range ss {
				r, ok := g.at(s, size)
				if !ok {
					b.WriteString(" - |")
					continue
				}
				b.WriteString(" " + r.cell() + " |")
				marked = marked || r.Stalled()
				switch {
				case r.Forced(): // a diagnostic (bench -barrier), no way to run the collective
				case r.Impl == "irisgen":
					bestI, bwI = min(bestI, r.TimeUS), max(bwI, r.BusBW)
				default:
					bestB, bwB = min(bestB, r.TimeUS), max(bwB, r.BusBW)
				}
			}
			if math.IsInf(bestI, 1) || math.IsInf(bestB, 1) {
				b.WriteString(" - |")
			} else {
				fmt.Fprintf(&b, " %.2f |", bestI/bestB)
			}
			fmt.Fprintf(&b, " %s, %s |\n", busText(bwI), busText(bwB))
		}
		b.WriteString("\n")
		if marked {
			fmt.Fprintf(&b, "%s: the slowest repeat took more than %gx the fastest.\n\n", stallMark, TailFactor)
		}
	}
	return b.String()
}

// busText is a bus bandwidth in GB/s for a table, "-" where there is none
// (no rule for the collective, or no such side in the cell).
func busText(gbps float64) string {
	if !(gbps > 0) {
		return "-"
	}
	return fmt.Sprintf("%.0f", gbps)
}

// Plot writes one SVG per group into dir: latency and bus bandwidth against
// size on log axes, one line per implementation and variant. It returns the
// files written.
func Plot(rows []Row, dir string) ([]string, error) {
	var files []string
	var sized []Row // log axes: only rows with a size (the barrier has none)
	for _, r := range rows {
		if r.Bytes > 0 {
			sized = append(sized, r)
		}
	}
	bytesTick := func(v float64) string { return HumanBytes(int64(math.Round(v))) }
	for _, g := range groups(sized) {
		lat := chart.Chart{Title: g.title() + ": time per call (slowest rank)", XLabel: "bytes", YLabel: "microseconds", XTick: bytesTick, XBase: 2}
		bw := chart.Chart{Title: g.title() + ": bus bandwidth", XLabel: "bytes", YLabel: "GB/s", XTick: bytesTick, XBase: 2}
		points, bwPoints := 0, 0
		for _, s := range g.series() {
			pl, pb := chart.Series{Name: s}, chart.Series{Name: s}
			for _, size := range g.sizes() {
				r, ok := g.at(s, size)
				if !ok {
					continue
				}
				pl.Points = append(pl.Points, chart.Point{X: float64(size), Y: r.TimeUS})
				points++
				if r.BusBW > 0 {
					pb.Points = append(pb.Points, chart.Point{X: float64(size), Y: r.BusBW})
					bwPoints++
				}
			}
			// Every series keeps its place (and so its colour) in both panels.
			lat.Series = append(lat.Series, pl)
			bw.Series = append(bw.Series, pb)
		}
		if points == 0 {
			continue // every measurement of the group is missing
		}
		panels := []chart.Chart{lat, bw}
		if bwPoints == 0 {
			panels = panels[:1] // no bandwidth (e.g. MoE): the latency panel alone
		}
		path := filepath.Join(dir, g.file()+".svg")
		if err := writeSVG(path, panels); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

func writeSVG(path string, panels []chart.Chart) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := chart.WriteSVG(f, panels...); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// TailFactor is how far a cell's slowest repeat may be from its fastest
// before the tables mark it.
const TailFactor = 3.0

const stallMark = "(!)"

// Stalled reports whether r's slowest repeat took more than TailFactor
// times its fastest (false when the range is unknown).
func (r Row) Stalled() bool { return r.MaxUS > TailFactor*r.MinUS }

// cell is r's time in a table: "min / median / max", marked when stalled;
// the median alone where the range is unknown (older CSVs).
func (r Row) cell() string {
	if math.IsNaN(r.MaxUS) || r.MaxUS <= 0 || math.IsNaN(r.MinUS) || r.MinUS <= 0 {
		return fmt.Sprintf("%.1f", r.TimeUS)
	}
	c := fmt.Sprintf("%.1f / %.1f / %.1f", r.MinUS, r.TimeUS, r.MaxUS)
	if r.Stalled() {
		c += " " + stallMark
	}
	return c
}
