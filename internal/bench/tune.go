package bench

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/irisgen/irisgen/internal/ir"
)

// Tune builds the auto variant's table of a collective from irisgen's rows
// of one dtype and mode: for every world size measured, the fastest variant
// at each size whose cells did not stall in any mode (Row.Stalled: a
// repeat over 3x its fastest; where every variant stalled, the fastest of
// them), as rules with size thresholds at the largest size a variant
// won; then the largest world's rules again without a world, for world
// sizes not measured (the closest guess: more ranks behave more like the
// most ranks measured than like fewer). It needs two or more variants
// measured.
func Tune(rows []Row, collective, dtype, mode string) (*ir.Auto, error) {
	type key struct {
		world int
		bytes int64
	}
	// A variant that stalled at a size in any mode is taken as stalled there
	// in every mode: the stalls come and go between runs (the Lamport
	// variants' on 4 GPUs in eager launches, graph replays or both), so one
	// mode's clean cell is no promise for the other.
	type cell struct {
		variant string
		world   int
		bytes   int64
	}
	stalled := map[cell]bool{}
	for _, r := range rows {
		if r.Impl == "irisgen" && r.Collective == collective && r.DType == dtype && r.Stalled() {
			stalled[cell{r.Variant, r.World, r.Bytes}] = true
		}
	}
	isStalled := func(r Row) bool { return stalled[cell{r.Variant, r.World, r.Bytes}] }
	best := map[key]Row{}
	variants := map[string]bool{}
	var devices, dates []string
	for _, r := range rows {
		if r.Impl != "irisgen" || r.Collective != collective || r.DType != dtype || r.Mode != mode || math.IsNaN(r.TimeUS) || r.TimeUS <= 0 {
			continue
		}
		variants[r.Variant] = true
		if !slices.Contains(devices, r.Device) {
			devices = append(devices, r.Device)
		}
		if !slices.Contains(dates, r.Date) {
			dates = append(dates, r.Date)
		}
		k := key{r.World, r.Bytes}
		if b, ok := best[k]; !ok || (isStalled(b) && !isStalled(r)) || (isStalled(b) == isStalled(r) && r.TimeUS < b.TimeUS) {
			best[k] = r
		}
	}
	if len(variants) < 2 {
		return nil, fmt.Errorf("%s: %d irisgen variant(s) measured in %s %s; an auto table needs two or more", collective, len(variants), dtype, mode)
	}
	byWorld := map[int][]Row{}
	for k, r := range best {
		byWorld[k.world] = append(byWorld[k.world], r)
	}
	worlds := make([]int, 0, len(byWorld))
	for w := range byWorld {
		worlds = append(worlds, w)
	}
	sort.Ints(worlds)
	a := &ir.Auto{Measured: fmt.Sprintf("%s, %s, %s, %s, irisgen bench", strings.Join(devices, " and "), strings.Join(dates, " and "), dtype, mode)}
	var largest []ir.AutoRule
	for _, w := range worlds {
		largest = largest[:0]
		rs := byWorld[w]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Bytes < rs[j].Bytes })
		for i, r := range rs {
			if i+1 < len(rs) && rs[i+1].Variant == r.Variant {
				continue // the run goes on
			}
			rule := ir.AutoRule{World: w, Variant: r.Variant}
			if i+1 < len(rs) {
				rule.MaxBytes = r.Bytes
			}
			a.Rules = append(a.Rules, rule)
			rule.World = 0
			largest = append(largest, rule)
		}
	}
	a.Rules = append(a.Rules, largest...)
	return a, nil
}
