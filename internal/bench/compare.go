package bench

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Delta compares one cell of a run with the same cell of a base run.
type Delta struct {
	Base, New Row
	Ratio     float64 // New.TimeUS / Base.TimeUS
	// Slower is the time the new run lost beyond the two runs' measured
	// spreads (half the range of each one's repeats) and the tolerance;
	// positive means a regression.
	Slower    float64
	Regressed bool
}

// cellKey identifies a cell across runs.
func cellKey(r Row) string {
	return fmt.Sprintf("%s|%s|%s|%s|%d|%d|%s|%s", r.Impl, r.Collective, r.Variant, r.DType, r.World, r.Bytes, r.Mode, r.Beside)
}

// halfRange is half the range of a row's repeats (0 when unknown).
func halfRange(r Row) float64 {
	if math.IsNaN(r.MinUS) || math.IsNaN(r.MaxUS) || r.MaxUS < r.MinUS {
		return 0
	}
	return (r.MaxUS - r.MinUS) / 2
}

// beyondSpread is how much slower cur is than base beyond the half-ranges
// of both rows' repeats and tolerance (a fraction of base's time): above 0,
// the measurement tells them apart (Compare's regressions, Tune's ties).
func beyondSpread(base, cur Row, tolerance float64) float64 {
	return cur.TimeUS - base.TimeUS - halfRange(base) - halfRange(cur) - tolerance*base.TimeUS
}

// Compare pairs every measured cell of cur with the same cell of base (same
// implementation, collective, variant, dtype, world, size and mode) and says
// which are slower than the base beyond the measured spread: the new median
// exceeds the base's by more than the half-ranges of both runs' repeats plus
// tolerance (a fraction of the base, e.g. 0.02). Cells missing on either
// side or without a time are left out. The result is sorted worst first.
func Compare(base, cur []Row, tolerance float64) []Delta {
	idx := map[string]Row{}
	for _, r := range base {
		if !math.IsNaN(r.TimeUS) && r.TimeUS > 0 {
			idx[cellKey(r)] = r
		}
	}
	var ds []Delta
	for _, r := range cur {
		b, ok := idx[cellKey(r)]
		if !ok || math.IsNaN(r.TimeUS) || r.TimeUS <= 0 {
			continue
		}
		slower := beyondSpread(b, r, tolerance)
		ds = append(ds, Delta{Base: b, New: r, Ratio: r.TimeUS / b.TimeUS, Slower: slower, Regressed: slower > 0})
	}
	sort.SliceStable(ds, func(i, j int) bool { return ds[i].Ratio > ds[j].Ratio })
	return ds
}

// FormatCompare renders ds as a Markdown table with a summary line.
func FormatCompare(ds []Delta) string {
	var b strings.Builder
	b.WriteString("| cell | base us (min-max) | new us (min-max) | new/base | verdict |\n|---|---|---|---|---|\n")
	n := 0
	for _, d := range ds {
		verdict := "same within spread"
		switch {
		case d.Regressed:
			verdict = fmt.Sprintf("SLOWER by %.2f us beyond the spread", d.Slower)
			n++
		case d.Ratio < 1 && d.New.MaxUS < d.Base.MinUS:
			verdict = "faster"
		}
		r := d.New
		fmt.Fprintf(&b, "| %s %s %s %s w%d %s %s | %s | %s | %.3f | %s |\n", r.Impl, r.Collective, r.Variant, r.DType, r.World,
			HumanBytes(r.Bytes), r.Mode, usRange(d.Base), usRange(d.New), d.Ratio, verdict)
	}
	fmt.Fprintf(&b, "\n%d cells compared, %d slower than the base beyond their spread\n", len(ds), n)
	return b.String()
}

func usRange(r Row) string {
	if math.IsNaN(r.MinUS) || math.IsNaN(r.MaxUS) {
		return fmt.Sprintf("%.2f", r.TimeUS)
	}
	return fmt.Sprintf("%.2f (%.2f-%.2f)", r.TimeUS, r.MinUS, r.MaxUS)
}
