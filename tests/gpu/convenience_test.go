//go:build gpu

package gpu_test

import (
	"fmt"
	"testing"

	"github.com/irisgen/irisgen/generated/collectives"
	"github.com/irisgen/irisgen/runtime/gpu"
	"github.com/irisgen/irisgen/runtime/irisimpl"
	"github.com/irisgen/irisgen/runtime/irismodel"
	"github.com/irisgen/irisgen/runtime/irisrt"
)

// convenience launches variant of vc's collective through the generated
// convenience call, which reads the size from the tensors and finds or makes
// the plan in the rank's cache.
func convenience(r *irisrt.Rank, s gpu.Stream, vc *variantCase, variant string, dt irismodel.DType, op string, in, out irisrt.Tensor) error {
	mode := irismodel.BarrierDevice
	switch vc.coll {
	case "all_reduce":
		return collectives.AllReduce(r, s, collectives.AllReduceVariant(variant), dt, collectives.AllReduceOp(op), in, out, mode)
	case "reduce_scatter":
		return collectives.ReduceScatter(r, s, collectives.ReduceScatterVariant(variant), dt, collectives.ReduceScatterOp(op), in, out, mode)
	case "all_gather":
		return collectives.AllGather(r, s, collectives.AllGatherVariant(variant), dt, in, out, mode)
	case "all_to_all":
		return collectives.AllToAll(r, s, collectives.AllToAllVariant(variant), dt, in, out, mode)
	}
	return fmt.Errorf("no convenience call for %s", vc.coll)
}

// convenienceRank runs every variant of the two-tensor collectives, and
// auto (each has a tuning table), through the convenience
// calls at three sizes and two dtypes, twice each, against the CPU
// reference, then checks that the cache made one plan per variant, dtype
// and size. The second call of each finds its plan.
func convenienceRank(r *irisrt.Rank) (int, error) {
	s, w, me := r.Stream(), r.World(), r.Rank()
	before := irisimpl.CachedPlans(r)
	cases, plans := 0, map[string]bool{}
	autos := map[string]bool{}
	// every variant: auto and the plan cache span the catalogue; shards run it whole
	for i := range catalogue {
		vc := catalogue[i]
		variants := []string{vc.variant}
		if !autos[vc.coll] {
			// auto may pick a variant that sums in any order: compare
			// within the tolerance.
			autos[vc.coll] = true
			variants = append(variants, "auto")
		}
		for _, variant := range variants {
			ref := vc
			if variant == "auto" {
				ref.ordered = false
			}
			for _, dt := range []irismodel.DType{irismodel.BF16, irismodel.F32} {
				op := vc.ops()[0]
				for _, n := range []int64{7, 4096 + 3, 1 << 18} {
					in, freeIn, err := tensor(r, dt, vc.inLen(w, n), true)
					if err != nil {
						return cases, err
					}
					out, freeOut, err := tensor(r, dt, vc.outLen(w, n), true)
					if err != nil {
						freeIn()
						return cases, err
					}
					err = func() error {
						defer freeIn()
						defer freeOut()
						for round := range 2 {
							all := inputs(dt, in.Len, uint64(n)^uint64(len(variant)), uint64(round))
							if err := upload(r, in, encode(dt, all(me))); err != nil {
								return err
							}
							if err := r.Device().MemsetD8Async(out.Ptr, 0xA5, out.Bytes(), s); err != nil {
								return err
							}
							if err := r.HostBarrier(s); err != nil {
								return err
							}
							if err := convenience(r, s, &vc, variant, dt, op, in, out); err != nil {
								return err
							}
							if err := syncCheck(r, s); err != nil {
								return err
							}
							b, err := download(r, out)
							if err != nil {
								return err
							}
							if err := ref.checkResult(decode(dt, b), dt, op, w, me, n, all); err != nil {
								return fmt.Errorf("round %d: %w", round, err)
							}
							cases++
						}
						return r.HostBarrier(s)
					}()
					if err != nil {
						return cases, fmt.Errorf("%s via %s %s n=%d: %w", vc.coll, variant, dt, n, err)
					}
					if variant != "auto" {
						plans[fmt.Sprint(vc.name(), dt, n)] = true
					}
				}
			}
		}
	}
	// auto reuses the plans of the variants it picks, or makes its own:
	// at least one plan per named variant, dtype and size.
	if got := irisimpl.CachedPlans(r) - before; got < len(plans) {
		return cases, fmt.Errorf("%d plans cached for %d variant, dtype and size triples", got, len(plans))
	}
	if err := collectives.Barrier(r, s, collectives.BarrierDevice, irismodel.BarrierDevice); err != nil {
		return cases, err
	}
	return cases, syncCheck(r, s)
}

// TestConvenience runs the catalogue through the generated convenience
// calls: the runtime's reading of the sizes from the tensors, its choice of
// the auto variants and its plan cache, on the GPUs, in both worlds.
func TestConvenience(t *testing.T) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		counts := make([]int, w.Size())
		if err := w.Run(func(r *irisrt.Rank) error {
			n, err := convenienceRank(r)
			counts[r.Rank()] = n
			return err
		}); err != nil {
			t.Fatal(err)
		}
		cases.add(counts[0])
		t.Logf("%d convenience calls checked on each of %d ranks", counts[0], w.Size())
	})
}
