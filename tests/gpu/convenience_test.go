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
func TestConvenience(t *testing.T) { runConvenience(t, convenienceRank) }

// runConvenience runs rankCases, which returns the calls it checked, on
// every rank of each world and counts them.
func runConvenience(t *testing.T, rankCases func(r *irisrt.Rank) (int, error)) {
	cases := countCases(t)
	eachWorld(t, defaultOpts(), func(t *testing.T, w *irisrt.World) {
		counts := make([]int, w.Size())
		if err := w.Run(func(r *irisrt.Rank) error {
			n, err := rankCases(r)
			counts[r.Rank()] = n
			return err
		}); err != nil {
			t.Fatal(err)
		}
		cases.add(counts[0])
		t.Logf("%d convenience calls checked on each of %d ranks", counts[0], w.Size())
	})
}

// paramConvenience launches variant of pc's collective through the
// generated convenience call, which reads the sizes from the tensors (n
// given for send_recv, whose tensors only src and dst pass) and finds or
// makes the plan in the rank's cache.
func paramConvenience(r *irisrt.Rank, s gpu.Stream, pc *paramCase, variant string, dt irismodel.DType, op string, n int64, in, out irisrt.Tensor, a args, mode irismodel.Barrier) error {
	switch pc.coll {
	case "broadcast":
		return collectives.Broadcast(r, s, collectives.BroadcastVariant(variant), dt, in, out, a.root, mode)
	case "reduce":
		return collectives.Reduce(r, s, collectives.ReduceVariant(variant), dt, collectives.ReduceOp(op), in, out, a.root, mode)
	case "gather":
		return collectives.Gather(r, s, collectives.GatherVariant(variant), dt, in, out, a.root, mode)
	case "scatter":
		return collectives.Scatter(r, s, collectives.ScatterVariant(variant), dt, in, out, a.root, mode)
	case "send_recv":
		return collectives.SendRecv(r, s, collectives.SendRecvVariant(variant), dt, n, in, out, a.src, a.dst, mode)
	case "shift":
		return collectives.Shift(r, s, collectives.ShiftVariant(variant), dt, in, out, a.offset, mode)
	}
	return fmt.Errorf("no convenience call for %s", pc.coll)
}

// paramConvenienceRank runs every variant of the collectives with
// parameters, and auto, through the convenience calls at three sizes and
// two dtypes, from every root (pair, shift) in mode device, against the CPU
// reference; then checks that the cache made at least one plan per named
// variant, dtype and size. Each case is the matrix's own (checkParamCase)
// with its plan swapped for the convenience call; auto keeps the rules of
// the collective's first variant, which only place both tensors on the
// heap here, as every variant takes them.
func paramConvenienceRank(r *irisrt.Rank) (int, error) {
	before := irisimpl.CachedPlans(r)
	cases, plans, autos := 0, map[string]bool{}, map[string]bool{}
	// every variant: auto and the plan cache span the catalogue; shards run it whole
	for i := range paramCatalogue {
		pc := paramCatalogue[i]
		variants := []string{pc.variant}
		if !autos[pc.coll] {
			autos[pc.coll] = true
			variants = append(variants, irismodel.AutoVariant)
		}
		for _, variant := range variants {
			for _, dt := range []irismodel.DType{irismodel.BF16, irismodel.F32} {
				op := pc.ops()[0]
				for _, n := range []int64{7, 4096 + 3, 1 << 18} {
					conv := pc
					conv.newPlan = func(r *irisrt.Rank, dt irismodel.DType, op string, n int64) (pplan, error) {
						return pplan{
							launch: func(s gpu.Stream, in, out irisrt.Tensor, a args, m irismodel.Barrier) error {
								return paramConvenience(r, s, &pc, variant, dt, op, n, in, out, a, m)
							},
							close: func() error { return nil },
						}, nil
					}
					err := checkParamCase(r, &conv, dt, op, n, placement{true, true}, []irismodel.Barrier{irismodel.BarrierDevice}, pc.assignments(r.World()))
					if err != nil {
						return cases, fmt.Errorf("%s via %s %s n=%d: %w", pc.coll, variant, dt, n, err)
					}
					cases++
					if variant != irismodel.AutoVariant {
						plans[fmt.Sprint(pc.name(), dt, n)] = true
					}
				}
			}
		}
	}
	// auto reuses the plans of the variants it picks, or makes its own.
	if got := irisimpl.CachedPlans(r) - before; got < len(plans) {
		return cases, fmt.Errorf("%d plans cached for %d variant, dtype and size triples", got, len(plans))
	}
	return cases, nil
}

// TestParamConvenience runs the collectives with launch parameters through
// the generated convenience calls: the runtime's reading of the sizes,
// its choice of the auto variants (from the tensors' shapes alike on every
// rank, a root-only tensor included) and its plan cache, on the GPUs, in
// both worlds.
func TestParamConvenience(t *testing.T) { runConvenience(t, paramConvenienceRank) }
