//go:build gpu

package gpu_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/internal/bench"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// The stall guard (issue 23): every all_reduce variant and every Lamport
// variant launched back to back, eagerly, each launch timed between GPU
// events of its own. The 2026-11-26 stalls were milliseconds long in
// kernels of 10-50 us, so irisgen bench -tails's rule catches them:
// the 99.9th percentile launch may take at most bench.StallFactor times the
// fastest, or bench.StallFloorUS beyond it (bench.Stalls: machine noise
// stays well inside it).

const (
	tailLaunches = 2000 // timed launches of a cell: p99.9 is the 2nd slowest
	tailWarmup   = 20
	tailHidden   = 4096 // all_reduce_rmsnorm's hidden size: tokens x 8 KiB bf16
)

// tailBytes are the sizes of a rank's input: where the stalls were seen.
var tailBytes = []int64{512 << 10, 4 << 20}

// tailEntries are the variants the guard times: every variant of
// all_reduce and of every collective with a Lamport variant (the others
// are what a Lamport variant stalled throughout is compared with).
func tailEntries() []irisimpl.Entry {
	lamport := map[string]bool{"all_reduce": true}
	for _, e := range collectives.Catalogue {
		if strings.Contains(e.Variant, "lamport") {
			lamport[e.Collective] = true
		}
	}
	var out []irisimpl.Entry
	for _, e := range collectives.Catalogue {
		if lamport[e.Collective] {
			out = append(out, e)
		}
	}
	return out
}

// tailSizes are the size arguments of e whose first input is bytes of
// bf16 on every rank of a world of w.
func tailSizes(e irisimpl.Entry, w int, bytes int64) ([]int64, error) {
	elems := bytes / irismodel.BF16.Size()
	in := slices.IndexFunc(e.Tensors, func(ti irisimpl.TensorInfo) bool { return ti.Dir == irismodel.In })
	switch {
	case in < 0:
		return nil, fmt.Errorf("%s/%s has no input", e.Collective, e.Variant)
	case slices.Equal(e.Sizes, []string{"n"}):
		per := e.Tensors[in].Numel(w, []int64{1}) // the input is per * n elements
		return []int64{elems / per}, nil
	case slices.Equal(e.Sizes, []string{"tokens", "hidden"}):
		return []int64{elems / tailHidden, tailHidden}, nil
	}
	return nil, fmt.Errorf("%s/%s: sizes %v: the stall guard has no rule for them; add one to tailSizes", e.Collective, e.Variant, e.Sizes)
}

// tailTimes launches e k times back to back on r, each launch timed alone
// (bench.LaunchTimes), its tensors zeroed.
func tailTimes(r *irisrt.Rank, e irisimpl.Entry, sizes []int64, k int) (_ []float64, err error) {
	op := ""
	if len(e.Ops) > 0 {
		op = e.Ops[0]
	}
	p, err := e.New(r, irismodel.BF16, op, sizes)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, p.Close()) }()
	ts, free, err := e.Alloc(r, irismodel.BF16, sizes)
	if err != nil {
		return nil, err
	}
	defer free()
	dev, s := r.Device(), r.Stream()
	for _, x := range ts { // zeros: a norm of zeros is defined, sums stay finite
		if err := dev.MemsetD8Async(x.Ptr, 0, x.Bytes(), s); err != nil {
			return nil, err
		}
	}
	ps := e.SampleParams(r.World(), 0)
	passed := e.TensorsFor(r.Rank(), ts, ps)
	return bench.LaunchTimes(r, k, tailWarmup, func() error { return p.LaunchParams(s, passed, ps, irismodel.BarrierDevice) })
}

// TestLaunchTail is the stall guard: tailLaunches timed launches of every
// variant of tailEntries (all_reduce_rmsnorm's Lamport variant included)
// at 512 KiB and 4 MiB a rank (bf16) in every world; a launch's
// time is its slowest rank's. It logs min, median, p99.9 and max per cell
// and fails a cell whose p99.9 stalls (bench.Stalls), or whose median
// exceeds bench.StallFactor times the fastest median of
// its collective's variants at that size (a cell stalled from its first
// launch to its last; bench.MarkSlow; not the variants slow by design,
// bench.SlowByDesign). Worlds whose ranks share GPUs are
// skipped: their timings mean nothing.
func TestLaunchTail(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		if w.SharesGPUs() {
			t.Skip("the ranks share GPUs (IRISGEN_SHARE_GPUS): launch times mean nothing")
		}
		var cells []bench.Tail
		defer func() {
			bench.MarkSlow(cells)
			for _, c := range cells {
				if c.Slow {
					t.Errorf("stall: %s/%s at %s: the median launch took %.2f us, more than %gx the fastest median of %s's variants there",
						c.Collective, c.Variant, bench.HumanBytes(c.Bytes), c.Median, bench.StallFactor, c.Collective)
				}
			}
		}()
		for _, e := range tailEntries() {
			for _, bytes := range tailBytes {
				sizes, err := tailSizes(e, w.Size(), bytes)
				if err != nil {
					t.Fatal(err)
				}
				t.Run(fmt.Sprintf("%s/%s/%s", e.Collective, e.Variant, bench.HumanBytes(bytes)), func(t *testing.T) {
					per := make([][]float64, w.Size())
					if err := w.Run(func(r *irisrt.Rank) (err error) {
						per[r.Rank()], err = tailTimes(r, e, sizes, tailLaunches)
						return err
					}); err != nil {
						t.Fatal(err)
					}
					us := make([]float64, tailLaunches)
					for i := range us {
						for _, p := range per {
							us[i] = max(us[i], p[i])
						}
					}
					slices.Sort(us)
					lo, med, p999, hi := us[0], bench.Percentile(us, 0.5), bench.Percentile(us, 0.999), us[len(us)-1]
					t.Logf("%d launches, sizes %v, bf16: min %.2f median %.2f p99.9 %.2f max %.2f us (p99.9 / min %.1f)",
						tailLaunches, sizes, lo, med, p999, hi, p999/lo)
					cells = append(cells, bench.Tail{Collective: e.Collective, Variant: e.Variant, DType: "bf16", World: w.Size(), Bytes: bytes, Median: med, ByDesign: bench.SlowByDesign(e)})
					if bench.Stalls(lo, p999) {
						t.Errorf("stall: the 99.9th percentile launch took %.2f us, more than %gx the fastest (%.2f us) and %g us beyond it", p999, bench.StallFactor, lo, bench.StallFloorUS)
					}
					cases.add(1)
				})
			}
		}
	})
}
