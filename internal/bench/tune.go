package bench

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/irisgen/irisgen/internal/tuning"
	"github.com/irisgen/irisgen/runtime/irismodel"
)

// Tune builds the auto variant's table of a collective from irisgen's rows
// of one dtype and mode (any number of runs): for every world size
// measured, the variant with the fastest median at each size among those
// that never stalled badly there (Bad), as rules with size thresholds at
// the largest size a variant won; then the largest world's rules again
// without a world, for world sizes not measured (the closest guess: more
// ranks behave more like the most ranks measured than like fewer). It
// needs two or more variants measured.
//
// Where looser is not nil, a variant whose median is within the spread of
// the fastest's (not slower beyond the half-ranges of both, as Compare
// judges) and whose launch rules are looser (looser(it, fastest)) is
// chosen instead: a difference the measurement cannot tell apart does not
// take in-place launches or off-heap tensors from auto's callers.
func Tune(rows []Row, collective, dtype, mode string, looser func(a, b string) bool) (*tuning.Table, error) {
	type key struct {
		world int
		bytes int64
	}
	// A variant's worst repeat at a size counts in any mode and run: the
	// stalls come and go between runs (the Lamport variants' on 4 GPUs in
	// eager launches, graph replays or both), so a clean cell in one mode
	// is no promise for the other.
	type cell struct {
		variant string
		world   int
		bytes   int64
	}
	worst := map[cell]float64{}
	fastest := map[key]float64{} // the best median at a size, any variant, mode or run
	for _, r := range rows {
		if r.Impl != "irisgen" || r.Overlap() || r.Forced() || r.Collective != collective || r.DType != dtype || math.IsNaN(r.TimeUS) || r.TimeUS <= 0 {
			continue
		}
		c, k := cell{r.Variant, r.World, r.Bytes}, key{r.World, r.Bytes}
		if !math.IsNaN(r.MaxUS) {
			worst[c] = max(worst[c], r.MaxUS)
		}
		if f, ok := fastest[k]; !ok || r.TimeUS < f {
			fastest[k] = r.TimeUS
		}
	}
	bad := func(r Row) bool { return Bad(worst[cell{r.Variant, r.World, r.Bytes}], fastest[key{r.World, r.Bytes}]) }
	// better: a variant that never stalled badly beats one that did; among
	// those that never did the faster median wins, among those that did the
	// smaller worst repeat.
	better := func(r, b Row) bool {
		rb, bb := bad(r), bad(b)
		switch {
		case rb != bb:
			return !rb
		case rb:
			return worst[cell{r.Variant, r.World, r.Bytes}] < worst[cell{b.Variant, b.World, b.Bytes}]
		}
		return r.TimeUS < b.TimeUS
	}
	best := map[key]Row{}
	cands := map[key][]Row{}
	variants := map[string]bool{}
	var devices, dates []string
	for _, r := range rows {
		if r.Impl != "irisgen" || r.Overlap() || r.Forced() || r.Collective != collective || r.DType != dtype || r.Mode != mode || math.IsNaN(r.TimeUS) || r.TimeUS <= 0 {
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
		cands[k] = append(cands[k], r)
		if b, ok := best[k]; !ok || better(r, b) {
			best[k] = r
		}
	}
	if looser != nil {
		for k, b := range best {
			if bad(b) {
				continue
			}
			pick := b
			// Fastest first, so that of variants no looser than each other
			// the faster stays.
			rs := cands[k]
			sort.SliceStable(rs, func(i, j int) bool { return rs[i].TimeUS < rs[j].TimeUS })
			for _, r := range rs {
				if !bad(r) && beyondSpread(b, r, 0) <= 0 && looser(r.Variant, pick.Variant) {
					pick = r
				}
			}
			best[k] = pick
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
	a := &tuning.Table{Measured: fmt.Sprintf("%s, %s, %s, %s, irisgen bench", strings.Join(devices, " and "), strings.Join(dates, " and "), dtype, mode)}
	var largest []irismodel.AutoRule
	for _, w := range worlds {
		largest = largest[:0]
		rs := byWorld[w]
		sort.Slice(rs, func(i, j int) bool { return rs[i].Bytes < rs[j].Bytes })
		for i, r := range rs {
			if i+1 < len(rs) && rs[i+1].Variant == r.Variant {
				continue // the run goes on
			}
			rule := irismodel.AutoRule{World: w, Variant: r.Variant}
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

// Bad reports whether a variant whose slowest repeat at a size took worst
// stalled badly there: over StallFactor times the fastest median any
// variant reached at that size. The stalls every variant has now and then
// on these machines (a repeat at 3-20x its fastest, whatever the variant:
// see docs/performance.md) do not decide the choice; a millisecond stall
// of a 5 us kernel does.
func Bad(worst, fastest float64) bool { return worst > StallFactor*fastest }
